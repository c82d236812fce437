package main

import (
	"strings"
	"syscall"
	"testing"
)

func TestRequestValidation(t *testing.T) {
	paths := map[string]bool{
		"/workspace/a.txt": true, "notes/a.txt": true, "./x": true,
		"": false, "../etc/passwd": false, "a/../../b": false, "a\x00b": false, strings.Repeat("a", limitMaxPathLength+1): false,
	}
	for p, ok := range paths {
		if (checkPath(p) == nil) != ok {
			t.Errorf("checkPath(%.40q): want ok=%v", p, ok)
		}
	}
	envs := []struct {
		env map[string]string
		ok  bool
	}{
		{map[string]string{"A": "1", "_b2": ""}, true},
		{map[string]string{"1A": "x"}, false},
		{map[string]string{"A-B": "x"}, false},
		{map[string]string{"A": "x\x00y"}, false},
		{map[string]string{"A": strings.Repeat("v", 128*1024+1)}, false},
	}
	for _, e := range envs {
		if (checkEnv(e.env) == nil) != e.ok {
			t.Errorf("checkEnv(%v): want ok=%v", e.env, e.ok)
		}
	}
	for ms, ok := range map[float64]bool{1: true, 60000: true, limitMaxExecTimeoutMs: true, 0: false, -5: false, 1.5: false, limitMaxExecTimeoutMs + 1: false} {
		value := ms
		if (checkTimeout(&value) == nil) != ok {
			t.Errorf("checkTimeout(%v): want ok=%v", ms, ok)
		}
	}
	if checkTimeout(nil) != nil {
		t.Error("no timeout is the default, not an error")
	}
	if s, err := parseSignal("SIGTERM"); err != nil || s != syscall.SIGTERM {
		t.Errorf("parseSignal(SIGTERM) = %v, %v", s, err)
	}
	if _, err := parseSignal("SIGNOPE"); err == nil || !strings.Contains(err.Error(), "SIGKILL") {
		t.Errorf("an unknown signal is refused naming the allowed ones: %v", err)
	}
	if signalName(syscall.SIGKILL) != "SIGKILL" {
		t.Error("SIGKILL is reported by its name")
	}
}

func TestSandboxPathsResolveUnderTheWorkspace(t *testing.T) {
	paths := sandboxPaths{workdir: "/workspace"}
	for requested, want := range map[string]string{"": "/workspace", "a/b.txt": "/workspace/a/b.txt", "/etc/hosts": "/etc/hosts", "/tmp//x/": "/tmp/x"} {
		if got, err := paths.resolve(requested); err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", requested, got, err, want)
		}
	}
	if _, err := paths.resolve("a/../../etc"); err == nil {
		t.Error(`".." is refused, never resolved`)
	}
}
