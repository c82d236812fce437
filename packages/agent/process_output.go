package main

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"
)

// A managed process's output: pumped from its pipes, kept as a bounded backlog for clients that
// re-attach, and delivered in order to its subscribers, whose backlog holds the output back.

// processEvent is output (offset: where the chunk starts in the process's output, stdout and stderr
// counted together) or the exit.
type processEvent struct {
	Type     string // "stdout", "stderr" or "exit"
	Data     []byte
	Offset   int64
	ExitCode int
	Signal   string // empty: none
	TimedOut bool
}

// subscriber receives a process's events in order; deliver must not block. A subscriber with a
// backlog makes the process's output wait (flow control, as pausing its pipes).
type subscriber interface {
	deliver(event processEvent)
	waitBelow(limit int)
}

// highWaterBytes: above this much undelivered output for one subscriber, the process's output waits.
const highWaterBytes = 4 * 1024 * 1024

// After the process itself has ended, its pipes are read on only while output keeps coming within
// outputQuietAfterExit, and for outputAfterExitMax at most: what it wrote is in them already, but
// what it left running (`npm run dev &`, `setsid …`) may hold them open for ever, and its exit must
// not wait for that (as E2B's agent does not). A pipe with no other holder ends at once: an exec
// that leaves nothing running is answered without any wait.
const (
	outputQuietAfterExit = 25 * time.Millisecond
	outputAfterExitMax   = 500 * time.Millisecond
)

// pump delivers what the pipe gives until it ends, or until its output is settled after the exit
// (`done` then): what comes later is read and dropped, so whoever still writes never blocks or gets
// EPIPE, until the last writer closes it.
func (p *managedProcess) pump(stream string, pipe *os.File, done *sync.WaitGroup) {
	settled := sync.OnceFunc(done.Done)
	defer settled()
	defer pipe.Close()
	buf := make([]byte, 64*1024)
	for {
		n, err := pipe.Read(buf)
		if n > 0 {
			p.deliver(stream, buf[:n])
			p.armReadDeadline(pipe)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Quiet since the exit, or its bound passed. A read past its deadline reads nothing, so
			// what the pipe holds now (all the process wrote is in it) is read without waiting.
			_ = pipe.SetReadDeadline(time.Time{})
			if readHeld(pipe, buf, func(data []byte) { p.deliver(stream, data) }) {
				return
			}
			settled()
			for {
				if _, err := pipe.Read(buf); err != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// deliver emits a chunk of output (copied: the buffer is read into again) and waits while a
// subscriber has too much of it undelivered.
func (p *managedProcess) deliver(stream string, chunk []byte) {
	data := make([]byte, len(chunk))
	copy(data, chunk)
	for _, s := range p.emitOutput(stream, data) {
		s.waitBelow(highWaterBytes)
	}
}

// readHeld passes on what the pipe holds right now, without waiting for more; true when it ended
// (every writer closed it).
func readHeld(pipe *os.File, buf []byte, emit func([]byte)) bool {
	raw, err := pipe.SyscallConn()
	if err != nil {
		return false
	}
	for {
		var n int
		var readErr error
		// Returning true never waits for readability: EAGAIN means nothing more now.
		if err := raw.Read(func(fd uintptr) bool {
			n, readErr = syscall.Read(int(fd), buf)
			return true
		}); err != nil {
			return false
		}
		if n <= 0 {
			return n == 0 && readErr == nil
		}
		emit(buf[:n])
	}
}

// settleOutput starts the countdown of both pipes once the process itself has ended. Their first
// deadlines are armed before the exit is published: from then on only each pipe's pump arms its
// deadline (or clears it, past it, and drops what comes), never this goroutine late.
func (p *managedProcess) settleOutput(pipes ...*os.File) {
	exited := time.Now()
	for _, pipe := range pipes {
		_ = pipe.SetReadDeadline(exited.Add(outputQuietAfterExit))
	}
	p.exitedAt.Store(&exited)
}

// armReadDeadline gives the pipe's next read outputQuietAfterExit, within outputAfterExitMax of
// the exit; nothing before the exit. Times with their monotonic reading: a restored sandbox's wall
// clock jumps.
func (p *managedProcess) armReadDeadline(pipe *os.File) {
	exited := p.exitedAt.Load()
	if exited == nil {
		return
	}
	deadline := time.Now().Add(outputQuietAfterExit)
	if last := exited.Add(outputAfterExitMax); deadline.After(last) {
		deadline = last
	}
	_ = pipe.SetReadDeadline(deadline)
}

func (p *managedProcess) emitOutput(stream string, data []byte) []subscriber {
	p.mu.Lock()
	defer p.mu.Unlock()
	event := processEvent{Type: stream, Data: data, Offset: p.produced}
	p.produced += int64(len(data))
	p.emitLocked(event)
	subscribers := make([]subscriber, 0, len(p.subscribers))
	for s := range p.subscribers {
		subscribers = append(subscribers, s)
	}
	return subscribers
}

func (p *managedProcess) emitLocked(event processEvent) {
	p.backlog = append(p.backlog, event)
	if event.Type != "exit" {
		p.backlogSize += len(event.Data)
	}
	for p.backlogSize > limitBackgroundBacklogBytes && len(p.backlog) > 1 {
		dropped := p.backlog[0]
		p.backlog = p.backlog[1:]
		if dropped.Type != "exit" {
			p.backlogSize -= len(dropped.Data)
		}
	}
	for s := range p.subscribers {
		s.deliver(event)
	}
}

// subscribe delivers events to s; with replay, first the kept output from offset after on (and the
// exit, if any): a client that reconnects gets exactly what it missed, if it is still kept.
func (p *managedProcess) subscribe(s subscriber, replay bool, after int64) (unsubscribe func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if replay {
		for _, event := range p.backlog {
			if event.Type == "exit" {
				s.deliver(event)
			} else if end := event.Offset + int64(len(event.Data)); end > after {
				if skip := after - event.Offset; skip > 0 {
					event.Data, event.Offset = event.Data[skip:], event.Offset+skip
				}
				s.deliver(event)
			}
		}
	}
	if p.exit != nil {
		if replay && !p.backlogHasExit() {
			s.deliver(*p.exit)
		}
		return func() {}
	}
	p.subscribers[s] = struct{}{}
	return func() {
		p.mu.Lock()
		delete(p.subscribers, s)
		p.mu.Unlock()
	}
}

// outputSoFar is how many bytes of output the process has produced (stdout and stderr together).
func (p *managedProcess) outputSoFar() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.produced
}

func (p *managedProcess) backlogHasExit() bool {
	for _, e := range p.backlog {
		if e.Type == "exit" {
			return true
		}
	}
	return false
}
