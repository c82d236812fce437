package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// A W3C traceparent: version 00, trace id, parent span id, flags (01: sampled).
var traceparentPattern = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

// agentSpanHeader carries the agent's part of a traced call back to the node agent, which exports
// it (the sandbox cannot reach a trace collector): "<span id>;<start unix ns>;<end unix ns>", the
// end being when the reply's headers were written.
const agentSpanHeader = "Space-Agent-Span"

// traced wraps the reply of a request the node traced (a sampled traceparent; not an upgrade, whose
// connection is taken over) so that its headers report the agent's span; other requests pass as they are.
func traced(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	match := traceparentPattern.FindStringSubmatch(r.Header.Get("traceparent"))
	if match == nil || match[3] != "01" || r.Header.Get("Upgrade") != "" {
		return w
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return w
	}
	return &spanWriter{ResponseWriter: w, id: hex.EncodeToString(id), start: time.Now()}
}

type spanWriter struct {
	http.ResponseWriter
	id    string
	start time.Time
	wrote bool
}

func (s *spanWriter) WriteHeader(status int) {
	if !s.wrote {
		s.wrote = true
		s.Header().Set(agentSpanHeader, fmt.Sprintf("%s;%d;%d", s.id, s.start.UnixNano(), time.Now().UnixNano()))
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *spanWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

func (s *spanWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *spanWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
