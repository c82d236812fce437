package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

const (
	// How long the agent waits for the node agent to close the connection that asked to quiesce.
	quiesceCloseWait = time.Second
	// How long a connection the agent is done with waits for the peer to close it before it is reset.
	peerCloseWait = 2 * time.Second
)

// channel is the agent's listening socket and its connections. A sandbox is saved with no TCP
// endpoint of the agent's in it (listening, connected or in TIME_WAIT), so a restored sandbox never
// holds a connection to a node agent that is gone: before a full checkpoint the
// agent stops listening and resets every connection (a reset leaves no TIME_WAIT), and it listens
// again on SIGUSR2, which the node agent sends through the sandbox's init after the checkpoint or a
// restore. The agent never closes a connection first either: it waits for the peer's FIN.
type channel struct {
	addr   string
	server *http.Server

	mu       sync.Mutex
	listener net.Listener
	conns    map[*channelConn]struct{}
	streams  int
}

func newChannel(addr string, handler http.Handler) *channel {
	ch := &channel{addr: addr, conns: map[*channelConn]struct{}{}}
	ch.server = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 15 * time.Second,
		// The node agent closes idle connections first (its own timeout is shorter).
		IdleTimeout:    10 * time.Minute,
		MaxHeaderBytes: 64 * 1024,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: nil,
	}
	return ch
}

type connKey struct{}

// connOf is the connection a request came on.
func connOf(r *http.Request) *channelConn {
	c, _ := r.Context().Value(connKey{}).(*channelConn)
	return c
}

// Listen starts serving unless already listening.
func (ch *channel) Listen() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.listener != nil {
		return nil
	}
	l, err := net.Listen("tcp4", ch.addr)
	if err != nil {
		return err
	}
	ch.listener = l
	go func() { _ = ch.server.Serve(&trackingListener{Listener: l, channel: ch}) }()
	return nil
}

// Blockers says why the sandbox cannot be fully checkpointed now; empty when it can. Attached
// streams would be cut (a client would lose its live output). Connections with the world outside
// the sandbox would be cut by runsc under their processes, and a process that waits on them with
// epoll then never hears of its listening sockets again (see outside_connections.go); the node
// resets its own and the gateway's just before asking, so what is left is one opened since.
func (ch *channel) Blockers() []string {
	var reasons []string
	ch.mu.Lock()
	streams := ch.streams
	ch.mu.Unlock()
	if streams > 0 {
		reasons = append(reasons, fmt.Sprintf("%d stream(s) attached (exec, PTY, attach or watch)", streams))
	}
	if open := settledOutsideConnections(layoutDaemonPort); len(open) > 0 {
		shown := open
		more := ""
		if len(shown) > 5 {
			shown, more = shown[:5], ", ..."
		}
		reasons = append(reasons, "connections with the outside of the sandbox are open ("+strings.Join(shown, ", ")+more+
			"); the node cut those it knew of, these came after or from elsewhere: try again")
	}
	return reasons
}

// Quiesce stops listening and resets every connection but asking, the one carrying the request,
// all before the answer goes out, so the node agent never races a listener still open. asking is
// reset when the node agent half-closes it after reading the answer (or after quiesceCloseWait):
// the reset it receives proves the agent released it.
func (ch *channel) Quiesce(asking *channelConn) {
	ch.mu.Lock()
	if ch.listener != nil {
		_ = ch.listener.Close()
		ch.listener = nil
	}
	var others []*channelConn
	for c := range ch.conns {
		if c != asking {
			others = append(others, c)
		}
	}
	ch.mu.Unlock()
	for _, c := range others {
		c.reset()
	}
	if asking != nil {
		asking.resetOnClose()
		time.AfterFunc(quiesceCloseWait, asking.reset)
	}
}

// StreamOpened and StreamClosed count the WebSocket streams (they block full checkpoints).
func (ch *channel) StreamOpened() { ch.mu.Lock(); ch.streams++; ch.mu.Unlock() }
func (ch *channel) StreamClosed() { ch.mu.Lock(); ch.streams--; ch.mu.Unlock() }

type trackingListener struct {
	net.Listener
	channel *channel
}

func (l *trackingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &channelConn{TCPConn: conn.(*net.TCPConn), channel: l.channel}
	l.channel.mu.Lock()
	l.channel.conns[c] = struct{}{}
	l.channel.mu.Unlock()
	return c, nil
}

// channelConn is one connection to the agent: it never closes first (Close waits for the peer's
// FIN, and resets when none comes), so no connection of the agent's lingers in TIME_WAIT.
type channelConn struct {
	*net.TCPConn
	channel *channel

	mu         sync.Mutex
	peerClosed bool
	resetFirst bool
	closed     bool
}

func (c *channelConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	if err != nil && n == 0 && errors.Is(err, io.EOF) {
		c.mu.Lock()
		c.peerClosed = true
		c.mu.Unlock()
	}
	return n, err
}

func (c *channelConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	peerClosed, resetFirst := c.peerClosed, c.resetFirst
	c.mu.Unlock()
	c.forget()
	switch {
	case resetFirst:
		return c.abort()
	case peerClosed:
		return c.TCPConn.Close()
	}
	go c.closeAfterPeer()
	return nil
}

// closeAfterPeer reads (and drops) what the peer still sends until its FIN, then closes; a peer
// that does not close in time gets a reset.
func (c *channelConn) closeAfterPeer() {
	_ = c.TCPConn.SetReadDeadline(time.Now().Add(peerCloseWait))
	buf := make([]byte, 4096)
	for {
		_, err := c.TCPConn.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			_ = c.TCPConn.Close()
		} else {
			_ = c.abort()
		}
		return
	}
}

// reset aborts the connection now (RST), whatever its state.
func (c *channelConn) reset() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.forget()
	_ = c.abort()
}

// resetOnClose makes the next Close a reset (the quiescing connection, closed when its peer half-closes).
func (c *channelConn) resetOnClose() {
	c.mu.Lock()
	c.resetFirst = true
	c.mu.Unlock()
}

func (c *channelConn) abort() error {
	_ = c.TCPConn.SetLinger(0)
	return c.TCPConn.Close()
}

func (c *channelConn) forget() {
	c.channel.mu.Lock()
	delete(c.channel.conns, c)
	c.channel.mu.Unlock()
}
