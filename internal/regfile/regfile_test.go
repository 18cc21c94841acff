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
