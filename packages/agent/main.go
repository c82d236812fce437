// space-agent is the in-sandbox agent, the only way into a sandbox. The node agent writes a
// one-time token file into the sandbox's rootfs; the agent reads and deletes it before serving, so
// processes in the sandbox never find it on disk.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	// One processor for the agent's Go code, whatever the sandbox's CPUs. Its work is system calls,
	// each one a trap into gVisor's kernel (40-49 µs under ptrace on a virtual machine); with a second
	// processor, Go's idle threads spin and hand work over between them, every step a trap too: an
	// exec of `true` took 23.9 ms at the median with the default, 21.2 with one, uploads and
	// downloads as fast (docs/benchmarks.md). Set here, not in GOMAXPROCS, which the processes it
	// starts would inherit.
	runtime.GOMAXPROCS(1)
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "space-agent: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	port := envOr("SPACE_DAEMON_PORT", strconv.Itoa(layoutDaemonPort))
	host := envOr("SPACE_DAEMON_HOST", "0.0.0.0")
	tokenFile := envOr("SPACE_DAEMON_TOKEN_FILE", layoutDaemonTokenPath)
	workdir := envOr("SPACE_WORKDIR", layoutWorkdir)
	ptyHelper := envOr("SPACE_PTY_HELPER", "/.space/space-pty")

	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	if err := os.Remove(tokenFile); err != nil {
		return err
	}
	token := strings.TrimSpace(string(raw))
	if len(token) < 32 {
		return fmt.Errorf("daemon token too short")
	}

	// User processes get the sandbox environment without the agent's own settings.
	baseEnv := map[string]string{}
	for _, entry := range os.Environ() {
		key, value, _ := strings.Cut(entry, "=")
		if !strings.HasPrefix(key, "SPACE_DAEMON_") && key != "SPACE_PTY_HELPER" {
			baseEnv[key] = value
		}
	}
	defaultTimeout, err := strconv.Atoi(envOr("SPACE_DAEMON_DEFAULT_TIMEOUT_MS", strconv.Itoa(limitDefaultExecTimeoutMs)))
	if err != nil || defaultTimeout <= 0 {
		return fmt.Errorf("SPACE_DAEMON_DEFAULT_TIMEOUT_MS must be a positive number of milliseconds")
	}
	defaultCwd := os.Getenv("SPACE_DAEMON_CWD")
	if defaultCwd != "" && !validDefaultCwd(defaultCwd) {
		return fmt.Errorf("SPACE_DAEMON_CWD must be an absolute path without \"..\" segments")
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "space-agent: "+format+"\n", args...) }
	paths := sandboxPaths{workdir: workdir}
	processes := newProcessTable(paths, baseEnv, ptyHelper, time.Duration(defaultTimeout)*time.Millisecond)
	processes.setDefaultCwd(defaultCwd)
	codeCwd := defaultCwd
	if codeCwd == "" {
		codeCwd = workdir
	}
	a := &agent{
		code:      newCodeServer(codeCwd, baseEnv, logf),
		desktop:   newDesktopServer(codeCwd, baseEnv, logf),
		processes: processes,
		files:     fileService{paths: paths},
		token:     token,
		logf:      logf,
	}
	a.routes = a.routeTable()
	a.channel = newChannel(host+":"+port, a)

	signals := make(chan os.Signal, 4)
	// SIGPIPE is caught, not ignored: a log write to a closed stderr must not end the agent, and an
	// ignored signal would stay ignored in every process the agent starts.
	signal.Notify(signals, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT, syscall.SIGPIPE)
	// A template with a desktop has its display up before the agent answers: E2B Desktop's SDK starts
	// its own X server on it right away, and two starting at once race for the display (a client
	// connecting in between can hang in this gVisor); started first, ours is found and theirs exits.
	if a.desktop.absent() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), desktopServerStartTimeout)
		if err := a.desktop.ensure(ctx); err != nil {
			logf("desktop not started at boot (the next desktop call tries again): %v", err)
		}
		cancel()
	}
	if err := a.channel.Listen(); err != nil {
		return err
	}
	// A template with a code interpreter has its default Python context ready before the first cell.
	if _, err := os.Stat(codeInterpreterMarker); err == nil && codeInterpreterAvailable() {
		go func() { _ = a.code.ensure(context.Background()) }()
	}
	fmt.Printf("space-daemon listening on %s%s\n", port, startupTimes())
	for sig := range signals {
		if sig == syscall.SIGPIPE {
			continue
		}
		if sig == syscall.SIGUSR2 {
			// The node agent's "listen again" after a checkpoint or a restore.
			if err := a.channel.Listen(); err != nil {
				a.logf("cannot listen again: %v", err)
			}
			continue
		}
		a.processes.killAll()
		return nil
	}
	return nil
}

func envOr(key, fallback string) string {
	if value, ok := os.LookupEnv(key); ok && value != "" {
		return value
	}
	return fallback
}

// startupTimes says how long the agent took to listen, from its own start and from the sandbox
// kernel's (for docs/benchmarks.md); empty where /proc does not tell.
func startupTimes() string {
	uptime, err := os.ReadFile("/proc/uptime")
	fields, ok := procStatFields("self")
	if err != nil || !ok || len(fields) < 20 {
		return ""
	}
	kernelSec, err := strconv.ParseFloat(strings.Fields(string(uptime))[0], 64)
	if err != nil {
		return ""
	}
	// Field 22 of stat (starttime, in clock ticks of 1/100 s since boot).
	startTicks, err := strconv.ParseFloat(fields[19], 64)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" (%.0f ms after the agent started, %.0f ms after the sandbox's kernel did)", (kernelSec-startTicks/100)*1000, kernelSec*1000)
}
