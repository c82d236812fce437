package main

import (
	"os"
	"strings"
)

// procStatFields reads /proc/<pid>/stat and returns its fields after the command in parentheses
// (which may hold spaces): [0] is the state, [1] the parent's pid, [19] the start time in ticks.
func procStatFields(pid string) ([]string, bool) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	end := strings.LastIndexByte(string(stat), ')')
	if err != nil || end < 0 {
		return nil, false
	}
	fields := strings.Fields(string(stat[end+1:]))
	return fields, len(fields) >= 2
}
