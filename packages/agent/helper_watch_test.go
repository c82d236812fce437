package main

import (
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A helper server stopped from inside the sandbox, with a real process: continued once, killed
// with its process group when stopped again within the memory, left alone while it runs.
func TestWatchStoppedContinuesOnceThenKills(t *testing.T) {
	// A child in a session of its own, as a kernel is: killed all the same.
	cmd := exec.Command("/bin/sh", "-c", "setsid sleep 61 & sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A pipe, as a server's stderr is: its wait ends only once every process holding it has.
	cmd.Stderr = &strings.Builder{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer syscall.Kill(-pid, syscall.SIGKILL)
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var mu sync.Mutex
	var logged []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, format)
	}
	lines := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), logged...)
	}
	watched := make(chan struct{})
	go func() {
		watchStopped("test", pid, exited, 20*time.Millisecond, time.Minute, logf)
		close(watched)
	}()

	waitFor := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !done(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 5 s: %s", what)
			}
		}
	}
	waitFor("the process and its children run", func() bool { return len(descendantsOf(pid)) == 2 })
	for _, child := range descendantsOf(pid) {
		defer syscall.Kill(child, syscall.SIGKILL)
	}
	time.Sleep(100 * time.Millisecond)
	if said := lines(); isStopped(pid) || len(said) != 0 {
		t.Fatalf("a running process was acted on: %q", said)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor("continued", func() bool { return len(lines()) == 1 && !isStopped(pid) })
	if said := lines(); !strings.Contains(said[0], "continued") {
		t.Fatalf("logged %q", said)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("stopped again, the process was not killed")
	}
	<-watched
	if said := lines(); len(said) != 2 || !strings.Contains(said[1], "killed") {
		t.Fatalf("logged %q", said)
	}
	// Its whole group, and the child in a session of its own: the wait ended, so the pipe closed.
	waitFor("the group gone", func() bool { return syscall.Kill(-pid, 0) != nil })
}
