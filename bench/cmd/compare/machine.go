package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// machine describes the machine in one line: CPU model and logical CPUs
// from /proc/cpuinfo, GOMAXPROCS, the Go version, and the load average at
// start (other users of the CPUs make timings noisy).
func machine() string {
	model, cpus := "unknown CPU", 0
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				model = strings.TrimSpace(v)
			case "processor":
				cpus++
			}
		}
		f.Close()
	}
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if fs := strings.Fields(string(b)); len(fs) >= 3 {
			load = strings.Join(fs[:3], " ")
		}
	}
	return fmt.Sprintf("%s, %d logical CPUs (GOMAXPROCS %d), %s %s/%s, load average at start %s",
		model, cpus, runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, load)
}
