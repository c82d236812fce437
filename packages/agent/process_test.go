package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The lifecycle of processes the agent starts, with real processes: output and exit, stdin,
// timeouts, signals to the whole group, re-attach from an offset, and how the table keeps them.

func testTable(t *testing.T) *processTable {
	t.Helper()
	return newProcessTable(sandboxPaths{workdir: t.TempDir()}, map[string]string{"PATH": "/usr/bin:/bin"}, "", 10*time.Second)
}

func sh(script string) command { return command{args: []string{"/bin/sh", "-c", script}} }

// runToEnd starts the process and collects what it prints until it exits (or fails the test after 10 s).
func runToEnd(t *testing.T, table *processTable, o startOptions, max int, before func(*managedProcess)) map[string]any {
	t.Helper()
	proc, err := table.start(o)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	collector := newOutputCollector(max)
	proc.subscribe(collector, true, 0)
	if before != nil {
		before(proc)
	}
	select {
	case <-proc.done:
	case <-time.After(10 * time.Second):
		proc.kill(9)
		t.Fatal("the process did not end within 10 s")
	}
	return collector.wait()
}

func TestAProcessReportsItsOutputAndExitCode(t *testing.T) {
	got := runToEnd(t, testTable(t), startOptions{Cmd: sh("echo out; echo err >&2; exit 3")}, 1024, nil)
	if got["exitCode"] != 3 || got["stdout"] != "out\n" || got["stderr"] != "err\n" || got["timedOut"] != false || got["signal"] != nil {
		t.Fatalf("got %v", got)
	}
}

func TestOutputBeyondTheBoundIsDroppedAndFlagged(t *testing.T) {
	got := runToEnd(t, testTable(t), startOptions{Cmd: sh("printf abcdefgh")}, 4, nil)
	if got["stdout"] != "abcd" || got["truncated"] != true {
		t.Fatalf("got %v", got)
	}
}

func TestStdinReachesTheProcessAndItsEndClosesIt(t *testing.T) {
	got := runToEnd(t, testTable(t), startOptions{Cmd: command{args: []string{"cat"}}}, 1024, func(p *managedProcess) {
		p.write([]byte("hello "))
		p.write([]byte("world"))
		p.endStdin()
		p.endStdin() // a second end is harmless
	})
	if got["stdout"] != "hello world" || got["exitCode"] != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestATimedOutProcessIsKilledWithExitCode124(t *testing.T) {
	started := time.Now()
	got := runToEnd(t, testTable(t), startOptions{Cmd: sh("sleep 30"), TimeoutMs: 200}, 1024, nil)
	if got["exitCode"] != 124 || got["timedOut"] != true {
		t.Fatalf("got %v", got)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Fatalf("the timeout took %v", took)
	}
}

func TestASignalReachesTheWholeProcessGroup(t *testing.T) {
	table := testTable(t)
	// The shell waits for its child: both get the signal, sent to the group.
	got := runToEnd(t, table, startOptions{Cmd: sh("sleep 30 & wait")}, 1024, func(p *managedProcess) {
		time.Sleep(100 * time.Millisecond)
		p.kill(15)
	})
	if got["signal"] != "SIGTERM" || got["exitCode"] != 143 {
		t.Fatalf("got %v", got)
	}
}

func TestAProcessThatLeavesAChildHoldingItsOutputIsReportedAtItsOwnExit(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "child-ran-on")
	started := time.Now()
	// Like `npm run dev &`: the child keeps the pipes, writes after the shell exits, and must run on.
	got := runToEnd(t, testTable(t), startOptions{Cmd: sh("(sleep 0.5; echo later; touch " + marker + ") & echo started")}, 1024, nil)
	if got["stdout"] != "started\n" || got["exitCode"] != 0 || got["timedOut"] != false {
		t.Fatalf("got %v", got)
	}
	if took := time.Since(started); took > 400*time.Millisecond {
		t.Fatalf("the exit was reported %v after the start: it waited for the child", took)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not run on after the exit (killed, or blocked writing to its pipe)")
		}
	}
}

func TestAChildWritingWithoutPauseHoldsTheExitForAtMostHalfASecond(t *testing.T) {
	table := testTable(t)
	proc, err := table.start(startOptions{Cmd: sh("while true; do echo tick; sleep 0.005; done & echo started")})
	if err != nil {
		t.Fatal(err)
	}
	// The loop is in the process's group: ended with it whatever the test does.
	defer syscall.Kill(-proc.pid, syscall.SIGKILL)
	collector := newOutputCollector(1 << 20)
	proc.subscribe(collector, true, 0)
	started := time.Now()
	select {
	case <-proc.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the exit was not reported within 5 s")
	}
	if took := time.Since(started); took > outputAfterExitMax+300*time.Millisecond {
		t.Fatalf("the exit was reported after %v", took)
	}
	if got := collector.wait(); !strings.Contains(got["stdout"].(string), "started\n") || got["exitCode"] != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestOutputHeldInThePipeIsDeliveredThoughItsDeadlinePassed(t *testing.T) {
	reader, writer, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	// The pump was late (a busy sandbox): the exit's bound passed before it read what the process wrote.
	p := &managedProcess{subscribers: map[subscriber]struct{}{}}
	exited := time.Now().Add(-time.Minute)
	p.exitedAt.Store(&exited)
	if _, err := writer.Write([]byte("written before the exit")); err != nil {
		t.Fatal(err)
	}
	p.armReadDeadline(reader)
	var settled sync.WaitGroup
	settled.Add(1)
	go p.pump("stdout", reader, &settled)
	settled.Wait()
	if got := p.outputSoFar(); got != int64(len("written before the exit")) {
		t.Fatalf("delivered %d bytes of %d", got, len("written before the exit"))
	}
	// A child still holding the pipe writes on: read and dropped, never blocked.
	for i := 0; i < 100; i++ {
		if _, err := writer.Write(make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.outputSoFar(); got != int64(len("written before the exit")) {
		t.Fatalf("output after the settle was delivered: %d bytes", got)
	}
}

func TestReattachingReplaysTheOutputAfterAnOffsetThenTheExit(t *testing.T) {
	table := testTable(t)
	proc, err := table.start(startOptions{Cmd: sh("printf abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	<-proc.done
	late := &recordingSubscriber{}
	proc.subscribe(late, true, 3)
	if got := late.text(); got != "def|exit 0" {
		t.Fatalf("replay after offset 3: %q", got)
	}
	if proc.outputSoFar() != 6 {
		t.Fatalf("outputSoFar = %d", proc.outputSoFar())
	}
	// Without replay, a subscriber of an ended process gets nothing.
	none := &recordingSubscriber{}
	proc.subscribe(none, false, 0)
	if none.text() != "" {
		t.Fatalf("got %q", none.text())
	}
}

func TestTheTableListsProcessesAndKeepsOnlyTheNewestFinished(t *testing.T) {
	table := testTable(t)
	long, err := table.start(startOptions{Cmd: sh("sleep 30")})
	if err != nil {
		t.Fatal(err)
	}
	defer long.kill(9)
	for i := 0; i < keepFinished+3; i++ {
		p, err := table.start(startOptions{Cmd: sh("exit 7")})
		if err != nil {
			t.Fatal(err)
		}
		<-p.done
	}
	table.prune(keepFinished)
	list := table.list()
	if len(list) != keepFinished+1 || list[0].Pid != long.pid || !list[0].Running || list[0].ExitCode != nil {
		t.Fatalf("%d listed, first %+v", len(list), list[0])
	}
	if last := list[len(list)-1]; last.Running || last.ExitCode == nil || *last.ExitCode != 7 {
		t.Fatalf("last %+v", last)
	}
	// A known pid of another instance is not that process.
	if _, err := table.getInstance(long.pid, strings.Repeat("0", 16)); err == nil || asAPIError(err).Code != codeProcessNotFound {
		t.Fatalf("another instance: %v", err)
	}
	if p, err := table.getInstance(long.pid, long.instance); err != nil || p != long {
		t.Fatalf("its own instance: %v", err)
	}
	table.forgetFinished()
	if list := table.list(); len(list) != 1 || list[0].Pid != long.pid {
		t.Fatalf("after forgetFinished: %+v", list)
	}
	if _, err := table.get(999999); err == nil || asAPIError(err).Code != codeProcessNotFound {
		t.Fatalf("unknown pid: %v", err)
	}
}

func TestAProgramThatCannotRunIsRefused(t *testing.T) {
	table := testTable(t)
	for _, argv := range [][]string{{"no-such-program"}, {"/etc/hostname"}} {
		if _, err := table.start(startOptions{Cmd: command{args: argv}}); err == nil || asAPIError(err).Code != codeExecFailed {
			t.Errorf("%v: %v", argv, err)
		}
	}
	if _, err := table.start(startOptions{Cmd: sh("true"), Cwd: "no-such-dir"}); err == nil {
		t.Error("a missing cwd is refused")
	}
}

// recordingSubscriber writes down what it is given: output as text, the exit as "exit N".
type recordingSubscriber struct {
	mu     sync.Mutex
	events []string
}

func (r *recordingSubscriber) deliver(event processEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if event.Type == "exit" {
		r.events = append(r.events, "exit "+strconv.Itoa(event.ExitCode))
		return
	}
	r.events = append(r.events, string(event.Data))
}

func (r *recordingSubscriber) waitBelow(int) {}

func (r *recordingSubscriber) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "|")
}
