package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	// Where space-init (PID 1, the only process with CAP_SYS_ADMIN) reads the hostname to set on SIGUSR1.
	hostnameRequestFile = "/run/space/hostname"
	machineIDFile       = "/etc/machine-id"
	hostnameWait        = 2 * time.Second
)

type sandboxIdentity struct {
	Hostname  string `json:"hostname"`
	MachineID string `json:"machineId,omitempty"`
}

// applyIdentity takes on the identity the node agent gives a sandbox that now serves a session: a
// clone restored from a memory image keeps the image's hostname (and its files their machine id)
// otherwise. The hostname is set by space-init, which alone may; this waits until the kernel has it.
func applyIdentity(identity sandboxIdentity) error {
	if info, err := os.Stat(filepath.Dir(machineIDFile)); identity.MachineID != "" && err == nil && info.IsDir() {
		if err := replaceFile(machineIDFile, identity.MachineID+"\n", 0o444); err != nil {
			return err
		}
	}
	if currentHostname() == identity.Hostname {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(hostnameRequestFile), 0o755); err != nil {
		return err
	}
	if err := replaceFile(hostnameRequestFile, identity.Hostname+"\n", 0o644); err != nil {
		return err
	}
	if err := syscall.Kill(1, syscall.SIGUSR1); err != nil {
		return err
	}
	deadline := time.Now().Add(hostnameWait)
	for currentHostname() != identity.Hostname {
		if time.Now().After(deadline) {
			return fmt.Errorf("the sandbox's init did not set the hostname %s within %v", identity.Hostname, hostnameWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return os.Remove(hostnameRequestFile)
}

func currentHostname() string {
	var uts syscall.Utsname
	if syscall.Uname(&uts) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range uts.Nodename {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// replaceFile writes a fresh file beside file (never through a link a session left) and renames it
// into place.
func replaceFile(file, data string, mode os.FileMode) error {
	temp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".space-new")
	_ = os.RemoveAll(temp)
	out, err := os.OpenFile(temp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = out.WriteString(data)
	if closeErr := out.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	return os.Rename(temp, file)
}
