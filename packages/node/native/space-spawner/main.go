// space-spawner runs the node agent's host commands (ip, iptables-restore, btrfs, runsc) for it.
//
// Node.js starts a child with fork(), which copies the page tables of the whole node agent: with a
// few hundred MB resident on this nested virtual machine that blocks the agent's event loop ~14 ms
// per command (median; 66 ms at P99), and a sandbox's boot and removal run ~16 commands. Go starts
// a child with clone(CLONE_VM|CLONE_VFORK), which copies nothing (~0.3 ms), from this small
// process, off the agent's event loop.
//
// Protocol: one JSON object per line on stdin, one per line on stdout, in the order the commands
// end (matched by id). Commands run concurrently.
//
//	request:  {"id":1,"argv":["ip","netns","add","x"],"input":"...","cwd":"...","env":["K=V"],"discardOutput":false}
//	response: {"id":1,"code":0,"stdout":"...","stderr":"..."} or {"id":1,"error":"cannot run ip: ..."}
//
// A request with "detach":{"outputFile":"..."} starts a command that stays (runsc's subreaper,
// native/space-shim.c): in a session of its own, its stdout and stderr appended to the file, a pipe
// on fd 3. The answer comes when the command closes fd 3, with what it wrote there as "stdout";
// the command runs on and is reaped when it ends.
//
// A request with "timeoutMs" is killed (SIGKILL; a detached one with its whole session) if it has
// not ended (closed fd 3) by then, and answered with "timedOut":true: a runsc command on a sandbox
// whose Sentry is wedged never returns, `delete --force` included.
//
// Exits once stdin ends and every command has ended.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type request struct {
	ID            uint64   `json:"id"`
	Argv          []string `json:"argv"`
	Input         *string  `json:"input"`
	Cwd           string   `json:"cwd"`
	Env           []string `json:"env"`
	DiscardOutput bool     `json:"discardOutput"`
	Detach        *detach  `json:"detach"`
	TimeoutMs     int64    `json:"timeoutMs"`
}

type detach struct {
	OutputFile string `json:"outputFile"`
}

type response struct {
	ID       uint64 `json:"id"`
	Code     int    `json:"code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Error    string `json:"error,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
}

// A request line holds a command's input (iptables-restore rules, ip batches): far below this.
const maxRequestBytes = 64 << 20

func main() {
	out := json.NewEncoder(os.Stdout)
	var writing sync.Mutex
	reply := func(r response) {
		writing.Lock()
		defer writing.Unlock()
		if err := out.Encode(r); err != nil {
			// The agent is gone: nobody reads the answers, nothing is left to do.
			os.Exit(1)
		}
	}

	var running sync.WaitGroup
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 64<<10), maxRequestBytes)
	for lines.Scan() {
		var req request
		if err := json.Unmarshal(lines.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "space-spawner: unreadable request: %v\n", err)
			os.Exit(2)
		}
		running.Add(1)
		go func() {
			defer running.Done()
			reply(run(req))
		}()
	}
	if err := lines.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "space-spawner: %v\n", err)
	}
	running.Wait()
}

func run(req request) response {
	if len(req.Argv) == 0 {
		return response{ID: req.ID, Error: "no command given"}
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Dir = req.Cwd
	if req.Env != nil {
		cmd.Env = req.Env
	}
	if req.Detach != nil {
		return runDetached(req, cmd)
	}
	if req.Input != nil {
		cmd.Stdin = strings.NewReader(*req.Input)
	}
	var stdout, stderr bytes.Buffer
	if !req.DiscardOutput {
		cmd.Stdout = &stdout
		cmd.Stderr = &stderr
	}
	// Killed at its deadline, a command whose children still hold its output is not waited for long.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return notStarted(req, err)
	}
	deadline := killAfter(req.TimeoutMs, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	res := response{ID: req.ID, Stdout: stdout.String(), Stderr: stderr.String(), TimedOut: deadline.passed()}
	var exit *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
	case errors.As(err, &exit):
		res.Code = exitCode(exit)
	default:
		return notStarted(req, err)
	}
	return res
}

// notStarted answers a command that never started (not found, not executable, a bad working
// directory or output file).
func notStarted(req request, err error) response {
	return response{ID: req.ID, Error: fmt.Sprintf("cannot run %s: %v", req.Argv[0], err)}
}

// exitCode is the command's exit status, or 128 + the signal that ended it, as a shell reports it.
func exitCode(exit *exec.ExitError) int {
	if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return 128 + int(status.Signal())
	}
	return exit.ExitCode()
}

// runDetached starts a command that outlives its answer (see the protocol above).
func runDetached(req request, cmd *exec.Cmd) response {
	output, err := os.OpenFile(req.Detach.OutputFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return notStarted(req, err)
	}
	defer output.Close()
	status, statusWriter, err := os.Pipe()
	if err != nil {
		return notStarted(req, err)
	}
	defer status.Close()
	cmd.Stdout = output
	cmd.Stderr = output
	cmd.ExtraFiles = []*os.File{statusWriter}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	statusWriter.Close()
	if err != nil {
		return notStarted(req, err)
	}
	// Reaped whenever it ends; its exit says nothing the answer has not.
	go func() { _ = cmd.Wait() }()
	// Its session: the command and what it started (runsc's own processes).
	deadline := killAfter(req.TimeoutMs, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	text, _ := io.ReadAll(status)
	return response{ID: req.ID, Stdout: string(text), TimedOut: deadline.passed()}
}

// deadline is a kill armed for a command; stopped, it says whether it fired.
type deadline struct {
	timer *time.Timer
	fired atomic.Bool
}

// killAfter runs kill once ms have passed (never for 0); passed() disarms it.
func killAfter(ms int64, kill func()) *deadline {
	d := &deadline{}
	if ms > 0 {
		d.timer = time.AfterFunc(time.Duration(ms)*time.Millisecond, func() {
			d.fired.Store(true)
			kill()
		})
	}
	return d
}

// passed disarms the deadline and says whether the command was killed for it.
func (d *deadline) passed() bool {
	if d.timer != nil {
		d.timer.Stop()
	}
	return d.fired.Load()
}
