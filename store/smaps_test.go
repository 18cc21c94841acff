package store

import (
	"os"
	"strconv"
	"strings"
)

// smapsRollup returns the fields of /proc/self/smaps_rollup in KiB
// (Rss, FilePmdMapped, ...), or nil where there is no such file.
func smapsRollup() map[string]int64 {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return nil
	}
	m := make(map[string]int64)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				m[strings.TrimSuffix(f[0], ":")] = v
			}
		}
	}
	return m
}
