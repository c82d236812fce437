package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// The memory guard stands in for the OOM killer gVisor does not have (google/gvisor#1967): when
// the sandbox's memory (/proc/meminfo's MemTotal, the session's memoryMb) is used up, it kills the
// process using the most, as Linux's would, so the sandbox and its other processes live on. The
// node watches the sandbox's host cgroup (cheap from outside; /proc/meminfo is not cheap inside
// gVisor, so nothing here polls) and calls POST /relieve-memory when it nears the limit. The host
// cgroup's own limit sits above the session's, a backstop for a burst faster than this.

// Used up: less than this share of MemTotal left (gVisor's own bookkeeping needs a little).
const memoryLowPercent = 2

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

type relief struct {
	Killed       *killedProcess `json:"killed"`
	AvailableMiB int64          `json:"availableMiB"`
	TotalMiB     int64          `json:"totalMiB"`
}

type killedProcess struct {
	Pid    int    `json:"pid"`
	Name   string `json:"name"`
	RssMiB int64  `json:"rssMiB"`
}

// relieveMemory kills the biggest process when the sandbox's memory is used up (and says so); else
// it only reports what is left.
func relieveMemory(logf func(format string, args ...any)) relief {
	info, ok := readMemoryInfo()
	result := relief{AvailableMiB: info.availableKB / 1024, TotalMiB: info.totalKB / 1024}
	if !ok || info.availableKB*100 >= info.totalKB*memoryLowPercent {
		return result
	}
	victim, ok := biggestProcess()
	if !ok || syscall.Kill(victim.pid, syscall.SIGKILL) != nil {
		return result
	}
	logf("out of memory: killed pid %d (%s), %d MiB resident, %d MiB of the sandbox's %d MiB left", victim.pid, victim.name, victim.rssKB/1024, result.AvailableMiB, result.TotalMiB)
	result.Killed = &killedProcess{Pid: victim.pid, Name: victim.name, RssMiB: victim.rssKB / 1024}
	return result
}
