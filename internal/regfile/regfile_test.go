package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/fserr"
)

// TestOpen: a regular file opens for reading and for writing; a FIFO (with
// no writer: a blocking open would wait for one) and a directory fail at
// once with ErrNotRegular, which wraps ErrCorrupt, naming what they are.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "file")
	if err := os.WriteFile(reg, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []int{os.O_RDONLY, os.O_RDWR} {
		f, err := Open(reg, flag)
		if err != nil {
			t.Fatalf("flag %d: %v", flag, err)
		}
		b := make([]byte, 4)
		if _, err := f.ReadAt(b, 0); err != nil || string(b) != "data" {
			t.Fatalf("flag %d: ReadAt = %q, %v", flag, b, err)
		}
		f.Close()
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, what string }{{fifo, "a FIFO"}, {dir, "a directory"}} {
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR} {
			if c.path == dir && flag == os.O_RDWR {
				continue // EISDIR before any check
			}
			f, err := Open(c.path, flag)
			if err == nil {
				f.Close()
				t.Fatalf("%s, flag %d: opened", c.what, flag)
			}
			if !errors.Is(err, ErrNotRegular) || !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), c.what) {
				t.Fatalf("%s, flag %d: %v, want ErrNotRegular (ErrCorrupt) naming %s", c.what, flag, err, c.what)
			}
		}
	}
	if _, err := Open(filepath.Join(dir, "absent"), os.O_RDONLY); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v, want ErrNotExist", err)
	}
}

// TestOpenOwn: OpenOwn creates a missing file and opens one of its own;
// a symbolic link (to a file or dangling), a hard link and a FIFO fail
// with ErrNotRegular naming what they are, and the file a link leads to
// is neither written nor created.
func TestOpenOwn(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "own")
	for range 2 { // created, then opened
		f, err := OpenOwn(own, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	sym, dangling, hard, fifo := filepath.Join(dir, "sym"), filepath.Join(dir, "dangling"), filepath.Join(dir, "hard"), filepath.Join(dir, "fifo")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(victim, sym))
	must(os.Symlink(filepath.Join(dir, "nothing"), dangling))
	must(os.Link(victim, hard))
	must(syscall.Mkfifo(fifo, 0o644))
	for _, c := range []struct{ path, what string }{
		{sym, "a symbolic link"}, {dangling, "a symbolic link"}, {hard, "2 names (a hard link"}, {fifo, "a FIFO"},
	} {
		f, err := OpenOwn(c.path, os.O_RDWR|os.O_CREATE, 0o644)
		if err == nil {
			f.Close()
			t.Fatalf("%s: opened", c.path)
		}
		if !errors.Is(err, ErrNotRegular) || !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), c.what) {
			t.Errorf("%s: %v, want ErrNotRegular naming %q", c.path, err, c.what)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Errorf("the link's target: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nothing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
}
