package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCountersTables runs both modes with -counters and checks that every
// library's passes have a row whose task-clock (the software event every
// Linux kernel counts) is a plausible time per operation: positive and
// below a millisecond.
func TestCountersTables(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "3000", "-rounds", "2", "-cold=false", "-libs", "fs-bloom-owned,blobloom", "-seed", "4", "-counters"},
		{"-pairs", "-n", "4000", "-lookups", "4000", "-pairs.rounds", "2", "-pairs.chunk", "500",
			"-libs", "fs-cuckoo-f16,panmari", "-seed", "4", "-counters", "-tmp", t.TempDir()},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); err != nil {
			t.Fatalf("run %v: %v\n%s", args, err, stderr.String())
		}
		got := stdout.String()
		if !strings.Contains(got, "| library | pass | task-clock ns |") {
			t.Fatalf("run %v: no counters table:\n%s", args, got)
		}
		want := map[string]bool{}
		if args[0] == "-pairs" {
			for _, l := range []string{"fs-cuckoo-f16", "panmari", "fs-cuckoo-f16#2"} {
				want[l+" hit"], want[l+" miss"] = true, true
			}
		} else {
			for _, l := range []string{"fs-bloom-owned", "blobloom"} {
				want[l+" build"], want[l+" hit"], want[l+" miss"] = true, true, true
			}
			want["fs-bloom-owned HasMany"] = true
		}
		row := regexp.MustCompile(`(?m)^\| (\S+) \| (\S+) \| ([0-9.]+) \|`)
		for _, m := range row.FindAllStringSubmatch(got, -1) {
			key := m[1] + " " + m[2]
			if !want[key] {
				continue
			}
			ns, err := strconv.ParseFloat(m[3], 64)
			if err != nil || ns <= 0 || ns > 1e6 {
				t.Errorf("run %v: %s: task-clock %q ns per operation", args, key, m[3])
			}
			delete(want, key)
		}
		for key := range want {
			t.Errorf("run %v: no counters row for %s:\n%s", args, key, got)
		}
	}
}
