package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/fdlimit"
)

// openDescriptors returns the targets of the process's open descriptors.
func openDescriptors(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	var out []string
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// TestBackupOutOfDescriptorsLeavesNothing: a Backup that runs out of file
// descriptors (EMFILE) at any point fails with EMFILE and, as Backup
// promises of a failed Backup, removes what it wrote, though descriptors
// are still short while it cleans up: no DIR.tmp stays (which would make
// every later Backup to DIR fail with ErrExists until an operator removed
// it), no descriptor stays open, and a Backup to the same DIR succeeds
// once descriptors are back. Before, with no descriptor left the
// checkpoint failed and the cleanup, which made BACKUP-INCOMPLETE before
// removing anything, could not make it and left DIR.tmp empty; with one
// left the copy of a layer file failed and the cleanup could not list
// DIR.tmp, leaving it with the marker, filters/ and wal/ (an adversarial
// tester's sweep of Backup under RLIMIT_NOFILE).
func TestBackupOutOfDescriptorsLeavesNothing(t *testing.T) {
	root := t.TempDir()
	failed := 0
	for n := 0; n <= 4; n++ {
		// A store of its own for each limit: running out of descriptors
		// may fail the store (a WAL segment's directory sync), which is
		// not what this test is about.
		s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: -1})
		b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
		must(t, err)
		c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
		must(t, err)
		must(t, second(b.Add(key(1))))
		must(t, c.Add(key(1)))
		// Backup's own checkpoint then has nothing to do, and no new
		// WAL segment to make: the copying runs out of descriptors.
		must(t, s.Checkpoint())

		dst := filepath.Join(root, fmt.Sprint("copy", n))
		before := openDescriptors(t)
		restore := fdlimit.Leave(t, n)
		err = s.Backup(dst)
		restore()
		if after := openDescriptors(t); len(before) != len(after) {
			t.Errorf("Backup with %d descriptors left (%v): descriptors %v before, %v after", n, err, before, after)
		}
		if err == nil {
			must(t, s.Close())
			continue
		}
		failed++
		if !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("Backup with %d descriptors left: %v, want EMFILE", n, err)
		}
		for _, p := range []string{dst + ".tmp", dst} {
			if _, serr := os.Lstat(p); !errors.Is(serr, fs.ErrNotExist) {
				left, _ := os.ReadDir(p)
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Errorf("Backup with %d descriptors left failed (%v) and left %s (holding %v)", n, err, p, names)
			}
		}
		s.Close()
		// The leftover, if any, stood in the way of the next Backup.
		s = mustOpen(t, s.dir, &Options{CheckpointEvery: -1})
		if err := s.Backup(dst); err != nil {
			t.Errorf("Backup to %s again, with descriptors back: %v", dst, err)
		}
		must(t, s.Close())
	}
	if failed < 2 {
		t.Fatalf("only %d Backups ran out of descriptors: the test no longer reaches the cleanup", failed)
	}
}
