package main

import (
	"strconv"
	"syscall"
	"time"
)

// A helper server stopped by a process of the sandbox (SIGSTOP, which the session's processes, root
// in the sandbox, may send to any process) would leave every call relayed to it waiting for good:
// the agent itself answers, so nothing above it notices. While the server runs, the agent looks at
// its state: stopped, it is continued; stopped again soon after, it is killed with every process
// under it and the next call starts it again, so calls fail at once instead of waiting.
const (
	helperWatchEvery      = time.Second
	helperContinuedMemory = 10 * time.Minute
)

// watchStopped looks at process pid every `every` until exited closes: found stopped, it is
// continued, unless it was continued within `memory` before: then it is killed with every process
// under it (kernels start sessions of their own) and its process group, so the caller's wait on it
// ends at once (a child left would hold its output pipe). logf says which happened.
func watchStopped(name string, pid int, exited <-chan struct{}, every, memory time.Duration, logf func(string, ...any)) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	var continuedAt time.Time
	for {
		select {
		case <-exited:
			return
		case <-ticker.C:
		}
		if !isStopped(pid) {
			continue
		}
		if !continuedAt.IsZero() && time.Since(continuedAt) < memory {
			logf("%s server (pid %d) stopped again %s after it was continued (by a process in the sandbox?): killed, the next call starts it again", name, pid, time.Since(continuedAt).Round(time.Second))
			for _, child := range descendantsOf(pid) {
				_ = syscall.Kill(child, syscall.SIGKILL)
			}
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return
		}
		logf("%s server (pid %d) was stopped (by a process in the sandbox?): continued", name, pid)
		_ = syscall.Kill(pid, syscall.SIGCONT)
		continuedAt = time.Now()
	}
}

// isStopped says whether process pid is stopped by a signal or held by a tracer.
func isStopped(pid int) bool {
	fields, ok := procStatFields(strconv.Itoa(pid))
	return ok && (fields[0] == "T" || fields[0] == "t")
}
