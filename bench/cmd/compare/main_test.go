package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCount(t *testing.T) {
	for s, want := range map[string]uint64{"1000000": 1e6, "1e6": 1e6, "1_000": 1000, " 2e7 ": 2e7} {
		if got, err := parseCount(s); err != nil || got != want {
			t.Errorf("parseCount(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "x", "-1", "1.5", "1e13"} {
		if got, err := parseCount(s); err == nil {
			t.Errorf("parseCount(%q) = %d, want an error", s, got)
		}
	}
}

func TestCellAndMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median = %v", got)
	}
	if got := cell(mHit, []float64{30, 10, 20}); got != "20.0 (10.0–30.0)" {
		t.Errorf("cell = %q", got)
	}
	if got := cell(mBits, []float64{9.9, 9.9}); got != "9.90" {
		t.Errorf("cell = %q", got)
	}
	if got := countName(1e7); got != "1e7" {
		t.Errorf("countName(1e7) = %q", got)
	}
	if got := countName(2500); got != "2500" {
		t.Errorf("countName(2500) = %q", got)
	}
}

// TestRun runs the whole command on a tiny n with two libraries and the
// cold jobs and checks that every job has a row and the file is written.
func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.md")
	var stdout, stderr bytes.Buffer
	args := []string{"-n", "2000", "-rounds", "2", "-libs", "fs-bloom,blobloom", "-seed", "3",
		"-coldkeys", "100", "-tmp", t.TempDir(), "-out", out}
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"Seed 3,", "## n = 2000", "| fs-bloom |", "| blobloom |",
		"| cold-store-bloom |", "| cold-store-cuckoo |", "fs-bloom / blobloom:", "eviction check"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "in progress") {
		t.Errorf("final output still marked in progress:\n%s", got)
	}
	if err := run([]string{"-n", "0"}, &stdout, &stderr); err == nil {
		t.Error("run -n 0: no error")
	}
	if err := run([]string{"-libs", "nosuch"}, &stdout, &stderr); err == nil {
		t.Error("run -libs nosuch: no error")
	}
}

// TestRunPairs runs the pairs mode on a tiny n and checks that every pair,
// the control's included, has a row of ratios.
func TestRunPairs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"-pairs", "-n", "4000", "-lookups", "4000", "-pairs.rounds", "3", "-pairs.chunk", "500",
		"-libs", "fs-bloom,fs-store-bloom", "-seed", "5", "-tmp", t.TempDir()}
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	got := stdout.String()
	for _, want := range []string{"pairs mode", "## n = 4000, pairs", "3 ABBA/BAAB rounds of 500",
		"| fs-bloom | fs-store-bloom | ", "| fs-bloom | fs-bloom#2 | ", "| fs-store-bloom | fs-bloom#2 | "} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "NaN") || strings.Contains(got, "Inf") {
		t.Errorf("output holds a NaN or Inf:\n%s", got)
	}
	if err := run([]string{"-pairs", "-libs", "none"}, &stdout, &stderr); err == nil {
		t.Error("run -pairs -libs none: no error")
	}
}
