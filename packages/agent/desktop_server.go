package main

import (
	"os"
	"time"
)

// The desktop: its server (space-desktop-server.py, in the runtime directory) runs the X display,
// its window manager and what is launched on it, takes screenshots and sends input; the agent
// starts it at boot in a template that says it has a desktop (the marker file), before it answers
// (see main), and again on the next /desktop call after it exits.

const (
	desktopServerScript = "/.space/space-desktop-server.py"
	desktopServerSocket = "/run/space/desktop/server.sock"
	desktopServerRunDir = "/run/space/desktop"
	// desktopMarker is written by the desktop template's recipe.
	desktopMarker = "/etc/space/desktop"
	// The server's socket answers once its display is up (a second or two at a cold boot).
	desktopServerStartTimeout = 30 * time.Second
)

func newDesktopServer(cwd string, env map[string]string, logf func(string, ...any)) *helperServer {
	return newHelperServer(&helperServer{
		name:   "desktop",
		prefix: "/desktop",
		socket: desktopServerSocket,
		runDir: desktopServerRunDir,
		absent: func() *apiError {
			_, marker := os.Stat(desktopMarker)
			_, python := os.Stat("/usr/bin/python3")
			if marker == nil && python == nil {
				return nil
			}
			return newError(codeNoDesktop, "this sandbox's template has no desktop; create the session with the desktop template")
		},
		command: func(string) []string {
			return []string{"/usr/bin/python3", desktopServerScript, "--socket", desktopServerSocket, "--run-dir", desktopServerRunDir}
		},
		failCode:     codeDesktopUnavailable,
		startTimeout: desktopServerStartTimeout,
	}, cwd, env, logf)
}
