package main

import (
	"errors"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// keepFinished is how many finished processes stay listed (and re-attachable) after they exit.
const keepFinished = 64

// startOptions describes a process to start; cmd is a string (run by /bin/sh -c) or an argv.
type startOptions struct {
	Cmd       command
	Cwd       string
	Env       map[string]string
	TimeoutMs int64
	Pty       *ptySize
}

type ptySize struct{ Cols, Rows int }

// processTable holds every process the agent started, by pid.
type processTable struct {
	paths     sandboxPaths
	ptyHelper string
	// defaultTimeout applies to a process started without one (the protocol's default exec timeout).
	defaultTimeout time.Duration

	mu      sync.Mutex
	baseEnv map[string]string
	// defaultCwd is where a process without a cwd starts, and what a relative one is under: the
	// session's template's WORKDIR, or "" for the workspace.
	defaultCwd string
	processes  map[int]*managedProcess
	startOrder []int
}

func newProcessTable(paths sandboxPaths, baseEnv map[string]string, ptyHelper string, defaultTimeout time.Duration) *processTable {
	return &processTable{paths: paths, ptyHelper: ptyHelper, defaultTimeout: defaultTimeout, baseEnv: baseEnv, processes: map[int]*managedProcess{}}
}

// setSessionEnv adds the session's variables for processes started from now on (a restored
// sandbox serves a new session).
func (t *processTable) setSessionEnv(env map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	merged := map[string]string{}
	for k, v := range t.baseEnv {
		merged[k] = v
	}
	for k, v := range env {
		merged[k] = v
	}
	t.baseEnv = merged
}

// sessionEnv is a copy of the environment processes start with.
func (t *processTable) sessionEnv() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	env := make(map[string]string, len(t.baseEnv))
	for k, v := range t.baseEnv {
		env[k] = v
	}
	return env
}

func (t *processTable) start(o startOptions) (*managedProcess, error) {
	argv := o.Cmd.argv()
	cwd, err := t.workingDirectory(o.Cwd)
	if err != nil {
		return nil, err
	}
	if o.Cwd == "" {
		remakeIfRemoved(cwd)
	}
	if err := checkWorkingDirectory(cwd); err != nil {
		return nil, err
	}
	t.mu.Lock()
	env := map[string]string{}
	for k, v := range t.baseEnv {
		env[k] = v
	}
	t.mu.Unlock()
	for k, v := range o.Env {
		env[k] = v
	}
	file, args := argv[0], argv
	if o.Pty != nil {
		if _, ok := env["TERM"]; !ok {
			env["TERM"] = "xterm-256color"
		}
		file = t.ptyHelper
		args = append([]string{t.ptyHelper, strconv.Itoa(o.Pty.Rows), strconv.Itoa(o.Pty.Cols), "--"}, argv...)
	}
	path, err := lookPath(file, env["PATH"])
	if err != nil {
		return nil, newError(codeExecFailed, "cannot start %q: no such file or not executable", argv[0])
	}
	cmd := &exec.Cmd{Path: path, Args: args, Dir: cwd, Env: envList(env), SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	timeout := time.Duration(o.TimeoutMs) * time.Millisecond
	if o.TimeoutMs == 0 {
		timeout = t.defaultTimeout
	}
	proc, err := startManagedProcess(cmd, o.Cmd.raw(), o.Pty != nil, timeout)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			if known, ok := errnoCodes[errno]; ok {
				return nil, newError(known.code, "cannot start %q: %s (%s)", argv[0], known.meaning, known.name)
			}
		}
		return nil, newError(codeExecFailed, "cannot start %q: %v", argv[0], err)
	}
	t.mu.Lock()
	t.processes[proc.pid] = proc
	t.startOrder = append(t.startOrder, proc.pid)
	t.mu.Unlock()
	t.prune(keepFinished)
	return proc, nil
}

func (t *processTable) get(pid int) (*managedProcess, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.processes[pid]; ok {
		return p, nil
	}
	return nil, newError(codeProcessNotFound, "no process with pid %d was started by this sandbox's daemon", pid)
}

// getInstance is get for a client that knows which process it means: a pid now held by another
// process (reused, or the sandbox was replaced) is not found.
func (t *processTable) getInstance(pid int, instance string) (*managedProcess, error) {
	p, err := t.get(pid)
	if err != nil || instance == "" || p.instance == instance {
		return p, err
	}
	return nil, newError(codeProcessNotFound, "pid %d is now another process than the one asked for (instance %s)", pid, instance)
}

type processInfo struct {
	Pid       int    `json:"pid"`
	Instance  string `json:"instance"`
	Cmd       any    `json:"cmd"`
	StartedAt string `json:"startedAt"`
	Running   bool   `json:"running"`
	ExitCode  *int   `json:"exitCode"`
	Pty       bool   `json:"pty"`
}

func (t *processTable) list() []processInfo {
	t.mu.Lock()
	procs := make([]*managedProcess, 0, len(t.startOrder))
	for _, pid := range t.startOrder {
		procs = append(procs, t.processes[pid])
	}
	t.mu.Unlock()
	list := []processInfo{}
	for _, p := range procs {
		code := p.exitCode()
		list = append(list, processInfo{Pid: p.pid, Instance: p.instance, Cmd: p.cmd, StartedAt: p.startedAt, Running: code == nil, ExitCode: code, Pty: p.pty})
	}
	return list
}

// untracked counts the live processes of the sandbox this agent did not start, nor init nor the
// agent itself: `nohup … &`, `setsid`, daemons that detached, children that outlived their parent.
// Their memory is what a full checkpoint saves too, so they count for the automatic ones.
func (t *processTable) untracked() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	self := os.Getpid()
	count := 0
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == 1 || pid == self {
			continue
		}
		if _, tracked := t.processes[pid]; tracked {
			continue
		}
		fields, ok := procStatFields(entry.Name())
		// A zombie has ended.
		if ok && fields[0] != "Z" && !t.isDescendantOfTracked(fields[1]) {
			count++
		}
	}
	return count
}

// isDescendantOfTracked says whether the process whose parent is `parent` runs under a process the
// agent started (a tracked process's child counts with it). Called with t.mu held.
func (t *processTable) isDescendantOfTracked(parent string) bool {
	for depth := 0; depth < 64; depth++ {
		pid, err := strconv.Atoi(parent)
		if err != nil || pid <= 1 {
			return false
		}
		if _, tracked := t.processes[pid]; tracked {
			return true
		}
		fields, ok := procStatFields(parent)
		if !ok {
			return false
		}
		parent = fields[1]
	}
	return false
}

// forgetFinished drops finished processes: a sandbox handed to a new session shows none of its
// earlier ones.
func (t *processTable) forgetFinished() { t.prune(0) }

func (t *processTable) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.processes {
		p.kill(syscall.SIGKILL)
	}
}

// prune drops the oldest finished processes beyond keep.
func (t *processTable) prune(keep int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var finished []int
	for _, pid := range t.startOrder {
		if p, ok := t.processes[pid]; ok && !p.running() {
			finished = append(finished, pid)
		}
	}
	for _, pid := range finished[:max(0, len(finished)-keep)] {
		delete(t.processes, pid)
	}
	order := t.startOrder[:0]
	for _, pid := range t.startOrder {
		if _, ok := t.processes[pid]; ok {
			order = append(order, pid)
		}
	}
	t.startOrder = order
}

// lookPath finds file like execvp does, with the process's own PATH.
func lookPath(file, pathEnv string) (string, error) {
	if strings.ContainsRune(file, '/') {
		if isExecutable(file) {
			return file, nil
		}
		return "", os.ErrNotExist
	}
	if pathEnv == "" {
		pathEnv = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" {
			dir = "."
		}
		candidate := dir + "/" + file
		if isExecutable(candidate) {
			return candidate, nil
		}
	}
	return "", os.ErrNotExist
}

func isExecutable(file string) bool {
	info, err := os.Stat(file)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

func envList(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	list := make([]string, 0, len(keys))
	for _, k := range keys {
		list = append(list, k+"="+env[k])
	}
	return list
}
