package store

import (
	"errors"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/fdlimit"
)

// TestCheckpointOutOfDescriptorsFailsOnlyTheCall: a checkpoint that runs
// out of file descriptors (EMFILE) at any point, the new WAL segment it
// starts among them, fails only the call, or postpones the segment: the
// store goes on taking changes, and after a reopen every acknowledged key is there. Before,
// with one descriptor left, the new segment was created and renamed into
// place, and the directory sync after the rename, which opens the
// directory, failed: the store failed (ErrFailed), since the segment's
// name might not be durable (an adversarial tester's sweep under
// RLIMIT_NOFILE). The WAL now opens the directory before the segment's
// name can reach it, and postpones the segment if it cannot.
func TestCheckpointOutOfDescriptorsFailsOnlyTheCall(t *testing.T) {
	postponed := 0
	for n := 0; n <= 6; n++ {
		dir := t.TempDir()
		s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
		b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
		must(t, err)
		must(t, second(b.Add(key(1))))
		restore := fdlimit.Leave(t, n)
		cerr := s.Checkpoint()
		restore()
		t.Logf("%d descriptors left: %v", n, cerr)
		if st := s.Stats(); st.WAL.PostponedRotations > 0 {
			postponed++
		}
		if cerr != nil {
			if !errors.Is(cerr, syscall.EMFILE) || errors.Is(cerr, ErrFailed) {
				t.Errorf("checkpoint with %d descriptors left: %v; want EMFILE, the store not failed", n, cerr)
			}
		}
		if err := s.failed(); err != nil {
			t.Fatalf("checkpoint with %d descriptors left (%v) failed the store: %v", n, cerr, err)
		}
		must(t, second(b.Add(key(2))))
		must(t, s.Checkpoint())
		must(t, second(b.Add(key(3))))
		must(t, s.Close())
		s = mustOpen(t, dir, nil)
		b, err = s.Bloom("b")
		must(t, err)
		for i := 1; i <= 3; i++ {
			if !b.Has(key(i)) {
				t.Fatalf("with %d descriptors left: acknowledged key %d absent after reopen", n, i)
			}
		}
		must(t, s.Close())
	}
	if postponed == 0 {
		t.Fatal("no checkpoint postponed its WAL segment for want of descriptors: the test no longer reaches it")
	}
}
