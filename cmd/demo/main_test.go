package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestHelp: -h prints the usage to stdout and is not an error.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		var stdout, stderr bytes.Buffer
		if err := run([]string{arg}, &stdout, &stderr); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if !strings.HasPrefix(stdout.String(), "usage: go run ./cmd/demo") || !strings.Contains(stdout.String(), "-durable int") {
			t.Fatalf("%s: stdout:\n%s", arg, stdout.String())
		}
		if stderr.Len() != 0 {
			t.Fatalf("%s: stderr:\n%s", arg, stderr.String())
		}
	}
}

// TestBadUsage: a bad flag or an argument prints the problem and the usage
// to stderr and returns errUsage.
func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"-keys", "many"}, {"extra"}} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); !errors.Is(err, errUsage) {
			t.Fatalf("%q: %v, want errUsage", args, err)
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), "usage: go run ./cmd/demo") {
			t.Fatalf("%q: stdout %q, stderr:\n%s", args, stdout.String(), stderr.String())
		}
	}
}

// TestSmallRun runs the whole job on a few keys.
func TestSmallRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run([]string{"-dir", t.TempDir(), "-keys", "2000", "-absent", "2000", "-durable", "200"}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bulk Load:        2000 keys", "durable AddMany:  100 keys", "durable Add:      100 single adds",
		"Has (present):    2000 lookups, no false negative", `filter "demo": `, "measured FPR:"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestPendingOnFullFilterFails: -pending adds that the filter refuses (a
// non-scaling filter sized for -keys and -durable, here far past it) make
// the run fail with the store's error, where it used to print it and exit
// 0; nothing is exited without closing.
func TestPendingOnFullFilterFails(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run([]string{"-dir", t.TempDir(), "-keep", "-keys", "2000", "-absent", "2000", "-durable", "0", "-pending", "100000"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "-pending: the adds failed") {
		t.Fatalf("run: %v, want the pending adds' failure; stdout:\n%s", err, stdout.String())
	}
}
