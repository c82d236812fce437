package main

import (
	"encoding/json"
	"net/http"
	"os"
	"time"
)

// The code interpreter: its server (space-code-server.py, in the runtime directory) runs Python
// kernels and JavaScript and bash contexts; the agent starts it at boot in templates that say they
// have one (the marker file), else on the first /code call (helper_server.go).

const (
	codeServerScript = "/.space/space-code-server.py"
	codeServerSocket = "/run/space/code/server.sock"
	codeServerRunDir = "/run/space/code"
	// codeInterpreterMarker is written by the code-interpreter template's recipe.
	codeInterpreterMarker = "/etc/space/code-interpreter"
	// How long the server may take to start its default Python kernel (a cold start in gVisor takes seconds).
	codeServerStartTimeout = 120 * time.Second
)

type codeServer struct{ *helperServer }

func newCodeServer(cwd string, env map[string]string, logf func(string, ...any)) *codeServer {
	limits, _ := json.Marshal(map[string]int{
		"maxCodeBytes":            limitMaxCodeBytes,
		"maxCodeEventBytes":       limitMaxCodeEventBytes,
		"maxCellOutputBytes":      limitMaxCellOutputBytes,
		"maxCodeStreamChunkBytes": limitMaxCodeStreamChunkBytes,
		"maxCodeContexts":         limitMaxCodeContexts,
	})
	return &codeServer{newHelperServer(&helperServer{
		name:   "code interpreter",
		prefix: "/code",
		socket: codeServerSocket,
		runDir: codeServerRunDir,
		absent: func() *apiError {
			if codeInterpreterAvailable() {
				return nil
			}
			return newError(codeCodeInterpreterUnavailable, "this sandbox's template has no code interpreter (Python 3 with ipykernel); create the session with the code-interpreter template")
		},
		command: func(cwd string) []string {
			return []string{"/usr/bin/python3", codeServerScript, "--socket", codeServerSocket, "--run-dir", codeServerRunDir, "--cwd", cwd, "--limits", string(limits)}
		},
		failCode:     codeCodeInterpreterUnavailable,
		startTimeout: codeServerStartTimeout,
	}, cwd, env, logf)}
}

// codeInterpreterAvailable says whether this sandbox's template has the code interpreter's server and Python.
func codeInterpreterAvailable() bool {
	_, script := os.Stat(codeServerScript)
	_, python := os.Stat("/usr/bin/python3")
	return script == nil && python == nil
}

// contextsIfRunning answers the server's contexts, or none when it does not run (never starting
// it): the node's question after a restore, which cell each kernel went back to.
func (s *codeServer) contextsIfRunning(w http.ResponseWriter, r *http.Request) error {
	if !s.isRunning() {
		writeJSON(w, 200, map[string]any{"contexts": []any{}})
		return nil
	}
	r.URL.Path = "/code/contexts"
	s.proxy.ServeHTTP(headerFlusher{w}, r)
	return nil
}
