package main

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// A minimal RFC 6455 server side: text messages of at most limitMaxStreamMessageBytes, masked client
// frames, ping/pong and the closing handshake. Every violation closes the stream with the RFC's code
// (1002 protocol, 1007 bad UTF-8, 1009 too big) and never affects another stream.

const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

const (
	closeNormal        = 1000
	closeProtocolError = 1002
	closeInvalidData   = 1007
	closeTooBig        = 1009
	closeInternal      = 1011
)

// How long a closing stream waits for the peer's close frame before dropping the connection.
const closeHandshakeWait = 2 * time.Second

const websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

type wsMessage struct {
	binary bool
	data   []byte
}

type wsConn struct {
	conn     net.Conn
	reader   *bufio.Reader
	writeMu  sync.Mutex
	closed   chan struct{}
	once     sync.Once
	sentStop bool
}

// upgradeWebSocket answers the handshake and takes the connection over from the HTTP server.
func upgradeWebSocket(w http.ResponseWriter, r *http.Request) (*wsConn, error) {
	key := r.Header.Get("Sec-Websocket-Key")
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || key == "" {
		return nil, newError(codeValidationFailed, "expected a WebSocket upgrade")
	}
	if r.Header.Get("Sec-Websocket-Version") != "13" {
		return nil, newError(codeValidationFailed, "unsupported WebSocket version (13 is)")
	}
	hijacker, ok := w.(http.Hijacker)
	if !ok {
		return nil, newError(codeInternal, "connection cannot be taken over")
	}
	conn, buffered, err := hijacker.Hijack()
	if err != nil {
		return nil, err
	}
	sum := sha1.Sum([]byte(key + websocketGUID))
	accept := base64.StdEncoding.EncodeToString(sum[:])
	_ = conn.SetDeadline(time.Time{})
	_, err = conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n"))
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &wsConn{conn: conn, reader: buffered.Reader, closed: make(chan struct{})}, nil
}

func headerHas(h http.Header, name, token string) bool {
	for _, value := range h.Values(name) {
		for _, part := range strings.Split(value, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// errStreamClosed ends reading: the peer closed, or the stream was closed for a violation.
var errStreamClosed = errors.New("stream closed")

// ReadMessage returns the next whole message. Control frames are answered on the way.
func (c *wsConn) ReadMessage() (wsMessage, error) {
	var message []byte
	messageOp := -1
	for {
		fin, op, payload, err := c.readFrame()
		if err != nil {
			return wsMessage{}, err
		}
		switch op {
		case opPing:
			c.writeFrame(opPong, payload)
			continue
		case opPong:
			continue
		case opClose:
			c.answerClose(payload)
			return wsMessage{}, errStreamClosed
		case opText, opBinary:
			if messageOp != -1 {
				return wsMessage{}, c.fail(closeProtocolError, "new message inside a fragmented one")
			}
			messageOp = op
			message = payload
		case opContinuation:
			if messageOp == -1 {
				return wsMessage{}, c.fail(closeProtocolError, "continuation without a message")
			}
			if len(message)+len(payload) > limitMaxStreamMessageBytes {
				return wsMessage{}, c.fail(closeTooBig, "message too big")
			}
			message = append(message, payload...)
		default:
			return wsMessage{}, c.fail(closeProtocolError, "unknown opcode")
		}
		if fin {
			if messageOp == opText && !utf8.Valid(message) {
				return wsMessage{}, c.fail(closeInvalidData, "text message is not UTF-8")
			}
			return wsMessage{binary: messageOp == opBinary, data: message}, nil
		}
	}
}

func (c *wsConn) readFrame() (fin bool, op int, payload []byte, err error) {
	var header [2]byte
	if _, err = io.ReadFull(c.reader, header[:]); err != nil {
		c.drop()
		return false, 0, nil, errStreamClosed
	}
	fin = header[0]&0x80 != 0
	op = int(header[0] & 0x0F)
	if header[0]&0x70 != 0 {
		return false, 0, nil, c.fail(closeProtocolError, "reserved bits set")
	}
	if header[1]&0x80 == 0 {
		return false, 0, nil, c.fail(closeProtocolError, "client frames must be masked")
	}
	length := uint64(header[1] & 0x7F)
	switch length {
	case 126:
		var ext [2]byte
		if _, err = io.ReadFull(c.reader, ext[:]); err != nil {
			c.drop()
			return false, 0, nil, errStreamClosed
		}
		length = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err = io.ReadFull(c.reader, ext[:]); err != nil {
			c.drop()
			return false, 0, nil, errStreamClosed
		}
		length = binary.BigEndian.Uint64(ext[:])
	}
	if op >= opClose && (length > 125 || !fin) {
		return false, 0, nil, c.fail(closeProtocolError, "malformed control frame")
	}
	if length > limitMaxStreamMessageBytes {
		return false, 0, nil, c.fail(closeTooBig, "message too big")
	}
	var mask [4]byte
	if _, err = io.ReadFull(c.reader, mask[:]); err != nil {
		c.drop()
		return false, 0, nil, errStreamClosed
	}
	payload = make([]byte, length)
	if _, err = io.ReadFull(c.reader, payload); err != nil {
		c.drop()
		return false, 0, nil, errStreamClosed
	}
	for i := range payload {
		payload[i] ^= mask[i%4]
	}
	return fin, op, payload, nil
}

// WriteText sends one text message; false once the stream is closed.
func (c *wsConn) WriteText(data []byte) bool {
	return c.writeFrame(opText, data)
}

func (c *wsConn) writeFrame(op int, payload []byte) bool {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.sentStop {
		return false
	}
	if op == opClose {
		c.sentStop = true
	}
	header := make([]byte, 0, 10)
	header = append(header, byte(0x80|op))
	switch n := len(payload); {
	case n < 126:
		header = append(header, byte(n))
	case n <= 0xFFFF:
		header = append(header, 126, byte(n>>8), byte(n))
	default:
		header = binary.BigEndian.AppendUint64(append(header, 127), uint64(n))
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(2 * time.Minute))
	if _, err := c.conn.Write(append(header, payload...)); err != nil {
		c.drop()
		return false
	}
	return true
}

// Close starts the closing handshake; the connection goes when the peer answers or after a wait.
func (c *wsConn) Close(code int, reason string) {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	payload := binary.BigEndian.AppendUint16(nil, uint16(code))
	if c.writeFrame(opClose, append(payload, reason...)) {
		time.AfterFunc(closeHandshakeWait, c.drop)
	}
}

// CloseWithError sends the error as a message (the close reason is too short for it) and closes.
func (c *wsConn) CloseWithError(err error) {
	e := asAPIError(err)
	c.WriteText(mustJSON(map[string]string{"type": "error", "code": e.Code, "message": e.Message}))
	code := e.Code
	if len(code) > 100 {
		code = code[:100]
	}
	c.Close(closeInternal, code)
}

// fail closes the stream for a protocol violation: the close frame, then a reset (a peer that
// breaks the protocol is not waited for).
func (c *wsConn) fail(code int, reason string) error {
	c.Close(code, reason)
	c.once.Do(func() {
		close(c.closed)
		if resettable, ok := c.conn.(interface{ reset() }); ok {
			resettable.reset()
		} else {
			c.conn.Close()
		}
	})
	return errStreamClosed
}

func (c *wsConn) answerClose(payload []byte) {
	code := closeNormal
	if len(payload) >= 2 {
		code = int(binary.BigEndian.Uint16(payload))
	}
	c.Close(code, "")
	c.drop()
}

// drop ends the connection (the channel's connection wrapper decides between FIN and reset).
func (c *wsConn) drop() {
	c.once.Do(func() {
		close(c.closed)
		c.conn.Close()
	})
}

// Done is closed when the stream has ended.
func (c *wsConn) Done() <-chan struct{} { return c.closed }
