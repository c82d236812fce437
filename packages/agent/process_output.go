package main

import (
	"io"
	"sync"
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

func (p *managedProcess) pump(stream string, pipe io.Reader, done *sync.WaitGroup) {
	defer done.Done()
	buf := make([]byte, 64*1024)
	for {
		n, err := pipe.Read(buf)
		if n > 0 {
			data := make([]byte, n)
			copy(data, buf[:n])
			waiting := p.emitOutput(stream, data)
			for _, s := range waiting {
				s.waitBelow(highWaterBytes)
			}
		}
		if err != nil {
			return
		}
	}
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
