package main

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// firstMessageWait is how long a stream waits for its start message.
const firstMessageWait = 10 * time.Second

// streamSubscriber sends a process's events on a WebSocket from its own goroutine, so delivering
// never blocks the process; the process's output waits while too much is queued (flow control).
type streamSubscriber struct {
	ws *wsConn

	mu     sync.Mutex
	cond   *sync.Cond
	queue  [][]byte
	queued int
	ended  bool // the exit was queued: the stream closes after it is sent
	gone   bool // the stream closed: nothing more is sent or waited for
}

func newStreamSubscriber(ws *wsConn) *streamSubscriber {
	s := &streamSubscriber{ws: ws}
	s.cond = sync.NewCond(&s.mu)
	go s.send()
	go func() {
		<-ws.Done()
		s.mu.Lock()
		s.gone = true
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	return s
}

func (s *streamSubscriber) deliver(event processEvent) {
	var message map[string]any
	if event.Type == "exit" {
		var signal any
		if event.Signal != "" {
			signal = event.Signal
		}
		message = map[string]any{"type": "exit", "exitCode": event.ExitCode, "signal": signal, "timedOut": event.TimedOut}
	} else {
		message = map[string]any{"type": event.Type, "data": base64.StdEncoding.EncodeToString(event.Data), "offset": event.Offset}
	}
	s.push(mustJSON(message), event.Type == "exit")
}

func (s *streamSubscriber) push(data []byte, last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone || s.ended {
		return
	}
	s.queue = append(s.queue, data)
	s.queued += len(data)
	s.ended = last
	s.cond.Broadcast()
}

func (s *streamSubscriber) waitBelow(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.queued >= limit && !s.gone {
		s.cond.Wait()
	}
}

func (s *streamSubscriber) send() {
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.gone {
			s.cond.Wait()
		}
		if s.gone {
			s.mu.Unlock()
			return
		}
		data := s.queue[0]
		s.queue = s.queue[1:]
		last := s.ended && len(s.queue) == 0
		s.mu.Unlock()
		ok := s.ws.WriteText(data)
		s.mu.Lock()
		s.queued -= len(data)
		s.cond.Broadcast()
		s.mu.Unlock()
		if !ok {
			return
		}
		if last {
			s.ws.Close(closeNormal, "exit")
			return
		}
	}
}

// bindProcessStream connects a WebSocket to a process: output and exit go out, stdin, signals and
// resizes come in. Closing the stream leaves the process running, so a client can re-attach by pid.
func bindProcessStream(ws *wsConn, proc *managedProcess, replay bool, after int64) {
	// produced: the output so far, which a client that saw more (its process was restored from a
	// checkpoint taken before that output) gets again from here.
	ws.WriteText(mustJSON(map[string]any{"type": "started", "pid": proc.pid, "instance": proc.instance, "produced": proc.outputSoFar()}))
	sub := newStreamSubscriber(ws)
	unsubscribe := proc.subscribe(sub, replay, after)
	defer unsubscribe()
	for {
		message, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if message.binary {
			sendStreamError(ws, "binary frames are not accepted")
			continue
		}
		if err := handleClientMessage(proc, message.data); err != nil {
			sendStreamError(ws, err.Error())
		}
	}
}

// handleClientMessage applies one client message (ClientStreamMessageSchema) to the process.
func handleClientMessage(proc *managedProcess, data []byte) error {
	var m struct {
		Type   string `json:"type"`
		Data   string `json:"data"`
		Signal string `json:"signal"`
		Cols   int    `json:"cols"`
		Rows   int    `json:"rows"`
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return errString("messages must be JSON objects")
	}
	allowed := map[string][]string{"stdin": {"data"}, "stdin-eof": {}, "signal": {"signal"}, "resize": {"cols", "rows"}}
	if err := json.Unmarshal(data, &m); err != nil {
		return errString("invalid message: " + err.Error())
	}
	want, known := allowed[m.Type]
	if !known {
		return errString("invalid message: unknown type")
	}
	if len(fields) != len(want)+1 {
		return errString("invalid message: fields of a " + m.Type + " message are " + fieldNames(want))
	}
	for _, f := range want {
		if _, ok := fields[f]; !ok {
			return errString("invalid message: missing " + f)
		}
	}
	switch m.Type {
	case "stdin":
		decoded, err := base64.StdEncoding.DecodeString(m.Data)
		if err != nil || len(decoded) > limitMaxStreamMessageBytes {
			return errString("invalid message: data must be base64")
		}
		proc.write(decoded)
	case "stdin-eof":
		proc.endStdin()
	case "signal":
		signal, err := parseSignal(m.Signal)
		if err != nil {
			return errString("invalid message: " + err.Error())
		}
		proc.kill(signal)
	case "resize":
		if m.Cols < 1 || m.Cols > 1000 || m.Rows < 1 || m.Rows > 1000 {
			return errString("invalid message: cols and rows must be 1 to 1000")
		}
		proc.resize(m.Cols, m.Rows)
	}
	return nil
}

func sendStreamError(ws *wsConn, message string) {
	ws.WriteText(mustJSON(map[string]string{"type": "error", "code": codeValidationFailed, "message": message}))
}

// firstMessage reads a stream's start message; none within firstMessageWait closes the stream.
func firstMessage(ws *wsConn) ([]byte, bool) {
	timer := time.AfterFunc(firstMessageWait, func() {
		ws.CloseWithError(newError(codeValidationFailed, "no start message received in time"))
	})
	defer timer.Stop()
	message, err := ws.ReadMessage()
	if err != nil {
		return nil, false
	}
	if message.binary {
		ws.CloseWithError(newError(codeValidationFailed, "the start message must be JSON"))
		return nil, false
	}
	return message.data, true
}

// bindWatchStream streams file system changes under abs until the stream closes.
func bindWatchStream(ws *wsConn, abs, requested string) {
	w, err := newWatcher(abs)
	if err != nil {
		ws.CloseWithError(fsError(err, requested))
		return
	}
	defer w.close()
	root := abs
	if len(root) > 1 && root[len(root)-1] == '/' {
		root = root[:len(root)-1]
	}
	prefix := root
	if !w.isDir {
		// The file's directory, without a trailing slash ("" for a file in /).
		prefix = strings.TrimSuffix(filepath.Dir(root), "/")
	}
	ws.WriteText(mustJSON(map[string]string{"type": "ready", "path": abs}))
	go w.run(func(event, rel string) {
		ws.WriteText(mustJSON(map[string]string{"type": "change", "event": event, "path": prefix + "/" + rel}))
	})
	for {
		if _, err := ws.ReadMessage(); err != nil {
			return
		}
	}
}

// fieldNames lists a message type's fields for an error ("none" for a message that has none).
func fieldNames(fields []string) string {
	if len(fields) == 0 {
		return "none"
	}
	return strings.Join(fields, ", ")
}

type errString string

func (e errString) Error() string { return string(e) }
