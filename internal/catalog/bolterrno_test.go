package catalog

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

// TestBoltErrno: the errno bbolt flattens with %s is put back, and only a
// failed ftruncate of grow with EFBIG counts as a refused growth.
func TestBoltErrno(t *testing.T) {
	pe := &os.PathError{Op: "truncate", Path: "/x/catalog.db", Err: syscall.EFBIG}
	for _, c := range []struct {
		err   error
		errno syscall.Errno
		grow  bool
	}{
		{fmt.Errorf("store: catalog x: commit: %w", fmt.Errorf("file resize error: %s", pe)), syscall.EFBIG, true},
		{fmt.Errorf("file resize error: %s", &os.PathError{Op: "truncate", Path: "/x", Err: syscall.EIO}), syscall.EIO, false},
		{fmt.Errorf("file sync error: %s", &os.PathError{Op: "sync", Path: "/x", Err: syscall.EFBIG}), syscall.EFBIG, false},
		{fmt.Errorf("mmap allocate error: %s", syscall.ENOMEM), syscall.ENOMEM, false},
		{fmt.Errorf("file resize error: %s", "something else"), 0, false},
		{fmt.Errorf("write: %w", syscall.ENOSPC), syscall.ENOSPC, false},
	} {
		got := boltErrno(c.err)
		if got.Error() != c.err.Error() {
			t.Errorf("%v: text changed to %v", c.err, got)
		}
		if c.errno != 0 && !errors.Is(got, c.errno) {
			t.Errorf("%v: does not wrap %v", c.err, c.errno)
		}
		if GrowRefused(got) != c.grow {
			t.Errorf("%v: GrowRefused %v, want %v", c.err, !c.grow, c.grow)
		}
	}
	if boltErrno(nil) != nil {
		t.Error("boltErrno(nil) != nil")
	}
}
