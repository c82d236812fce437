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
	"syscall"
)

type request struct {
	ID            uint64   `json:"id"`
	Argv          []string `json:"argv"`
	Input         *string  `json:"input"`
	Cwd           string   `json:"cwd"`
	Env           []string `json:"env"`
	DiscardOutput bool     `json:"discardOutput"`
	Detach        *detach  `json:"detach"`
}

type detach struct {
	OutputFile string `json:"outputFile"`
}

type response struct {
	ID     uint64 `json:"id"`
	Code   int    `json:"code"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Error  string `json:"error,omitempty"`
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
	err := cmd.Run()
	res := response{ID: req.ID, Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
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
	text, _ := io.ReadAll(status)
	return response{ID: req.ID, Stdout: string(text)}
}
