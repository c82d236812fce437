package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The code interpreter: its server (space-code-server.py, in the runtime directory) runs Python
// kernels and JavaScript and bash contexts, and listens on a Unix socket only this agent reaches, so it is never
// a way into the sandbox of its own and never holds a connection with the outside (which a full
// checkpoint would refuse). The agent starts it at boot in templates that say they have one (the
// marker file), else on the first /code call, again after it exits, and relays /code/* to it.

const (
	codeServerScript = "/.space/space-code-server.py"
	codeServerSocket = "/run/space/code/server.sock"
	codeServerRunDir = "/run/space/code"
	// codeInterpreterMarker is written by the code-interpreter template's recipe.
	codeInterpreterMarker = "/etc/space/code-interpreter"
	// How long the server may take to start its default Python kernel (a cold start in gVisor takes seconds).
	codeServerStartTimeout = 120 * time.Second
)

type codeServer struct {
	logf  func(format string, args ...any)
	cwd   string
	env   []string
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	starting chan struct{} // closed when the start under way has an outcome
	running  bool
	failure  error // why the last start failed; cleared by the next attempt
}

func newCodeServer(cwd string, env map[string]string, logf func(string, ...any)) *codeServer {
	s := &codeServer{logf: logf, cwd: cwd, env: envList(env)}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", codeServerSocket)
	}
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(p *httputil.ProxyRequest) {
			p.Out.URL.Scheme, p.Out.URL.Host = "http", "code-server"
			p.Out.URL.Path = strings.TrimPrefix(p.In.URL.Path, "/code")
			p.Out.Header.Del("Authorization")
		},
		// No keep-alive: the server answers each request on a connection of its own (HTTP/1.0).
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true},
		// Cell output reaches the caller as it comes, not when a buffer fills.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(r.Context().Err(), context.Canceled) {
				return // the caller left; the server sees it too
			}
			writeError(w, newError(codeCodeInterpreterUnavailable, "the code interpreter did not answer: %v", err))
		},
	}
	return s
}

// codeInterpreterAvailable says whether this sandbox's template has the code interpreter's server and Python.
func codeInterpreterAvailable() bool {
	_, script := os.Stat(codeServerScript)
	_, python := os.Stat("/usr/bin/python3")
	return script == nil && python == nil
}

// serve relays one /code/* request, starting the server first when it does not run.
func (s *codeServer) serve(w http.ResponseWriter, r *http.Request) error {
	if !codeInterpreterAvailable() {
		return newError(codeCodeInterpreterUnavailable, "this sandbox's template has no code interpreter (Python 3 with ipykernel); create the session with the code-interpreter template")
	}
	if err := s.ensure(r.Context()); err != nil {
		return err
	}
	s.proxy.ServeHTTP(headerFlusher{w}, r)
	return nil
}

// headerFlusher sends the reply's headers as soon as they are written: a cell that prints nothing
// for a while must still answer, so its caller can tell it runs (and can leave, interrupting it).
type headerFlusher struct{ http.ResponseWriter }

func (h headerFlusher) WriteHeader(status int) {
	h.ResponseWriter.WriteHeader(status)
	h.Flush()
}

func (h headerFlusher) Flush() {
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (h headerFlusher) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// contextsIfRunning answers the server's contexts, or none when it does not run (never starting
// it): the node's question after a restore, which cell each kernel went back to.
func (s *codeServer) contextsIfRunning(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if !running {
		writeJSON(w, 200, map[string]any{"contexts": []any{}})
		return nil
	}
	r.URL.Path = "/code/contexts"
	s.proxy.ServeHTTP(headerFlusher{w}, r)
	return nil
}

// ensure returns once the server answers, starting it when it does not run; concurrent callers wait on one start.
func (s *codeServer) ensure(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return nil
	}
	if s.starting == nil {
		s.starting = make(chan struct{})
		go s.start(s.starting)
	}
	starting := s.starting
	s.mu.Unlock()
	select {
	case <-starting:
	case <-ctx.Done():
		return newError(codeRequestAborted, "the caller left while the code interpreter started")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	return s.failure
}

// start runs the server and waits for its socket; the server's exit is noticed and the next call starts it again.
func (s *codeServer) start(done chan struct{}) {
	stderr := newTailBuffer(4096)
	limits, _ := json.Marshal(map[string]int{
		"maxCodeBytes":            limitMaxCodeBytes,
		"maxCodeEventBytes":       limitMaxCodeEventBytes,
		"maxCellOutputBytes":      limitMaxCellOutputBytes,
		"maxCodeStreamChunkBytes": limitMaxCodeStreamChunkBytes,
		"maxCodeContexts":         limitMaxCodeContexts,
	})
	s.mu.Lock()
	cwd, env := s.cwd, s.env
	s.mu.Unlock()
	cmd := exec.Command("/usr/bin/python3", codeServerScript, "--socket", codeServerSocket, "--run-dir", codeServerRunDir, "--cwd", cwd, "--limits", string(limits))
	cmd.Env, cmd.Dir, cmd.Stderr = env, "/", stderr
	// Its own process group: signals meant for a user's processes never reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	_ = os.MkdirAll(codeServerRunDir, 0o700)
	err := cmd.Start()
	exited := make(chan struct{})
	if err == nil {
		go func() {
			_ = cmd.Wait()
			close(exited)
			s.mu.Lock()
			s.running = false
			s.mu.Unlock()
			s.logf("code interpreter server exited (%v): %s", cmd.ProcessState, strings.TrimSpace(stderr.String()))
		}()
		err = waitForSocket(codeServerSocket, exited, codeServerStartTimeout)
		if err != nil {
			_ = cmd.Process.Kill()
		}
	}
	s.mu.Lock()
	s.running = err == nil
	s.failure = nil
	if err != nil {
		s.failure = newError(codeCodeInterpreterUnavailable, "the code interpreter did not start: %v: %s", err, truncate(strings.TrimSpace(stderr.String()), 2000))
	}
	s.starting = nil
	s.mu.Unlock()
	close(done)
}

// setSession gives the contexts a new session's environment and working directory (a pooled
// sandbox or a template's image, whose server started before the session claimed it): kernels that
// run take them on at once, new ones start with them.
func (s *codeServer) setSession(env map[string]string, cwd string) {
	s.mu.Lock()
	s.env = envList(env)
	if cwd != "" {
		s.cwd = cwd
	}
	cwd = s.cwd
	active := s.running || s.starting != nil
	s.mu.Unlock()
	if !active {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), codeServerStartTimeout)
		defer cancel()
		if s.ensure(ctx) != nil {
			return
		}
		body, _ := json.Marshal(map[string]any{"env": env, "cwd": cwd})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://code-server/session", strings.NewReader(string(body)))
		res, err := s.proxy.Transport.RoundTrip(req)
		if err != nil {
			s.logf("code interpreter: cannot hand it the session's environment: %v", err)
			return
		}
		res.Body.Close()
	}()
}

func waitForSocket(path string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("it exited")
		default:
		}
		if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("its socket did not answer in time")
}

// tailBuffer keeps the last bytes written to it: a failed start's message.
type tailBuffer struct {
	mu   sync.Mutex
	max  int
	data []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.data = append(b.data, p...)
	if len(b.data) > b.max {
		b.data = b.data[len(b.data)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.data)
}
