package store

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// Where a file's stamp may legitimately pass the WAL's end, and the
// writer's Open must not take it for a plain copy of a live store
// (breakNewerThanWAL, TestPlainCopyOfLiveStoreOpensBroken).

// TestLostWALRestartInterruptedKeepsFilter: after a clean Close the WAL
// is lost (documented as losing nothing). The next Open's wal.Open makes
// segment 1, then recover restarts the WAL at the checkpoint + 1
// (SetNextLSN), before the session marker exists. If that Open stops in
// between (here: the removal of segment 1 fails; a kill or power loss
// there leaves the same), segment 1 stays, empty, and the Open after that
// found a WAL ending at LSN 0, below every stamp: the filter opened
// broken, "newer than the WAL" (a reviewer of the rule). A WAL with no
// record past the checkpoint has nothing to replay, and says nothing of
// the files.
func TestLostWALRestartInterruptedKeepsFilter(t *testing.T) {
	for _, how := range []string{"remove fails", "remove fails then power loss"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			sim, mem := mmapbits.NewSim(), wal.NewMemFS()
			s, err := Open(dir, WithSeams(Options{CheckpointEvery: -1}, sim, mem))
			must(t, err)
			c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
			must(t, err)
			for i := range 100 {
				must(t, c.Add(key(i)))
			}
			must(t, s.Close())
			w := filepath.Join(dir, format.WALName)
			names, err := mem.List(w)
			must(t, err)
			for _, n := range names {
				must(t, mem.Remove(filepath.Join(w, n)))
			}
			// The Open's WAL restart fails at its remove of segment 1.
			mem.SetInjector(func(op wal.Op, name string) error {
				if op == wal.OpRemove {
					return syscall.EIO
				}
				return nil
			})
			if s, err := Open(dir, WithSeams(Options{}, sim, mem)); err == nil {
				s.Close()
				t.Fatal("Open succeeded though the WAL restart's remove failed")
			} else {
				t.Logf("failed Open: %v", err)
			}
			mem.SetInjector(nil)
			if how == "remove fails then power loss" {
				// Segment 1, made durably by wal.Open, survives it.
				rng := rand.New(rand.NewPCG(1, 2))
				sim.Crash(rng)
				mem = mem.Crash(rng)
			}
			names, _ = mem.List(w)
			t.Logf("WAL after the interrupted Open: %v", names)
			s, err = Open(dir, WithSeams(Options{}, sim, mem))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			c, err = s.Cuckoo("c")
			must(t, err)
			if _, err := c.Info(); err != nil {
				t.Errorf("cuckoo c after a lost WAL and an interrupted Open: %v", err)
			}
		})
	}
}

// TestOlderCatalogReopenKeepsFilter: the store of olderCatalogAfterLoad
// (catalog put back from before a Load, WAL removed after a clean Close),
// which TestLoadOverOlderCatalogKeepsKeys and TestAddsOverOlderCatalogGrow
// open and use, is opened, closed with no change (or with changes to
// another filter only), and opened again. The layer file's stamp (the
// Load's checkpoint) was past the restarted WAL's end, and the second
// Open took it for a copy's, newer than the WAL: the filter opened broken
// (a reviewer of the rule). Now the first Open brings the stamp down to
// the checkpoint the WAL restarts from (lowerStamps).
func TestOlderCatalogReopenKeepsFilter(t *testing.T) {
	for _, other := range []bool{false, true} {
		dir := olderCatalogAfterLoad(t, 5000)
		s := mustOpen(t, dir, nil)
		c, err := s.Cuckoo("c")
		must(t, err)
		if in, err := c.Info(); err != nil {
			t.Fatalf("first open: %v", err)
		} else {
			t.Logf("first open: items %d, stamp %d, wal last %d", in.Items, c.b.regions[0].Stamp(), s.log.LastLSN())
		}
		if other {
			bm, err := s.CreateBitmap("m", 1024)
			must(t, err)
			for i := range 3 {
				must(t, second(bm.Set(uint64(i))))
			}
		}
		must(t, s.Close())
		s = mustOpen(t, dir, nil)
		c, err = s.Cuckoo("c")
		must(t, err)
		if _, err := c.Info(); err != nil {
			t.Errorf("other=%v: second open: cuckoo c: %v", other, err)
		}
		absent := 0
		for i := range 5000 {
			if !c.Has(key(i)) {
				absent++
			}
		}
		if absent > 0 {
			t.Errorf("other=%v: %d of 5000 loaded keys absent", other, absent)
		}
		must(t, s.Close())
	}
}

// TestOlderCatalogAfterAddsReopenKeepsFilter: as above, with the catalog
// put back from before 1000 cuckoo adds (stamp about 1000) and 10 changes
// to another filter made after the WAL restarted at the old checkpoint,
// so that the WAL holds records past the checkpoint at the next Open.
func TestOlderCatalogAfterAddsReopenKeepsFilter(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	_, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1 << 14})
	must(t, err)
	_, err = s.CreateBitmap("m", 1024)
	must(t, err)
	must(t, s.Close())
	backup, err := os.ReadFile(filepath.Join(dir, format.CatalogName))
	must(t, err)
	s = mustOpen(t, dir, nil)
	c, err := s.Cuckoo("c")
	must(t, err)
	for i := range 1000 {
		must(t, c.Add(key(i)))
	}
	must(t, s.Close())
	must(t, os.WriteFile(filepath.Join(dir, format.CatalogName), backup, 0o644))
	must(t, os.RemoveAll(filepath.Join(dir, format.WALName)))
	s = mustOpen(t, dir, nil)
	bm, err := s.Bitmap("m")
	must(t, err)
	for i := range 10 {
		must(t, second(bm.Set(uint64(i))))
	}
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	c, err = s.Cuckoo("c")
	must(t, err)
	if _, err := c.Info(); err != nil {
		t.Errorf("cuckoo c: %v", err)
	}
}

// TestLostSyncedWALPageOpensBroken: a page of the last WAL segment that
// the disk lost after its fdatasync (zeros, records after it intact) reads
// as a torn tail, and Open drops every record from it on (documented: the
// WAL cannot tell it from an unsynced tail). The cuckoo filter's file,
// whose words the dropped records had changed, then had older
// after-images replayed over it: 3 of 2000 acknowledged keys read absent,
// the filter "ok". Its stamp is past the truncated WAL's end, so it now
// opens broken: lookups answer "maybe", nothing reads absent.
func TestLostSyncedWALPageOpensBroken(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncAlways, CheckpointEvery: -1})
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 100000})
	must(t, err)
	must(t, s.Checkpoint())
	for i := range 2000 {
		must(t, c.Add(key(i)))
	}
	s.killForTest()
	ents, err := os.ReadDir(filepath.Join(dir, format.WALName))
	must(t, err)
	f, err := os.OpenFile(filepath.Join(dir, format.WALName, ents[len(ents)-1].Name()), os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt(make([]byte, 4096), 8192) // the third page, records of the middle of the run
	must(t, err)
	must(t, f.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	c, err = s.Cuckoo("c")
	must(t, err)
	if _, err := c.Info(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "newer than the WAL") {
		t.Errorf("Info after a lost synced WAL page: %v, want broken, newer than the WAL", err)
	}
	for i := range 2000 {
		if !c.Has(key(i)) {
			t.Fatalf("key %d reads absent", i)
		}
	}
}
