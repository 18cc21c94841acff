package store

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
)

// TestReplayedLoadRecordInvalidatesSums: found by the FUSE power-loss
// tests (fusecrash/, torn losses with an injected EIO): after a power
// loss, a cuckoo (or counting) filter whose catalog entry does not say
// "loading" but whose Load record is in the WAL after its checkpoint (a
// Load interrupted before the catalog marked it, or a catalog from
// before the Load) comes back incomplete from the replay. Its pages may
// hold words the interrupted Load wrote, and the replay skips its
// records before the load record, so nothing marks those pages stale:
// their checksums must count as unknown, as those of a filter the
// catalog calls incomplete do. Before, Check reported the pages as
// damage (checksum mismatch, ErrCorrupt), and so did inspect verify
// after a clean Close, which recomputed nothing.
func TestReplayedLoadRecordInvalidatesSums(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	const before = 150_000
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: before + 2*cuckooLoadBatch + cuckooLoadBatch/4})
	must(t, err)
	keys := make([][]byte, before)
	for i := range keys {
		keys[i] = key(i)
	}
	if n, err := c.AddMany(keys); err != nil || n != before {
		t.Fatalf("AddMany: %d, %v", n, err)
	}
	must(t, s.Checkpoint())
	cat := filepath.Join(w.dir, format.CatalogName)
	older, err := os.ReadFile(cat)
	must(t, err)

	paused, resume := make(chan struct{}), make(chan struct{})
	loaded := make(chan error, 1)
	go func() {
		loaded <- c.Load(func(yield func([]byte, error) bool) {
			for i := before; i < before+3*cuckooLoadBatch; i++ {
				if i == before+2*cuckooLoadBatch+10 {
					close(paused)
					<-resume
				}
				if !yield(key(i), nil) {
					return
				}
			}
		})
	}()
	<-paused
	w.crash(s, rng)
	close(resume)
	<-loaded
	// The catalog as it was before the Load marked the filter loading.
	must(t, os.WriteFile(cat, older, 0o644))

	s2, err := w.open(t)
	if err != nil {
		t.Fatalf("seed %d: Open after the power loss: %v", seed, err)
	}
	c2, err := s2.Cuckoo("c")
	must(t, err)
	if in, _ := c2.Info(); in.State != "incomplete" {
		t.Fatalf("seed %d: the filter is %q, want incomplete", seed, in.State)
	}
	if rep, err := s2.Check(); err != nil {
		t.Fatalf("seed %d: Check after the recovery: %v (%+v)", seed, err, rep)
	}
	must(t, s2.Close())
	s3, err := w.open(t)
	must(t, err)
	defer s3.Close()
	if rep, err := s3.Check(); err != nil {
		t.Fatalf("seed %d: Check after a clean Close and Open: %v (%+v)", seed, err, rep)
	}
}
