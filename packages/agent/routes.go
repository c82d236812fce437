package main

import (
	"net/http"
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
	code      *codeServer
	desktop   *helperServer
	logf      func(format string, args ...any)
	routes    map[string]handler

	tokenMu sync.Mutex
	token   string // replaced when an agent restored from a memory image serves a new sandbox
}

var processPath = regexp.MustCompile(`^/processes/([0-9]{1,9})/(signal|attach)$`)

func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.RequestURI) > limitMaxUrlLength {
		writeError(w, newError(codeUriTooLong, "request target of %d characters exceeds the limit of %d", len(r.RequestURI), limitMaxUrlLength))
		return
	}
	if !a.authorized(r) {
		writeError(w, newError(codeUnauthorized, "daemon channel token missing or wrong"))
		return
	}
	w = traced(w, r)
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
		// The node's, after a restore: the code contexts the memory image held, without starting the server.
		"GET /code-state": func(w http.ResponseWriter, r *http.Request) error { return a.code.contextsIfRunning(w, r) },
		"POST /exec":      a.exec,
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
	if strings.HasPrefix(path, "/code/") {
		return a.code.serve(w, r)
	}
	if strings.HasPrefix(path, "/desktop/") {
		return a.desktop.serve(w, r)
	}
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
