package main

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// managedProcess is a process started by the agent: it keeps running when its client goes away,
// keeps the tail of its output so a client can re-attach, and reports its exit once to every
// subscriber.
type managedProcess struct {
	pid int
	// instance names this process apart from any other that has or will have its pid: one in
	// another sandbox of the session, or one started after a restore. A restored process keeps it.
	instance  string
	cmd       any // the request's command, a string or a []string, listed back as given
	pty       bool
	startedAt string

	stdin   chan []byte // written by one goroutine, so a process that does not read its stdin blocks no caller
	done    chan struct{}
	control io.WriteCloser // "R rows cols" resize requests to the PTY helper
	timer   *time.Timer

	exitedAt atomic.Pointer[time.Time] // when the process itself ended, nil before: its output is then read only while it keeps coming

	mu          sync.Mutex // guards everything below; held while events are delivered, to keep order
	exit        *processEvent
	subscribers map[subscriber]struct{}
	backlog     []processEvent
	backlogSize int
	produced    int64
	timedOut    bool
	stdinClosed bool
}

func startManagedProcess(cmd *exec.Cmd, command any, pty bool, timeout time.Duration) (*managedProcess, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Pipes of its own, not exec's (whose Wait closes them at the exit): read on after the exit while
	// they give output (see settleOutput).
	stdout, stdoutWriter, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer stdoutWriter.Close()
	stderr, stderrWriter, err := os.Pipe()
	if err != nil {
		stdout.Close()
		return nil, err
	}
	defer stderrWriter.Close()
	cmd.Stdout = stdoutWriter
	cmd.Stderr = stderrWriter
	var control io.WriteCloser
	if pty {
		reader, writer, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmd.ExtraFiles = []*os.File{reader}
		control = writer
		defer reader.Close()
	}
	if err := cmd.Start(); err != nil {
		if control != nil {
			control.Close()
		}
		stdout.Close()
		stderr.Close()
		return nil, err
	}
	p := &managedProcess{
		pid: cmd.Process.Pid, instance: randomHex(8), cmd: command, pty: pty, startedAt: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		stdin: make(chan []byte, 16), done: make(chan struct{}), control: control, subscribers: map[subscriber]struct{}{},
	}
	go p.feedStdin(stdin)
	p.timer = time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.timedOut = true
		p.mu.Unlock()
		p.kill(syscall.SIGKILL)
	})
	var pipes sync.WaitGroup
	pipes.Add(2)
	go p.pump("stdout", stdout, &pipes)
	go p.pump("stderr", stderr, &pipes)
	go func() {
		// The process itself ended (what it left running may still hold its pipes: `server &`).
		_ = cmd.Wait()
		p.timer.Stop()
		p.settleOutput(stdout, stderr)
		pipes.Wait()
		if control != nil {
			control.Close()
		}
		p.finish(cmd.ProcessState)
		close(p.done)
	}()
	return p, nil
}

func (p *managedProcess) finish(state *os.ProcessState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	event := processEvent{Type: "exit", TimedOut: p.timedOut, ExitCode: 1}
	status, _ := state.Sys().(syscall.WaitStatus)
	switch {
	case state == nil:
	case status.Signaled():
		event.Signal = signalName(status.Signal())
		event.ExitCode = 128 + int(status.Signal())
	default:
		event.ExitCode = status.ExitStatus()
	}
	if p.timedOut {
		event.ExitCode = 124
	}
	p.exit = &event
	p.emitLocked(event)
	p.subscribers = map[subscriber]struct{}{}
}

func (p *managedProcess) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit == nil
}

func (p *managedProcess) exitCode() *int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		return nil
	}
	code := p.exit.ExitCode
	return &code
}

// write queues data for the process's stdin; nil ends it. It waits only while 16 writes are queued
// and the process runs.
func (p *managedProcess) write(data []byte) {
	select {
	case p.stdin <- data:
	case <-p.done:
	}
}

func (p *managedProcess) endStdin() {
	p.mu.Lock()
	already := p.stdinClosed
	p.stdinClosed = true
	p.mu.Unlock()
	if !already {
		p.write(nil)
	}
}

// feedStdin writes the queued stdin; after the end or a write error it drops what still comes.
func (p *managedProcess) feedStdin(pipe io.WriteCloser) {
	defer pipe.Close()
	open := true
	for {
		select {
		case data := <-p.stdin:
			if !open {
				continue
			}
			if data == nil {
				open = false
				_ = pipe.Close()
			} else if _, err := pipe.Write(data); err != nil {
				open = false
			}
		case <-p.done:
			return
		}
	}
}

func (p *managedProcess) resize(cols, rows int) {
	if p.control != nil {
		_, _ = io.WriteString(p.control, "R "+strconv.Itoa(rows)+" "+strconv.Itoa(cols)+"\n")
	}
}

// kill signals the whole process group, so a shell's children go too.
func (p *managedProcess) kill(signal syscall.Signal) {
	if !p.running() {
		return
	}
	if err := syscall.Kill(-p.pid, signal); err != nil {
		_ = syscall.Kill(p.pid, signal)
	}
}
