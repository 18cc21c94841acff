package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWALOutOfInodes: on a file system with free blocks but no free inode,
// the WAL cannot start a new segment; the writes go on in the active one
// and every change is acknowledged, checkpoints included (before, the
// first rotation failed the store: ErrFailed for every later change).
// Once inodes are freed the store reopens with every key.
func TestWALOutOfInodes(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			root := smallFSWith(t, "size=64m,nr_inodes=64")
			dir := filepath.Join(root, "store")
			opts := &Options{Sync: mode, SegmentSize: 64 << 10, CheckpointBytes: 256 << 10}
			s := mustOpen(t, dir, opts)
			b, err := s.CreateBloom("b", BloomConfig{Capacity: 200_000, NonScaling: true})
			must(t, err)
			fill := filepath.Join(root, "fill")
			must(t, os.Mkdir(fill, 0o755))
			filled := 0
			for ; ; filled++ {
				f, err := os.Create(filepath.Join(fill, fmt.Sprint(filled)))
				if err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("filling the inodes: %v", err)
					}
					break
				}
				f.Close()
			}
			batch := make([][]byte, 1000)
			const batches = 40
			for i := range batches {
				for j := range batch {
					batch[j] = key(i*len(batch) + j)
				}
				if _, err := b.AddMany(batch); err != nil {
					t.Fatalf("batch %d of %d with no free inode: %v", i, batches, err)
				}
			}
			if _, err := b.Add(key(-1)); err != nil {
				t.Fatalf("an add with no free inode: %v", err)
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatalf("a checkpoint with no free inode: %v", err)
			}
			st := s.Stats()
			if st.WAL.PostponedRotations == 0 {
				t.Fatalf("%d KiB of WAL in segments of 64 KiB and no rotation postponed (%d inodes filled): the test did not run out of inodes", st.WAL.Bytes>>10, filled)
			}
			t.Logf("%d inodes filled; %d rotations postponed; %d segments", filled, st.WAL.PostponedRotations, st.WAL.Segments)
			must(t, s.Close())
			must(t, os.RemoveAll(fill))
			s = mustOpen(t, dir, opts)
			defer s.Close()
			b, err = s.Bloom("b")
			must(t, err)
			for i := range batches * len(batch) {
				if !b.Has(key(i)) {
					t.Fatalf("key %d absent after reopening", i)
				}
			}
			if !b.Has(key(-1)) {
				t.Fatal("the last key absent after reopening")
			}
		})
	}
}
