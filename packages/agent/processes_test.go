package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWorkingDirectoryFollowsTheSessionsDefault(t *testing.T) {
	table := newProcessTable(sandboxPaths{workdir: "/workspace"}, map[string]string{}, "", time.Second)
	cases := []struct{ defaultCwd, requested, want string }{
		{"", "", "/workspace"},
		{"", "src", "/workspace/src"},
		{"", "/tmp", "/tmp"},
		{"/app", "", "/app"},
		{"/app", "src", "/app/src"},
		{"/app", "/tmp", "/tmp"},
	}
	for _, c := range cases {
		table.setDefaultCwd(c.defaultCwd)
		got, err := table.workingDirectory(c.requested)
		if err != nil || got != c.want {
			t.Errorf("default %q, cwd %q: got %q, %v; want %q", c.defaultCwd, c.requested, got, err, c.want)
		}
	}
	table.setDefaultCwd("/app")
	if _, err := table.workingDirectory("../etc"); err == nil {
		t.Error(`a cwd with ".." is refused under a default too`)
	}
}

func TestValidDefaultCwd(t *testing.T) {
	for p, want := range map[string]bool{"/app": true, "/srv/my app": true, "app": false, "/app/../etc": false, "/a\x00b": false} {
		if got := validDefaultCwd(p); got != want {
			t.Errorf("validDefaultCwd(%q) = %v, want %v", p, got, want)
		}
	}
}

// The session's working directory removed by one of its commands is made again by the next that
// names no cwd; a missing cwd asked for is the caller's mistake, never made.
func TestRemovedDefaultCwdIsMadeAgain(t *testing.T) {
	table := testTable(t)
	home := filepath.Join(t.TempDir(), "workspace")
	table.setDefaultCwd(home)
	if got := runToEnd(t, table, startOptions{Cmd: sh("pwd")}, 1024, nil); got["stdout"] != home+"\n" {
		t.Fatalf("in the removed default: %v", got)
	}
	if info, err := os.Stat(home); err != nil || !info.IsDir() {
		t.Fatalf("not made again: %v", err)
	}
	asked := filepath.Join(t.TempDir(), "missing")
	if _, err := table.start(startOptions{Cmd: sh("pwd"), Cwd: asked}); err == nil {
		t.Fatal("a missing cwd asked for ran")
	}
	if _, err := os.Stat(asked); err == nil {
		t.Fatal("a missing cwd asked for was made")
	}
}
