package main

import (
	"os"
	"strconv"
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

// descendantsOf lists the processes running under process pid (children, theirs, and so on), as
// /proc shows them now.
func descendantsOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, entry := range entries {
		child, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		if fields, ok := procStatFields(entry.Name()); ok {
			if parent, err := strconv.Atoi(fields[1]); err == nil {
				children[parent] = append(children[parent], child)
			}
		}
	}
	var found []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		found = append(found, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return found
}
