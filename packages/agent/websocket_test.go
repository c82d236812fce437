package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// clientFrame is a frame as a client sends it: masked (unless told not to).
func clientFrame(fin bool, op int, payload []byte, masked bool) []byte {
	first := byte(op)
	if fin {
		first |= 0x80
	}
	frame := []byte{first}
	maskBit := byte(0)
	if masked {
		maskBit = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, maskBit|byte(n))
	case n <= 0xFFFF:
		frame = append(frame, maskBit|126, byte(n>>8), byte(n))
	default:
		frame = binary.BigEndian.AppendUint64(append(frame, maskBit|127), uint64(n))
	}
	if !masked {
		return append(frame, payload...)
	}
	mask := []byte{0x12, 0x34, 0x56, 0x78}
	frame = append(frame, mask...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	return frame
}

// serverOn reads what the client side writes; what the server answers is collected in `answers`.
// With closeAfter, the client hangs up once its input is read (the fuzz target's inputs end so).
func serverOn(t *testing.T, input []byte, closeAfter bool) (*wsConn, *bytes.Buffer, func()) {
	t.Helper()
	server, client := net.Pipe()
	answers := &bytes.Buffer{}
	drained := make(chan struct{})
	go func() {
		_, _ = io.Copy(answers, client)
		close(drained)
	}()
	go func() {
		_, _ = client.Write(input)
		if closeAfter {
			client.Close()
		}
	}()
	c := &wsConn{conn: server, reader: bufio.NewReader(server), closed: make(chan struct{})}
	return c, answers, func() {
		c.drop()
		client.Close()
		<-drained
	}
}

func TestWebSocketMessagesWholeFragmentedAndControlFrames(t *testing.T) {
	var input []byte
	input = append(input, clientFrame(true, opText, []byte(`{"type":"stdin"}`), true)...)
	input = append(input, clientFrame(true, opPing, []byte("hi"), true)...)
	input = append(input, clientFrame(false, opBinary, []byte("ab"), true)...)
	input = append(input, clientFrame(true, opContinuation, bytes.Repeat([]byte("c"), 300), true)...)
	input = append(input, clientFrame(true, opClose, []byte{0x03, 0xE8}, true)...)
	c, answers, done := serverOn(t, input, false)
	first, err := c.ReadMessage()
	if err != nil || first.binary || string(first.data) != `{"type":"stdin"}` {
		t.Fatalf("first message: %+v, %v", first, err)
	}
	second, err := c.ReadMessage()
	if err != nil || !second.binary || string(second.data) != "ab"+string(bytes.Repeat([]byte("c"), 300)) {
		t.Fatalf("fragmented message: %d bytes, %v", len(second.data), err)
	}
	if _, err := c.ReadMessage(); err != errStreamClosed {
		t.Fatalf("after the close frame: %v", err)
	}
	done()
	// The ping's pong, then the close answered with the client's code.
	want := append([]byte{0x80 | opPong, 2, 'h', 'i'}, 0x80|opClose, 2, 0x03, 0xE8)
	if !bytes.Equal(answers.Bytes(), want) {
		t.Fatalf("answers % x, want % x", answers.Bytes(), want)
	}
}

func TestWebSocketViolationsCloseWithTheRFCsCode(t *testing.T) {
	tooBig := make([]byte, limitMaxStreamMessageBytes+1)
	cases := map[string]struct {
		input []byte
		code  int
	}{
		"unmasked":               {clientFrame(true, opText, []byte("x"), false), closeProtocolError},
		"reserved bits":          {append([]byte{0xC1}, clientFrame(true, opText, []byte("x"), true)[1:]...), closeProtocolError},
		"unknown opcode":         {clientFrame(true, 0x3, []byte("x"), true), closeProtocolError},
		"continuation alone":     {clientFrame(true, opContinuation, []byte("x"), true), closeProtocolError},
		"fragmented ping":        {clientFrame(false, opPing, []byte("x"), true), closeProtocolError},
		"text is not UTF-8":      {clientFrame(true, opText, []byte{0xff, 0xfe}, true), closeInvalidData},
		"message over the limit": {clientFrame(true, opBinary, tooBig, true), closeTooBig},
	}
	for name, tc := range cases {
		c, answers, done := serverOn(t, tc.input, false)
		if _, err := c.ReadMessage(); err != errStreamClosed {
			t.Errorf("%s: %v", name, err)
		}
		done()
		got := answers.Bytes()
		if len(got) < 4 || got[0] != 0x80|opClose || int(binary.BigEndian.Uint16(got[2:4])) != tc.code {
			t.Errorf("%s: answered % x, want a close with %d", name, got, tc.code)
		}
	}
}

// FuzzReadMessage: whatever a client sends, reading ends (a message or the stream closed) without
// a panic, and a message never exceeds the limit. `./space test` runs it for a few seconds.
func FuzzReadMessage(f *testing.F) {
	f.Add(clientFrame(true, opText, []byte("hello"), true))
	f.Add(append(clientFrame(false, opText, []byte("he"), true), clientFrame(true, opContinuation, []byte("llo"), true)...))
	f.Add(clientFrame(true, opPing, nil, true))
	f.Add([]byte{0x81, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, input []byte) {
		c, _, done := serverOn(t, input, true)
		defer done()
		for {
			message, err := c.ReadMessage()
			if err != nil {
				return
			}
			if len(message.data) > limitMaxStreamMessageBytes {
				t.Fatalf("a message of %d bytes, over the limit", len(message.data))
			}
		}
	})
}
