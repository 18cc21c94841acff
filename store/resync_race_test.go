package store

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// TestResyncFileBackBetweenEvictAndOpen: after a failed msync (full
// RESYNC, process killed, the cache keeping c's sticky-lost pages), the
// resyncing Open finds c's layer file missing when it evicts (moved away)
// and there again when it maps it (moved back meanwhile). c then opens
// healthy on the pages its eviction never dropped: the replay and the
// rewrite "succeed" into pages that stay lost, the recovery checkpoint
// advances c's synced LSN past the records, and the marker lists c-0
// only. A later Open that evicts c (the partial marker) or a power loss
// reads what the disk holds: acknowledged keys are gone.
func TestResyncFileBackBetweenEvictAndOpen(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := newTestRand(seed)
		w, fail := stickyFaultWorld(t, true)
		var cpath string
		evictMissing := false
		syncFail := fail.sim(mmapbits.OpSync)
		w.sim.SetInjector(func(op mmapbits.Op, p string) error {
			if evictMissing && p == cpath && op == mmapbits.OpEvict {
				evictMissing = false // moved back right after
				return syscall.ENOENT
			}
			return syncFail(op, p)
		})
		s, err := w.open(t)
		must(t, err)
		c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4096})
		must(t, err)
		const n = 300
		for i := range n {
			must(t, c.Add(key(i)))
		}
		failCheckpoint(t, s, fail, seed) // full RESYNC
		w.kill(s)
		for _, p := range w.sim.Paths() {
			if strings.HasSuffix(p, "1-0.flt") {
				cpath = p
			}
		}
		if cpath == "" {
			t.Fatalf("no layer file: %v", w.sim.Paths())
		}
		evictMissing = true
		s, err = w.open(t) // c missing at evict, back at open
		must(t, err)
		marker := filepath.Join(w.dir, format.ResyncName)
		st := mustInfoState(s, "c")
		t.Logf("seed %d: c is %q after the resyncing Open; RESYNC lists %v", seed, st, readResyncList(marker))
		must(t, s.Checkpoint())
		s = afterPowerLoss(t, w, s, rng, seed)
		lost := missingCuckooKeys(t, s, "c", n)
		if len(lost) > 0 {
			t.Fatalf("seed %d: %d of %d acknowledged cuckoo keys lost (first %d): c's file, missing at the eviction and back at the mapping, opened on pages never dropped", seed, len(lost), n, lost[0])
		}
		must(t, s.Close())
	}
}

// TestResyncCatalogBackBetweenEvictAndOpen: the catalog analogue. A full
// RESYNC (a failed catalog commit writes one); at the next Open the
// catalog is missing when evictCatalogForResync would drop its pages
// (moved away) and there again when bbolt opens it (moved back): the
// Open trusts the catalog's cached pages, never dropped, and removes the
// marker.
func TestResyncCatalogBackBetweenEvictAndOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	s := mustOpen(t, dir, nil)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, second(b.Add(key(1))))
	must(t, s.Close())
	marker := filepath.Join(dir, format.ResyncName)
	must(t, os.WriteFile(marker, nil, 0o644)) // a full marker
	was := evictCatalog
	t.Cleanup(func() { evictCatalog = was })
	evicted, skipped := false, false
	evictCatalog = func(p string) error {
		// Moved away at this moment: as OS.Evict reports it.
		skipped = true
		return fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Logf("Open refused: %v", err)
		return
	}
	defer s.Close()
	_, merr := os.Stat(marker)
	t.Logf("eviction skipped (missing): %v; evicted: %v; Open succeeded; marker: %v", skipped, evicted, merr)
	if merr != nil {
		t.Fatalf("the Open trusted the catalog, whose pages it never dropped (missing at the eviction, there at the open), and removed %s", format.ResyncName)
	}
}
