package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"golang.org/x/sys/unix"
)

// TestCopyFileFullDisk: a catalog copy onto a full file system fails with
// an error errors.Is finds ENOSPC in. bbolt's Tx.WriteTo formats a
// failed meta page write with %s ("meta 0 copy: ..."), which dropped the
// errno from the chain before (an adversarial review of Backup found it),
// where every other write of a Backup's keeps it.
func TestCopyFileFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	c := New(t.TempDir())
	id, err := NewStoreID()
	must(t, err)
	must(t, c.Create(id))
	must(t, c.PutFilters(2, map[string]*format.FilterMeta{"x": testMeta(1)}))
	// Fill the file system, so that the copy's first write fails.
	f, err := os.Create(filepath.Join(dir, "filler"))
	must(t, err)
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	must(t, f.Close())
	err = c.CopyFile(filepath.Join(dir, "copy.db"))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("CopyFile onto a full disk: %v, want an error wrapping ENOSPC", err)
	}
}
