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

// helperServer runs one of the runtime directory's Python servers (the code interpreter's, the
// desktop's) on a Unix socket only this agent reaches, so it is never a way into the sandbox of
// its own and never holds a connection with the outside (which a full checkpoint would refuse). It
// is started on the first call under its prefix (at boot too, for the code interpreter), again
// after it exits, and those calls are relayed to it.
type helperServer struct {
	name   string // in messages: "code interpreter", "desktop"
	prefix string // "/code", "/desktop": stripped before the request reaches the server
	socket string
	runDir string
	// absent says why this sandbox's template lacks the server (a request is refused with it); nil when it has it.
	absent func() *apiError
	// command is the server's argv, given the working directory it starts in.
	command      func(cwd string) []string
	failCode     string // the code of a failed start
	startTimeout time.Duration

	logf  func(format string, args ...any)
	cwd   string
	env   []string
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	starting chan struct{} // closed when the start under way has an outcome
	running  bool
	failure  error // why the last start failed; cleared by the next attempt
}

// newHelperServer fills in the relay; the caller sets what the server is.
func newHelperServer(s *helperServer, cwd string, env map[string]string, logf func(string, ...any)) *helperServer {
	s.cwd, s.env, s.logf = cwd, envList(env), logf
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.socket)
	}
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(p *httputil.ProxyRequest) {
			p.Out.URL.Scheme, p.Out.URL.Host = "http", "helper"
			p.Out.URL.Path = strings.TrimPrefix(p.In.URL.Path, s.prefix)
			p.Out.Header.Del("Authorization")
		},
		// No keep-alive: the server answers each request on a connection of its own (HTTP/1.0).
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true},
		// Output reaches the caller as it comes, not when a buffer fills.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(r.Context().Err(), context.Canceled) {
				return // the caller left; the server sees it too
			}
			writeError(w, newError(s.failCode, "the %s did not answer: %v", s.name, err))
		},
	}
	return s
}

// serve relays one request under the prefix, starting the server first when it does not run.
func (s *helperServer) serve(w http.ResponseWriter, r *http.Request) error {
	if err := s.absent(); err != nil {
		return err
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

// isRunning says whether the server runs now (never starting it).
func (s *helperServer) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// ensure returns once the server answers, starting it when it does not run; concurrent callers wait on one start.
func (s *helperServer) ensure(ctx context.Context) error {
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
		return newError(codeRequestAborted, "the caller left while the %s started", s.name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	return s.failure
}

// start runs the server and waits for its socket; the server's exit is noticed and the next call starts it again.
func (s *helperServer) start(done chan struct{}) {
	stderr := newTailBuffer(4096)
	s.mu.Lock()
	cwd, env := s.cwd, s.env
	s.mu.Unlock()
	argv := s.command(cwd)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stderr = env, "/", stderr
	// Its own process group: signals meant for a user's processes never reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	_ = os.MkdirAll(s.runDir, 0o700)
	err := cmd.Start()
	exited := make(chan struct{})
	if err == nil {
		go func() {
			_ = cmd.Wait()
			close(exited)
			s.mu.Lock()
			s.running = false
			s.mu.Unlock()
			s.logf("%s server exited (%v): %s", s.name, cmd.ProcessState, strings.TrimSpace(stderr.String()))
		}()
		err = waitForSocket(s.socket, exited, s.startTimeout)
		if err != nil {
			_ = cmd.Process.Kill()
		} else {
			go watchStopped(s.name, cmd.Process.Pid, exited, helperWatchEvery, helperContinuedMemory, s.logf)
		}
	}
	s.mu.Lock()
	s.running = err == nil
	s.failure = nil
	if err != nil {
		s.failure = newError(s.failCode, "the %s did not start: %v: %s", s.name, err, truncate(strings.TrimSpace(stderr.String()), 2000))
	}
	s.starting = nil
	s.mu.Unlock()
	close(done)
}

// setSession gives the server a new session's environment and working directory (a pooled
// sandbox or a template's image, whose server started before the session claimed it): the server
// takes them on at once when it runs (POST /session), else starts with them.
func (s *helperServer) setSession(env map[string]string, cwd string) {
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
		ctx, cancel := context.WithTimeout(context.Background(), s.startTimeout)
		defer cancel()
		if s.ensure(ctx) != nil {
			return
		}
		body, _ := json.Marshal(map[string]any{"env": env, "cwd": cwd})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://helper/session", strings.NewReader(string(body)))
		res, err := s.proxy.Transport.RoundTrip(req)
		if err != nil {
			s.logf("%s: cannot hand it the session's environment: %v", s.name, err)
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
