package main

import (
	"net/http"
	"regexp"
	"strconv"
	"time"
)

var processInstanceShape = regexp.MustCompile(`^[0-9a-f]{16}$`)

// The process routes of the sandbox API: exec (buffered or in the background), signals, re-attach,
// and the exec and PTY streams, whose first message starts the process.

type execFields struct {
	Cmd       *command          `json:"cmd"`
	Cwd       *string           `json:"cwd"`
	Env       map[string]string `json:"env"`
	TimeoutMs *float64          `json:"timeoutMs"`
}

func (f execFields) check() error {
	if f.Cmd == nil {
		return errString("cmd is required")
	}
	if f.Cwd != nil {
		if err := checkPath(*f.Cwd); err != nil {
			return err
		}
	}
	if err := checkEnv(f.Env); err != nil {
		return err
	}
	return checkTimeout(f.TimeoutMs)
}

func (f execFields) options() startOptions {
	o := startOptions{Cmd: *f.Cmd, Env: f.Env}
	if f.Cwd != nil {
		o.Cwd = *f.Cwd
	}
	if f.TimeoutMs != nil {
		o.TimeoutMs = int64(*f.TimeoutMs)
	}
	return o
}

func (a *agent) exec(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		execFields
		Stdin      *string `json:"stdin"`
		Background bool    `json:"background"`
	}
	check := func() error {
		if body.Stdin != nil && len(*body.Stdin) > limitMaxExecStdinBytes {
			return errString("stdin exceeds the limit")
		}
		return body.execFields.check()
	}
	if err := readJSON(r, &body, check); err != nil {
		return err
	}
	options := body.options()
	if body.Background && body.TimeoutMs == nil {
		// A background process keeps running until it ends or is signalled (bounded by the longest timeout).
		options.TimeoutMs = limitMaxExecTimeoutMs
	}
	proc, err := a.processes.start(options)
	if err != nil {
		return err
	}
	if body.Background {
		proc.endStdin()
		writeJSON(w, 200, map[string]int{"pid": proc.pid})
		return nil
	}
	started := time.Now()
	collector := newOutputCollector(limitMaxBufferedOutputBytes)
	proc.subscribe(collector, true, 0)
	if body.Stdin != nil {
		proc.write([]byte(*body.Stdin))
	}
	proc.endStdin()
	result := collector.wait()
	result["durationMs"] = time.Since(started).Milliseconds()
	writeJSON(w, 200, result)
	return nil
}

func (a *agent) signal(w http.ResponseWriter, r *http.Request, pid int) error {
	var body struct {
		Signal string `json:"signal"`
	}
	if err := readJSON(r, &body, nil); err != nil {
		return err
	}
	signal, err := parseSignal(body.Signal)
	if err != nil {
		return newError(codeValidationFailed, "invalid request body: %v", err)
	}
	proc, err := a.processes.get(pid)
	if err != nil {
		return err
	}
	proc.kill(signal)
	writeJSON(w, 200, map[string]bool{"ok": true})
	return nil
}

// attach re-attaches a stream to a process. `sandbox` (where the stream started) is the control
// plane's to check; `instance` makes sure the pid still names the same process.
func (a *agent) attach(w http.ResponseWriter, r *http.Request, pid int) error {
	values, err := queryValues(r.URL, "after", "instance", "sandbox")
	if err != nil {
		return err
	}
	var after int64
	if raw := values.Get("after"); raw != "" {
		if after, err = strconv.ParseInt(raw, 10, 64); err != nil || after < 0 {
			return newError(codeValidationFailed, "invalid query: after must be a non-negative integer")
		}
	}
	instance := values.Get("instance")
	if instance != "" && !processInstanceShape.MatchString(instance) {
		return newError(codeValidationFailed, "invalid query: instance must be 16 hex digits")
	}
	proc, err := a.processes.getInstance(pid, instance)
	if err != nil {
		return err
	}
	return a.withStream(w, r, func(ws *wsConn) { bindProcessStream(ws, proc, true, after) })
}

// stream starts a process from the stream's first message (an exec stream or a PTY).
func (a *agent) stream(w http.ResponseWriter, r *http.Request, pty bool) error {
	return a.withStream(w, r, func(ws *wsConn) {
		data, ok := firstMessage(ws)
		if !ok {
			return
		}
		options, err := parseStart(data, pty)
		if err != nil {
			ws.CloseWithError(err)
			return
		}
		proc, err := a.processes.start(options)
		if err != nil {
			ws.CloseWithError(err)
			return
		}
		// With replay from the start: the process runs (and may print) before the stream subscribes.
		bindProcessStream(ws, proc, true, 0)
	})
}

// parseStart reads ExecStreamStartSchema or PtyStartSchema.
func parseStart(data []byte, pty bool) (startOptions, error) {
	var start struct {
		Type string `json:"type"`
		execFields
		Cols *float64 `json:"cols"`
		Rows *float64 `json:"rows"`
	}
	if err := decodeStrict(data, &start, "start message"); err != nil {
		return startOptions{}, err
	}
	invalid := func(reason string) error { return newError(codeValidationFailed, "invalid start message: %s", reason) }
	if start.Type != "start" {
		return startOptions{}, invalid(`type must be "start"`)
	}
	if !pty {
		if start.Cols != nil || start.Rows != nil {
			return startOptions{}, invalid("cols and rows are for PTY streams")
		}
		if err := start.execFields.check(); err != nil {
			return startOptions{}, invalid(err.Error())
		}
		return start.options(), nil
	}
	if start.TimeoutMs != nil {
		return startOptions{}, invalid("a PTY has no timeoutMs")
	}
	if start.Cmd == nil {
		start.Cmd = &command{args: []string{"/bin/sh", "-l"}}
	}
	if err := start.execFields.check(); err != nil {
		return startOptions{}, invalid(err.Error())
	}
	size := ptySize{Cols: 80, Rows: 24}
	for _, dim := range []struct {
		value *float64
		into  *int
	}{{start.Cols, &size.Cols}, {start.Rows, &size.Rows}} {
		if dim.value == nil {
			continue
		}
		if *dim.value != float64(int(*dim.value)) || *dim.value < 1 || *dim.value > 1000 {
			return startOptions{}, invalid("cols and rows must be integers from 1 to 1000")
		}
		*dim.into = int(*dim.value)
	}
	options := start.options()
	options.TimeoutMs = limitMaxExecTimeoutMs
	options.Pty = &size
	return options, nil
}
