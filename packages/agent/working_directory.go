package main

import (
	"errors"
	"io/fs"
	"os"
)

// Where a process starts: the session's default (its template's WORKDIR) or the workspace, and
// relative cwds under it.

// setDefaultCwd makes cwd (absolute, or "" for the workspace) where processes start from now on.
func (t *processTable) setDefaultCwd(cwd string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.defaultCwd = cwd
}

// workingDirectory is where a process asked to start in requested starts: an absolute path as it
// is, a relative one (or none) under the session's default.
func (t *processTable) workingDirectory(requested string) (string, error) {
	t.mu.Lock()
	base := t.defaultCwd
	t.mu.Unlock()
	if base == "" {
		return t.paths.resolve(requested)
	}
	return sandboxPaths{workdir: base}.resolve(requested)
}

// checkWorkingDirectory names a missing or non-directory cwd as the caller's mistake.
func checkWorkingDirectory(cwd string) error {
	info, err := os.Stat(cwd)
	if err != nil {
		return fsError(err, cwd)
	}
	if !info.IsDir() {
		return newError(codeNotADirectory, "cwd %q is not a directory", cwd)
	}
	return nil
}

// remakeIfRemoved makes the session's own working directory again when a command of the session
// removed it (`rm -rf /workspace` before a clone into it): else every later command that names no
// cwd would fail, until one happened to name another. A cwd asked for is never made.
func remakeIfRemoved(cwd string) {
	if _, err := os.Stat(cwd); errors.Is(err, fs.ErrNotExist) {
		_ = os.MkdirAll(cwd, 0o755)
	}
}
