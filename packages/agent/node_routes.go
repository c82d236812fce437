package main

import (
	"net/http"
	"os"
	"regexp"
	"strings"
)

var (
	channelToken   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	hostnameShape  = regexp.MustCompile(`^space-[a-z0-9]{1,32}$`)
	machineIDShape = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// Node agent only (not in sandboxRoutes, so never relayed): around full checkpoints and restores.
func (a *agent) quiesce(w http.ResponseWriter, r *http.Request) error {
	if blockers := a.channel.Blockers(); len(blockers) > 0 {
		return newError(codeFullCheckpointRefused, "cannot save this sandbox's memory now: %s", strings.Join(blockers, "; "))
	}
	a.channel.Quiesce(connOf(r))
	writeJSON(w, 200, map[string]int{"daemonPid": os.Getpid()})
	return nil
}

func (a *agent) rebind(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Token      string            `json:"token"`
		Env        map[string]string `json:"env"`
		Identity   *sandboxIdentity  `json:"identity"`
		NewSession *bool             `json:"newSession"`
		Cwd        *string           `json:"cwd"`
	}
	check := func() error {
		switch {
		case !channelToken.MatchString(body.Token):
			return errString("token must be 64 hex digits")
		case body.Env == nil || body.NewSession == nil:
			return errString("env and newSession are required")
		case body.Identity != nil && !hostnameShape.MatchString(body.Identity.Hostname):
			return errString("identity.hostname is malformed")
		case body.Identity != nil && body.Identity.MachineID != "" && !machineIDShape.MatchString(body.Identity.MachineID):
			return errString("identity.machineId is malformed")
		case body.Cwd != nil && *body.Cwd != "" && !validDefaultCwd(*body.Cwd):
			return errString("cwd must be an absolute path without \"..\" segments")
		}
		return checkEnv(body.Env)
	}
	if err := readJSON(r, &body, check); err != nil {
		return err
	}
	if body.Identity != nil {
		if err := applyIdentity(*body.Identity); err != nil {
			return newError(codeInternal, "cannot take on the sandbox identity: %v", err)
		}
	}
	a.processes.setSessionEnv(body.Env)
	if body.Cwd != nil {
		a.processes.setDefaultCwd(*body.Cwd)
	}
	cwd := ""
	if body.Cwd != nil {
		cwd = *body.Cwd
	}
	a.code.setSession(a.processes.sessionEnv(), cwd)
	a.desktop.setSession(a.processes.sessionEnv(), cwd)
	if *body.NewSession {
		a.processes.forgetFinished()
	}
	a.tokenMu.Lock()
	a.token = body.Token
	a.tokenMu.Unlock()
	writeJSON(w, 200, map[string]bool{"ok": true})
	return nil
}
