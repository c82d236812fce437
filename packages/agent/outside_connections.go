package main

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// A full checkpoint saves the sandbox's TCP endpoints (runsc's netstack), and runsc runs with
// --net-disconnect-ok, so connections with the outside are cut at the save instead of refusing it.
// But a process that had such a connection in an epoll set when it was cut stops being told of its
// listening sockets after a restore (on this runsc a Node server then accepts nothing; seen with
// the preview proxy's keep-alive connection): so none may be open at the save. Connections inside
// the sandbox (loopback, or to its own address) are saved and restored whole.

// How long the agent waits for the resets the node just sent to reach the sandbox's endpoints.
const outsideSettleWait = 500 * time.Millisecond

var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT",
	"07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// settledOutsideConnections is outsideConnections once the resets on their way have landed (or
// outsideSettleWait has passed).
func settledOutsideConnections(agentPort int) []string {
	open := outsideConnections(agentPort)
	for deadline := time.Now().Add(outsideSettleWait); len(open) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		open = outsideConnections(agentPort)
	}
	return open
}

// outsideConnections lists the sandbox's TCP connections with a peer outside it (from
// /proc/net/tcp{,6}), as "local -> remote STATE"; the agent's own port, listeners and endpoints
// that are closed or only wait out TIME_WAIT (nothing left to cut) are left out.
func outsideConnections(agentPort int) []string {
	var found []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		text, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		lines := strings.Split(string(text), "\n")
		for _, line := range lines[1:] {
			if entry, ok := outsideConnection(strings.Fields(line), agentPort); ok {
				found = append(found, entry)
			}
		}
	}
	return found
}

func outsideConnection(fields []string, agentPort int) (string, bool) {
	if len(fields) < 4 {
		return "", false
	}
	state := tcpStates[fields[3]]
	if state == "LISTEN" || state == "TIME_WAIT" || state == "CLOSE" {
		return "", false
	}
	localIP, localPort, okLocal := procNetAddress(fields[1])
	remoteIP, remotePort, okRemote := procNetAddress(fields[2])
	if !okLocal || !okRemote || localPort == agentPort || remoteIP.IsLoopback() || remoteIP.Equal(localIP) {
		return "", false
	}
	if state == "" {
		state = fields[3]
	}
	local := net.JoinHostPort(localIP.String(), strconv.Itoa(localPort))
	remote := net.JoinHostPort(remoteIP.String(), strconv.Itoa(remotePort))
	return fmt.Sprintf("%s -> %s %s", local, remote, state), true
}

// procNetAddress reads /proc/net/tcp's "0100007F:1F90": the address as 32-bit words in host
// (little-endian) order, then the port.
func procNetAddress(field string) (net.IP, int, bool) {
	hexIP, hexPort, found := strings.Cut(field, ":")
	raw, err := hex.DecodeString(hexIP)
	port, perr := strconv.ParseUint(hexPort, 16, 16)
	if !found || err != nil || perr != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, 0, false
	}
	ip := make(net.IP, len(raw))
	for word := 0; word < len(raw); word += 4 {
		for i := 0; i < 4; i++ {
			ip[word+i] = raw[word+3-i]
		}
	}
	return ip, int(port), true
}
