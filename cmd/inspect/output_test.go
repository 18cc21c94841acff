package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// failingWriter accepts the first ok bytes, then fails every write with
// err: stdout on a disk that fills up, or a pipe closed by its reader.
type failingWriter struct {
	ok  int
	err error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.ok >= len(p) {
		w.ok -= len(p)
		return len(p), nil
	}
	n := w.ok
	w.ok = 0
	return n, w.err
}

// outputCommands is every subcommand, in each of its output forms, and
// help.
func outputCommands(t *testing.T, dir string) [][]string {
	layer := layerFile(t, dir, "users", 0)
	cmds := [][]string{
		{"ls", dir}, {"ls", "--json", dir},
		{"info", dir, "users"}, {"info", "--json", dir, "users"},
		{"check", dir, "users", "user-001"}, {"check", "--json", dir, "users", "user-001"},
		{"verify", dir}, {"verify", "--json", dir}, {"verify", dir, "users"},
		{"wal", dir}, {"wal", "--json", dir}, {"wal", "--dump", dir}, {"wal", "--dump", "--json", dir},
		{"file", layer}, {"file", "--json", layer},
		{"stats", dir, "hits"}, {"stats", "--json", dir, "hits"},
		{"version"}, {"version", "--json"},
		{"help"}, {"-h"}, {"--help"},
	}
	for _, c := range commands() {
		cmds = append(cmds, []string{"help", c.name}, []string{c.name, "-h"})
	}
	return cmds
}

// TestOutputWriteError: every command whose stdout cannot be written
// (ENOSPC at once, or after some output; EPIPE) exits 2 with one line on
// stderr naming the output error, never 0.
func TestOutputWriteError(t *testing.T) {
	dir := testStore(t)
	for _, args := range outputCommands(t, dir) {
		short := strings.ReplaceAll(strings.Join(args, " "), dir, "DIR")
		r := runCLI(args...)
		if r.code != 0 || r.stdout == "" {
			t.Fatalf("inspect %s: the baseline run should succeed with output:\n%s", short, r)
		}
		half := len(r.stdout) / 2 // fails in the middle of the output
		for _, w := range []*failingWriter{{0, syscall.ENOSPC}, {half, syscall.ENOSPC}, {0, syscall.EPIPE}} {
			after := w.ok
			var errb bytes.Buffer
			code := run(args, w, &errb)
			stderr := errb.String()
			if code != exitUsage {
				t.Errorf("inspect %s > stdout failing after %d bytes (%v): exit %d, want 2; stderr: %q", short, after, w.err, code, stderr)
				continue
			}
			if !strings.Contains(stderr, "cannot write the output: "+w.err.Error()) {
				t.Errorf("inspect %s > stdout failing (%v): stderr %q does not name the output error", short, w.err, stderr)
			}
			if strings.Count(stderr, "\n") != 1 {
				t.Errorf("inspect %s > stdout failing (%v): want one line on stderr, got %q", short, w.err, stderr)
			}
		}
	}
}

// TestOutputWriteErrorWithProblems: verify that finds problems and
// cannot write them exits 2 (the listing was lost), its one line naming
// both.
func TestOutputWriteErrorWithProblems(t *testing.T) {
	dir := testStore(t)
	seen := layerFile(t, dir, "seen", 0)
	b, err := os.ReadFile(seen)
	must(t, err)
	b[0] ^= 0xff // the magic
	must(t, os.WriteFile(seen, b, 0o644))
	mustRun(t, exitProblems, "verify", dir)
	var errb bytes.Buffer
	code := run([]string{"verify", dir}, &failingWriter{err: syscall.ENOSPC}, &errb)
	stderr := errb.String()
	t.Logf("exit %d %s", code, strings.TrimSpace(stderr))
	if code != exitUsage || !strings.Contains(stderr, "cannot write the output") || !strings.Contains(stderr, "problem") ||
		strings.Count(stderr, "\n") != 1 {
		t.Errorf("verify finding problems, stdout failing: exit %d, stderr %q; want 2 and one line naming both", code, stderr)
	}
}

// TestOutputDevFull: the real program, its stdout /dev/full, exits 2.
func TestOutputDevFull(t *testing.T) {
	if args := os.Getenv("INSPECT_OUTPUT_CHILD"); args != "" {
		os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	dir := testStore(t)
	for _, args := range [][]string{{"info", dir, "users"}, {"verify", dir}, {"file", layerFile(t, dir, "users", 0)}, {"help"}, {"ls", "-h"}} {
		short := strings.ReplaceAll(strings.Join(args, " "), dir, "DIR")
		c := exec.Command(os.Args[0], "-test.run=^TestOutputDevFull$")
		c.Env = append(os.Environ(), "INSPECT_OUTPUT_CHILD="+strings.Join(args, "\x1f"))
		var errb bytes.Buffer
		c.Stdout, c.Stderr = full, &errb
		code := exitCodeOf(t, c.Run())
		t.Logf("inspect %s > /dev/full: exit %d %s", short, code, strings.TrimSpace(errb.String()))
		if code != exitUsage || !strings.Contains(errb.String(), "no space left on device") {
			t.Errorf("inspect %s > /dev/full: exit %d, want 2 naming the full device; stderr: %q", short, code, errb.String())
		}
	}
}

// exitCodeOf returns the exit status of a child process that ended with
// err (0 for nil), failing the test if it could not be run.
func exitCodeOf(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}
