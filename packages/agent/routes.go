package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// agent serves the sandbox routes of @space/protocol (sandboxRoutes) and, for the node agent only,
// /quiesce and /rebind, all behind the channel token.
type agent struct {
	channel   *channel
	processes *processTable
	files     fileService
	logf      func(format string, args ...any)
	routes    map[string]handler

	tokenMu sync.Mutex
	token   string // replaced when an agent restored from a memory image serves a new sandbox
}

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

var (
	processPath          = regexp.MustCompile(`^/processes/([0-9]{1,9})/(signal|attach)$`)
	channelToken         = regexp.MustCompile(`^[0-9a-f]{64}$`)
	processInstanceShape = regexp.MustCompile(`^[0-9a-f]{16}$`)
	hostnameShape        = regexp.MustCompile(`^space-[a-z0-9]{1,32}$`)
	machineIDShape       = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.RequestURI) > limitMaxUrlLength {
		writeError(w, newError(codeUriTooLong, "request target of %d characters exceeds the limit of %d", len(r.RequestURI), limitMaxUrlLength))
		return
	}
	if !a.authorized(r) {
		writeError(w, newError(codeUnauthorized, "daemon channel token missing or wrong"))
		return
	}
	if err := a.route(w, r); err != nil {
		e := asAPIError(err)
		if e.Code == codeInternal {
			a.logf("%s %s: %s", r.Method, truncate(r.URL.Path, 200), e.Message)
		}
		writeError(w, e)
	}
}

// handler serves one route; an error is answered with its code's status.
type handler func(w http.ResponseWriter, r *http.Request) error

// routeTable is the sandbox routes of @space/protocol by "METHOD /path", plus the node agent's own
// /quiesce, /sync, /rebind and /relieve-memory (never relayed from above). Per-process routes are matched apart.
func (a *agent) routeTable() map[string]handler {
	return map[string]handler{
		"GET /health": func(w http.ResponseWriter, _ *http.Request) error {
			writeJSON(w, 200, map[string]bool{"ok": true})
			return nil
		},
		"POST /quiesce": a.quiesce,
		// Before an fs checkpoint: the sandbox kernel's cached writes reach the volume (no process is started for it).
		"POST /sync": func(w http.ResponseWriter, _ *http.Request) error {
			syscall.Sync()
			return replyOK(w, nil)
		},
		"POST /rebind": a.rebind,
		// The node's call when the sandbox's cgroup nears its memory: the biggest process goes if it is used up.
		"POST /relieve-memory": func(w http.ResponseWriter, _ *http.Request) error {
			writeJSON(w, 200, relieveMemory(a.logf))
			return nil
		},
		"POST /exec": a.exec,
		"GET /exec/stream": func(w http.ResponseWriter, r *http.Request) error {
			return a.stream(w, r, false)
		},
		"GET /pty": func(w http.ResponseWriter, r *http.Request) error {
			return a.stream(w, r, true)
		},
		"GET /processes": func(w http.ResponseWriter, _ *http.Request) error {
			return reply(w, map[string]any{"processes": a.processes.list(), "untracked": a.processes.untracked()}, nil)
		},
		"GET /files":        a.download,
		"PUT /files":        a.upload,
		"DELETE /files":     a.removeFile,
		"GET /files/list":   a.listFiles,
		"GET /files/stat":   a.statFile,
		"POST /files/mkdir": a.mkdir,
		"POST /files/move":  a.move,
		"GET /files/watch":  a.watch,
	}
}

func (a *agent) route(w http.ResponseWriter, r *http.Request) error {
	path := r.URL.Path
	if m := processPath.FindStringSubmatch(path); m != nil {
		pid, _ := strconv.Atoi(m[1])
		if m[2] == "signal" && r.Method == http.MethodPost {
			return a.signal(w, r, pid)
		}
		if m[2] == "attach" && r.Method == http.MethodGet {
			return a.attach(w, r, pid)
		}
		return newError(codeMethodNotAllowed, "%s is not allowed on %s", r.Method, path)
	}
	if serve, ok := a.routes[r.Method+" "+path]; ok {
		return serve(w, r)
	}
	for key := range a.routes {
		if strings.HasSuffix(key, " "+path) {
			return newError(codeMethodNotAllowed, "%s is not allowed on %s", r.Method, path)
		}
	}
	return newError(codeRouteNotFound, "no route for %s %s", r.Method, truncate(path, 200))
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

// Node agent only (not in sandboxRoutes, so never relayed): around full checkpoints and restores.
func (a *agent) quiesce(w http.ResponseWriter, r *http.Request) error {
	if blockers := a.channel.Blockers(); len(blockers) > 0 {
		return newError(codeFullCheckpointRefused, "cannot save this sandbox's memory now: %s", strings.Join(blockers, "; "))
	}
	a.channel.Quiesce(connOf(r))
	writeJSON(w, 200, map[string]int{"daemonPid": os.Getpid()})
	return nil
}

func (a *agent) rebind(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Token      string            `json:"token"`
		Env        map[string]string `json:"env"`
		Identity   *sandboxIdentity  `json:"identity"`
		NewSession *bool             `json:"newSession"`
		Cwd        *string           `json:"cwd"`
	}
	check := func() error {
		switch {
		case !channelToken.MatchString(body.Token):
			return errString("token must be 64 hex digits")
		case body.Env == nil || body.NewSession == nil:
			return errString("env and newSession are required")
		case body.Identity != nil && !hostnameShape.MatchString(body.Identity.Hostname):
			return errString("identity.hostname is malformed")
		case body.Identity != nil && body.Identity.MachineID != "" && !machineIDShape.MatchString(body.Identity.MachineID):
			return errString("identity.machineId is malformed")
		case body.Cwd != nil && *body.Cwd != "" && !validDefaultCwd(*body.Cwd):
			return errString("cwd must be an absolute path without \"..\" segments")
		}
		return checkEnv(body.Env)
	}
	if err := readJSON(r, &body, check); err != nil {
		return err
	}
	if body.Identity != nil {
		if err := applyIdentity(*body.Identity); err != nil {
			return newError(codeInternal, "cannot take on the sandbox identity: %v", err)
		}
	}
	a.processes.setSessionEnv(body.Env)
	if body.Cwd != nil {
		a.processes.setDefaultCwd(*body.Cwd)
	}
	if *body.NewSession {
		a.processes.forgetFinished()
	}
	a.tokenMu.Lock()
	a.token = body.Token
	a.tokenMu.Unlock()
	writeJSON(w, 200, map[string]bool{"ok": true})
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
