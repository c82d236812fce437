package main

import "testing"

func TestProcNetAddress(t *testing.T) {
	cases := []struct {
		field, ip string
		port      int
	}{
		{"0100007F:1F90", "127.0.0.1", 8080},
		{"9A89D50A:C33F", "10.213.137.154", 49983},
		{"00000000000000000000000001000000:0BB8", "::1", 3000},
		{"0000000000000000FFFF00009A89D50A:0050", "10.213.137.154", 80},
	}
	for _, c := range cases {
		ip, port, ok := procNetAddress(c.field)
		if !ok || ip.String() != c.ip || port != c.port {
			t.Errorf("procNetAddress(%q) = %v %d %v, want %s %d", c.field, ip, port, ok, c.ip, c.port)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:", "01007F:1F90", "zz00007F:1F90", "0100007F:123456"} {
		if _, _, ok := procNetAddress(bad); ok {
			t.Errorf("procNetAddress(%q) accepted", bad)
		}
	}
}

func TestOutsideConnection(t *testing.T) {
	const agentPort = 49983
	line := func(local, remote, state string) []string {
		return []string{"1:", local, remote, state, "00000000:00000000"}
	}
	kept := []struct {
		fields []string
		want   string
	}{
		{line("9A89D50A:0BB8", "9989D50A:D431", "01"), "10.213.137.154:3000 -> 10.213.137.153:54321 ESTABLISHED"},
		{line("9A89D50A:A000", "9989D50A:0050", "02"), "10.213.137.154:40960 -> 10.213.137.153:80 SYN_SENT"},
		{line("9A89D50A:0BB8", "9989D50A:D431", "08"), "10.213.137.154:3000 -> 10.213.137.153:54321 CLOSE_WAIT"},
	}
	for _, c := range kept {
		if got, ok := outsideConnection(c.fields, agentPort); !ok || got != c.want {
			t.Errorf("outsideConnection(%v) = %q %v, want %q", c.fields, got, ok, c.want)
		}
	}
	left := [][]string{
		line("00000000:0BB8", "00000000:0000", "0A"), // a listener
		line("9A89D50A:0BB8", "9989D50A:D431", "06"), // TIME_WAIT: nothing to cut
		line("9A89D50A:0BB8", "9989D50A:D431", "07"), // closed
		line("0100007F:0BB8", "0100007F:D431", "01"), // loopback
		line("9A89D50A:0BB8", "9A89D50A:D431", "01"), // to the sandbox's own address
		line("00000000000000000000000001000000:0BB8", "00000000000000000000000001000000:D431", "01"),
		line("9A89D50A:C33F", "9989D50A:D431", "01"), // the agent's own channel
		{"1:", "9A89D50A:0BB8"},                      // a short line
	}
	for _, fields := range left {
		if got, ok := outsideConnection(fields, agentPort); ok {
			t.Errorf("outsideConnection(%v) kept %q", fields, got)
		}
	}
}
