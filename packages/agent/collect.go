package main

import "sync"

// outputCollector gathers a process's output until it exits, keeping at most max bytes of each of
// stdout and stderr (the rest is dropped and flagged).
type outputCollector struct {
	max int

	mu        sync.Mutex
	out       map[string][]byte
	truncated bool
	exit      chan processEvent
}

func newOutputCollector(max int) *outputCollector {
	return &outputCollector{max: max, out: map[string][]byte{"stdout": nil, "stderr": nil}, exit: make(chan processEvent, 1)}
}

func (c *outputCollector) deliver(event processEvent) {
	if event.Type == "exit" {
		c.exit <- event
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.out[event.Type]
	room := c.max - len(kept)
	data := event.Data
	if len(data) > room {
		data, c.truncated = data[:max(0, room)], true
	}
	c.out[event.Type] = append(kept, data...)
}

func (c *outputCollector) waitBelow(int) {}

// wait returns the ExecResult once the process has exited.
func (c *outputCollector) wait() map[string]any {
	event := <-c.exit
	c.mu.Lock()
	defer c.mu.Unlock()
	var signal any
	if event.Signal != "" {
		signal = event.Signal
	}
	return map[string]any{
		"exitCode":  event.ExitCode,
		"signal":    signal,
		"timedOut":  event.TimedOut,
		"truncated": c.truncated,
		"stdout":    toValidUTF8(c.out["stdout"]),
		"stderr":    toValidUTF8(c.out["stderr"]),
	}
}
