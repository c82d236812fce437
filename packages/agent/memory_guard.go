package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The memory guard stands in for the OOM killer gVisor does not have (google/gvisor#1967): the
// sandbox's memory (/proc/meminfo's MemTotal, the session's memoryMb) used up, it kills the process
// using the most, as Linux's would, so the sandbox and its other processes live on. The host's
// cgroup limit sits above the session's (the node sets it), a backstop for a burst faster than this.
const (
	memoryCheckEvery = 50 * time.Millisecond
	// Used up: less than this share of MemTotal left (gVisor's own bookkeeping needs a little).
	memoryLowPercent = 2
	// After a kill, the victim's memory takes a moment to come back: no second kill meanwhile.
	afterKillPause = 300 * time.Millisecond
)

type memoryInfo struct{ totalKB, availableKB int64 }

func readMemoryInfo() (memoryInfo, bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return memoryInfo{}, false
	}
	var info memoryInfo
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		value, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "MemTotal:":
			info.totalKB = value
		case "MemAvailable:":
			info.availableKB = value
		}
	}
	return info, info.totalKB > 0
}

type memoryVictim struct {
	pid   int
	rssKB int64
	name  string
}

// biggestProcess is the process with the largest resident set, the sandbox's init and this agent
// aside (killing either would end the sandbox or its way in).
func biggestProcess() (memoryVictim, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return memoryVictim{}, false
	}
	self := os.Getpid()
	var best memoryVictim
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == 1 || pid == self {
			continue
		}
		status, err := os.ReadFile("/proc/" + entry.Name() + "/status")
		if err != nil {
			continue
		}
		victim := memoryVictim{pid: pid}
		scanner := bufio.NewScanner(bytes.NewReader(status))
		for scanner.Scan() {
			line := scanner.Text()
			if name, ok := strings.CutPrefix(line, "Name:"); ok {
				victim.name = strings.TrimSpace(name)
			} else if rss, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				fields := strings.Fields(rss)
				if len(fields) > 0 {
					victim.rssKB, _ = strconv.ParseInt(fields[0], 10, 64)
				}
			}
		}
		if victim.rssKB > best.rssKB {
			best = victim
		}
	}
	return best, best.pid != 0
}

// guardMemory runs for the agent's life: every check that finds the sandbox's memory used up kills
// the biggest process and logs it (the sandbox's console, on the node).
func guardMemory(logf func(format string, args ...any)) {
	for {
		time.Sleep(memoryCheckEvery)
		info, ok := readMemoryInfo()
		if !ok || info.availableKB*100 >= info.totalKB*memoryLowPercent {
			continue
		}
		victim, ok := biggestProcess()
		if !ok {
			continue
		}
		if err := syscall.Kill(victim.pid, syscall.SIGKILL); err == nil {
			logf("out of memory: killed pid %d (%s), %d MiB resident, %d MiB of the sandbox's %d MiB left", victim.pid, victim.name, victim.rssKB/1024, info.availableKB/1024, info.totalKB/1024)
		}
		time.Sleep(afterKillPause)
	}
}
