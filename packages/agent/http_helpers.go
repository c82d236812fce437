package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"regexp"
	"strings"
)

// The agent's HTTP plumbing, shared by its routes: the channel token, strict JSON bodies, replies,
// and WebSocket streams.

var bearer = regexp.MustCompile(`(?i)^Bearer\s+(\S{1,512})$`)

func (a *agent) authorized(r *http.Request) bool {
	match := bearer.FindStringSubmatch(strings.TrimSpace(r.Header.Get("Authorization")))
	if match == nil {
		return false
	}
	a.tokenMu.Lock()
	token := a.token
	a.tokenMu.Unlock()
	// Hashing first makes the lengths equal, so the comparison takes constant time.
	given, want := sha256.Sum256([]byte(match[1])), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(given[:], want[:]) == 1
}

// readJSON reads a strict JSON body into v and runs check on it.
func readJSON(r *http.Request, v any, check func() error) error {
	data, err := readBody(r.Body)
	if err != nil {
		return err
	}
	if err := decodeStrict(data, v, "request body"); err != nil {
		return err
	}
	if check != nil {
		if err := check(); err != nil {
			return newError(codeValidationFailed, "invalid request body: %v", err)
		}
	}
	return nil
}

// replyOK writes {"ok": true} unless the operation failed.
func replyOK(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, 200, map[string]bool{"ok": true})
	return nil
}

// reply writes the operation's result unless it failed.
func reply[T any](w http.ResponseWriter, value T, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, 200, value)
	return nil
}

// withStream upgrades the request to a WebSocket and runs serve on it; the stream counts as
// attached (blocking full checkpoints) until serve returns.
func (a *agent) withStream(w http.ResponseWriter, r *http.Request, serve func(ws *wsConn)) error {
	ws, err := upgradeWebSocket(w, r)
	if err != nil {
		return err
	}
	a.channel.StreamOpened()
	go func() {
		defer a.channel.StreamClosed()
		defer ws.drop()
		serve(ws)
	}()
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
