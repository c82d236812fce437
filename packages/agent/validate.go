package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// The request shapes of @space/protocol, checked as its zod schemas check them: strict objects
// (unknown fields refused), bounded strings and arrays, no NUL bytes, no ".." path segments.

// command is a request's cmd: a string run by /bin/sh -c, or an argv run directly.
type command struct {
	shell string
	args  []string
}

func (c *command) UnmarshalJSON(data []byte) error {
	if err := json.Unmarshal(data, &c.shell); err == nil {
		if c.shell == "" {
			return fmt.Errorf("cmd must not be empty")
		}
		if len(c.shell) > 256*1024 || strings.ContainsRune(c.shell, 0) {
			return fmt.Errorf("cmd must be at most 256 KiB without NUL")
		}
		return nil
	}
	if err := json.Unmarshal(data, &c.args); err != nil {
		return fmt.Errorf("cmd must be a string or an array of strings")
	}
	if len(c.args) == 0 || len(c.args) > limitMaxArgv {
		return fmt.Errorf("cmd must have 1 to %d elements", limitMaxArgv)
	}
	if c.args[0] == "" {
		return fmt.Errorf("cmd[0] (the program) must not be empty")
	}
	for _, a := range c.args {
		if len(a) > 256*1024 || strings.ContainsRune(a, 0) {
			return fmt.Errorf("argv entries must be at most 256 KiB without NUL")
		}
	}
	return nil
}

func (c command) argv() []string {
	if c.args != nil {
		return c.args
	}
	return []string{"/bin/sh", "-c", c.shell}
}

// raw is the command as the request gave it, for the process list.
func (c command) raw() any {
	if c.args != nil {
		return c.args
	}
	return c.shell
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkEnv(env map[string]string) error {
	if len(env) > limitMaxEnvEntries {
		return fmt.Errorf("at most %d env entries", limitMaxEnvEntries)
	}
	for k, v := range env {
		if len(k) > 256 || !envName.MatchString(k) {
			return fmt.Errorf("env names must match [A-Za-z_][A-Za-z0-9_]*")
		}
		if len(v) > 128*1024 || strings.ContainsRune(v, 0) {
			return fmt.Errorf("env values must be at most 128 KiB without NUL")
		}
	}
	return nil
}

func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path must not be empty")
	case len(p) > limitMaxPathLength:
		return fmt.Errorf("path longer than %d", limitMaxPathLength)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path may not contain NUL bytes")
	}
	for _, segment := range strings.Split(p, "/") {
		if segment == ".." {
			return fmt.Errorf(`path may not contain ".." segments`)
		}
	}
	return nil
}

func checkTimeout(ms *float64) error {
	if ms == nil {
		return nil
	}
	if *ms != math.Trunc(*ms) || *ms <= 0 || *ms > limitMaxExecTimeoutMs {
		return fmt.Errorf("timeoutMs must be an integer from 1 to %d", limitMaxExecTimeoutMs)
	}
	return nil
}

func parseSignal(name string) (syscall.Signal, error) {
	for _, allowed := range signalNames {
		if allowed == name {
			return signalByName[name], nil
		}
	}
	return 0, fmt.Errorf("signal must be one of %s", strings.Join(signalNames, ", "))
}

var signalByName = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT, "SIGKILL": syscall.SIGKILL,
	"SIGUSR1": syscall.SIGUSR1, "SIGSEGV": syscall.SIGSEGV, "SIGUSR2": syscall.SIGUSR2, "SIGPIPE": syscall.SIGPIPE,
	"SIGALRM": syscall.SIGALRM, "SIGTERM": syscall.SIGTERM, "SIGSTOP": syscall.SIGSTOP, "SIGCONT": syscall.SIGCONT,
	"SIGWINCH": syscall.SIGWINCH, "SIGABRT": syscall.SIGABRT, "SIGBUS": syscall.SIGBUS, "SIGFPE": syscall.SIGFPE,
	"SIGILL": syscall.SIGILL, "SIGTRAP": syscall.SIGTRAP, "SIGXCPU": syscall.SIGXCPU, "SIGXFSZ": syscall.SIGXFSZ,
	"SIGSYS": syscall.SIGSYS, "SIGTSTP": syscall.SIGTSTP, "SIGTTIN": syscall.SIGTTIN, "SIGTTOU": syscall.SIGTTOU,
	"SIGVTALRM": syscall.SIGVTALRM, "SIGPROF": syscall.SIGPROF, "SIGIO": syscall.SIGIO, "SIGPWR": syscall.SIGPWR,
}

// signalName is the name a process's terminating signal is reported by.
func signalName(s syscall.Signal) string {
	for name, value := range signalByName {
		if value == s {
			return name
		}
	}
	return "SIG" + strconv.Itoa(int(s))
}

// decodeStrict parses one JSON object into v, refusing unknown fields and trailing data.
func decodeStrict(data []byte, v any, what string) error {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(v); err != nil {
		if _, ok := err.(*json.SyntaxError); ok || err == io.ErrUnexpectedEOF {
			return newError(codeInvalidJson, "%s is not valid JSON: %v", what, err)
		}
		return newError(codeValidationFailed, "invalid %s: %v", what, err)
	}
	if decoder.More() {
		return newError(codeInvalidJson, "%s has data after the JSON value", what)
	}
	return nil
}

// readBody reads a JSON request body of at most limitMaxJsonBodyBytes.
func readBody(body io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, limitMaxJsonBodyBytes+1))
	if err != nil {
		return nil, newError(codeRequestAborted, "the request body could not be read: %v", err)
	}
	if len(data) > limitMaxJsonBodyBytes {
		return nil, newError(codePayloadTooLarge, "request body exceeds %d bytes", limitMaxJsonBodyBytes)
	}
	return data, nil
}

// queryValues checks a query string against the fields a route allows.
func queryValues(u *url.URL, allowed ...string) (url.Values, error) {
	values := u.Query()
	for key, vs := range values {
		known := false
		for _, a := range allowed {
			known = known || a == key
		}
		if !known {
			return nil, newError(codeValidationFailed, "invalid query: unknown parameter %q", key)
		}
		if len(vs) > 1 {
			return nil, newError(codeValidationFailed, "invalid query: %q given more than once", key)
		}
	}
	return values, nil
}

func queryPath(u *url.URL, allowed ...string) (string, url.Values, error) {
	values, err := queryValues(u, append([]string{"path"}, allowed...)...)
	if err != nil {
		return "", nil, err
	}
	p := values.Get("path")
	if err := checkPath(p); err != nil {
		return "", nil, newError(codeValidationFailed, "invalid query: path: %v", err)
	}
	return p, values, nil
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// toValidUTF8 decodes output as UTF-8 the way Node's Buffer#toString does: invalid bytes become U+FFFD.
func toValidUTF8(data []byte) string {
	return strings.ToValidUTF8(string(data), "\uFFFD")
}

// validDefaultCwd: a session's default working directory is absolute and a valid path.
func validDefaultCwd(p string) bool {
	return filepath.IsAbs(p) && checkPath(p) == nil
}
