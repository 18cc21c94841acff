package fuzzcorpus

import (
	"os"
	"testing"
)

// memRoot is where MemTempDir makes its directories when it can: the
// memory file system (tmpfs) Linux mounts for POSIX shared memory.
const memRoot = "/dev/shm"

// MemTempDir returns a new directory, removed when t's test ends, on a
// memory file system where the machine has one (Linux's /dev/shm), and
// t.TempDir() otherwise.
//
// Fuzz targets that run a whole store on real files use it: each of their
// inputs opens, checkpoints and closes a store, and on a disk file system
// the fdatasyncs and msyncs of those dominate the time an input takes
// (about 50 ms of 60 on ext4, with the bbolt catalog's own fsyncs). On
// tmpfs they cost nothing and the files behave the same in every other
// way, which is all these targets check; durability on a real disk is
// the business of the store's crash tests.
func MemTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(memRoot, "filterstore-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("MemTempDir cleanup: %v", err)
		}
	})
	return dir
}
