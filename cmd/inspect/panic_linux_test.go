package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReportPanicMappedFault: a read of a mapped page whose file was
// truncated under it (the fault SetPanicOnFault turns into a panic) is
// reported as a mapped file that changed, and a nil dereference still as
// an internal error.
func TestReportPanicMappedFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 2*4096), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 2*4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var sink byte
	fault := func() (r any) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { r = recover() }()
		sink += mem[4096]
		return nil
	}()
	nilDeref := func() (r any) {
		defer func() { r = recover() }()
		var p *[1 << 10]byte
		sink += p[7]
		return nil
	}()
	for _, c := range []struct {
		name string
		r    any
		want string
	}{
		{"fault in a truncated mapping", fault, "a mapped file changed"},
		{"nil dereference", nilDeref, "internal error"},
	} {
		if c.r == nil {
			t.Fatalf("%s: no panic", c.name)
		}
		var buf bytes.Buffer
		reportPanic(&buf, "stats", c.r)
		if !strings.Contains(buf.String(), c.want) {
			t.Fatalf("%s: reported %q, want %q", c.name, buf.String(), c.want)
		}
		t.Logf("%s: %s", c.name, strings.TrimSpace(buf.String()))
	}
}
