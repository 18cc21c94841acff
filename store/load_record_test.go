package store

import (
	"errors"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/wal"
)

// wantLoaded fails t unless f is "ok" with n items and keys 0..n-1 (what
// says when).
func wantLoaded(t *testing.T, f loadedFilter, n int, what string) {
	t.Helper()
	if in, _ := f.Info(); in.State != "ok" || in.Items != uint64(n) {
		t.Fatalf("%s: state %q, %d items; want ok, %d", what, in.State, in.Items, n)
	}
	for i := range n {
		if !f.Has(key(i)) {
			t.Fatalf("%s: key %d absent", what, i)
		}
	}
}

// loadOf returns the Load of a loadTarget's filter.
func loadOf(f loadedFilter) func(iter.Seq2[[]byte, error]) error {
	return f.(interface {
		Load(iter.Seq2[[]byte, error]) error
	}).Load
}

// TestOlderCatalogAfterLoadRefused: a catalog copied before a Load into
// an existing filter of each kind, and put back after the Load ended and
// the store closed, is refused by Open with ErrCorrupt (the Load's record
// makes the older catalog's filters need WAL records Close's checkpoint
// removed), and Open changes no file; with the current
// catalog back, the store opens with every key. Before the load record,
// Open took the older catalog's counts.
func TestOlderCatalogAfterLoadRefused(t *testing.T) {
	for _, tg := range loadTargets {
		t.Run(tg.kind, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			_, err := tg.create(s)
			must(t, err)
			must(t, s.Close())
			cat := filepath.Join(dir, format.CatalogName)
			older, err := os.ReadFile(cat)
			must(t, err)

			s = mustOpen(t, dir, nil)
			f, err := tg.open(s)
			must(t, err)
			const n = 10_000
			must(t, loadOf(f)(rangeKeys(0, n)))
			must(t, s.Close())
			current, err := os.ReadFile(cat)
			must(t, err)

			must(t, os.WriteFile(cat, older, 0o644))
			before := dirState(t, dir)
			s2, err := Open(dir, nil)
			if err == nil {
				f, _ := tg.open(s2)
				in, _ := f.Info()
				s2.Close()
				t.Fatalf("Open with a catalog from before the Load succeeded (the filter says %d items, state %q), want ErrCorrupt", in.Items, in.State)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open with a catalog from before the Load: %v, want ErrCorrupt", err)
			}
			t.Logf("Open with the older catalog: %v", err)
			sameDir(t, before, dirState(t, dir))

			must(t, os.WriteFile(cat, current, 0o644))
			s = mustOpen(t, dir, nil)
			defer s.Close()
			f, err = tg.open(s)
			must(t, err)
			wantLoaded(t, f, n, "with the current catalog back")
		})
	}
}

// TestOlderCatalogAfterInterruptedLoad: a power loss in the middle of a
// Load into a cuckoo layer that holds items (the Load inserts in place,
// kicking fingerprints between buckets, so some pages reach the disk
// with a fingerprint moved out and others without it moved in), with
// the catalog then put back from a copy taken before the Load (which
// says the filter is complete): Open must bring the filter back
// incomplete — answering "maybe" to every key — because the Load's
// record is in the WAL after the catalog's checkpoint. Before the load
// record the filter came back "ok", and keys added before the Load were
// absent. A read-only Open before the writer's says incomplete too. And
// Check finds the store clean, after the recovery and after a clean
// Close and Open: the filter's pages may hold the Load's words, and the
// replay skips its records before the load record, so nothing marks
// those pages; the replay that finds the filter incomplete makes its
// checksums unknown, as Open does for a filter the catalog calls
// incomplete. Before, Check reported pages of it as damage (a FUSE crash
// review's find under torn power losses).
func TestOlderCatalogAfterInterruptedLoad(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	const before = 150_000
	// Room in the first layer for the keys the Load adds before the
	// crash, and not many more (so that they kick fingerprints about): a
	// layer it grew would be a file the older catalog does not name,
	// which Open refuses (TestOlderCatalogRefused's case, not this one).
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

	// The Load's first batch goes in place; the source pauses once the
	// second batch is sent (send waits for the first to be added).
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
	must(t, os.WriteFile(cat, older, 0o644))

	// A read-only Open (cmd/inspect's, a reader beside the writer) sees
	// the same: the Load's record is in its overlay's range.
	roOpts := w.opts
	roOpts.ReadOnly = true
	ro, err := Open(w.dir, WithSeams(roOpts, w.sim, w.fs))
	if err != nil {
		t.Fatalf("seed %d: read-only Open after the power loss, with the older catalog: %v", seed, err)
	}
	rc, err := ro.Cuckoo("c")
	must(t, err)
	if in, _ := rc.Info(); in.State != "incomplete" {
		t.Fatalf("seed %d: a read-only Open says the filter is %q, want incomplete", seed, in.State)
	}
	must(t, ro.Close())

	s2, err := w.open(t)
	if err != nil {
		t.Fatalf("seed %d: Open after the power loss, with the older catalog: %v", seed, err)
	}
	defer s2.Close()
	c2, err := s2.Cuckoo("c")
	must(t, err)
	absent := 0
	for i := range before {
		if !c2.Has(key(i)) {
			absent++
		}
	}
	in, err := c2.Info()
	must(t, err)
	if in.State != "incomplete" || absent > 0 {
		t.Fatalf("seed %d: after a power loss in an in-place Load and the catalog from before it, the filter is %q with %d of %d keys added before the Load absent; want incomplete, none absent",
			seed, in.State, absent, before)
	}
	if err := c2.Add([]byte("x")); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Add to the incomplete filter: %v, want ErrIncomplete", err)
	}
	if _, err := s2.Check(); err != nil {
		t.Fatalf("seed %d: Check after the recovery: %v", seed, err)
	}
	// The state is in the catalog: it holds across another reopen.
	must(t, s2.Close())
	s3, err := w.open(t)
	must(t, err)
	defer s3.Close()
	c3, err := s3.Cuckoo("c")
	must(t, err)
	if in, _ := c3.Info(); in.State != "incomplete" {
		t.Fatalf("seed %d: after another reopen the filter is %q, want incomplete", seed, in.State)
	}
	if _, err := s3.Check(); err != nil {
		t.Fatalf("seed %d: Check after a clean Close and Open: %v", seed, err)
	}
}

// TestLoadRecordSyncFails: the fdatasync that makes a Load's record
// durable fails. The Load returns an error wrapping ErrFailed before it
// changes a word, the store fails, and after the process dies every key
// added before is found on reopen; the filter is back as it was, or
// incomplete where the record reached the WAL file (always after a kill,
// which keeps what was written), never "ok" with a key missing.
func TestLoadRecordSyncFails(t *testing.T) {
	for _, end := range []string{"kill", "power loss"} {
		t.Run(end, func(t *testing.T) {
			seed := testseed.Seed(t)
			rng := rand.New(rand.NewPCG(seed, 8))
			w := newSimWorld(t, SyncAlways)
			s, err := w.open(t)
			must(t, err)
			c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 10_000})
			must(t, err)
			for i := range 1000 {
				must(t, c.Add(key(i)))
			}
			w.fs.SetInjector(func(op wal.Op, name string) error {
				if op == wal.OpSync {
					return syscall.EIO
				}
				return nil
			})
			err = c.Load(rangeKeys(1000, 2000))
			w.fs.SetInjector(nil)
			if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Load whose record's fdatasync failed: %v, want ErrFailed wrapping EIO", err)
			}
			if end == "kill" {
				w.kill(s)
			} else {
				w.crash(s, rng)
			}
			s2, err := w.open(t)
			if err != nil {
				t.Fatalf("seed %d: reopen: %v", seed, err)
			}
			defer s2.Close()
			c2, err := s2.Cuckoo("c")
			must(t, err)
			in, err := c2.Info()
			must(t, err)
			t.Logf("after the failed Load and a %s: state %q, %d items", end, in.State, in.Items)
			if end == "kill" && in.State != "incomplete" {
				// The record was written before its fdatasync failed: the
				// page cache, which a kill keeps, holds it.
				t.Fatalf("seed %d: after a kill the filter is %q, want incomplete (its load record reached the WAL file)", seed, in.State)
			}
			if in.State == "ok" && in.Items != 1000 {
				t.Fatalf("seed %d: the filter is ok with %d items, want 1000 (the Load changed nothing)", seed, in.Items)
			}
			for i := range 1000 {
				if !c2.Has(key(i)) {
					t.Fatalf("seed %d: key %d, added before the failed Load, is absent", seed, i)
				}
			}
		})
	}
}

// TestOlderCatalogAfterExternalSkip: in external-log mode an add that
// does not fit a NonScaling filter is skipped and the filter marked
// incomplete; once the record that skipped it is durable the engine may
// drop its own record. With the process then killed (no checkpoint) and
// the catalog put back from a copy taken before the mark, Open must
// still bring the filter back incomplete: the mark is in the WAL (a load
// record logged before the skipping record). Before, the filter came
// back "ok" and the skipped keys read absent.
func TestOlderCatalogAfterExternalSkip(t *testing.T) {
	dir := t.TempDir()
	opts := &Options{Sync: SyncInterval, CheckpointEvery: -1}
	s := mustOpen(t, dir, opts)
	_, err := s.CreateBloom("full", BloomConfig{Capacity: 10, NonScaling: true})
	must(t, err)
	must(t, s.Close())
	cat := filepath.Join(dir, format.CatalogName)
	older, err := os.ReadFile(cat)
	must(t, err)

	s = mustOpen(t, dir, opts)
	full, err := s.Bloom("full")
	must(t, err)
	bt := s.NewBatch()
	const n = 200
	for i := range n {
		bt.BloomAdd(full, key(i))
	}
	rec, err := bt.Encode()
	must(t, err)
	res, err := s.ApplyExternal(rec)
	must(t, err)
	seq, err := ExternalSeq(rec)
	must(t, err)
	must(t, s.log.Sync()) // the interval's fdatasync
	if s.ExternalDurable() < seq {
		t.Fatalf("ExternalDurable %d below the record's seq %d after the WAL's fdatasync", s.ExternalDurable(), seq)
	}
	skipped := 0
	for _, ok := range res {
		if !ok {
			skipped++
		}
	}
	if st := mustInfo(t, full).State; st != "incomplete" || skipped == 0 {
		t.Fatalf("after %d adds into a NonScaling filter of capacity 10: state %q, %d skipped; want incomplete, some skipped", n, st, skipped)
	}
	s.abandonForTest() // killed: no checkpoint
	must(t, os.WriteFile(cat, older, 0o644))

	s = mustOpen(t, dir, opts)
	defer s.Close()
	full, err = s.Bloom("full")
	must(t, err)
	absent := 0
	for i := range n {
		if !full.Has(key(i)) {
			absent++
		}
	}
	if st := mustInfo(t, full).State; st != "incomplete" || absent > 0 {
		t.Fatalf("reopened with the catalog from before the skip: state %q, %d of %d keys absent (the engine dropped its record); want incomplete, none absent",
			st, absent, n)
	}
}

// TestOlderCatalogSessionKeepsLoadedFile: a Load in place into a cuckoo
// filter, after adds logged since a catalog copy, with a broken filter
// keeping the WAL (so the Load's record stays there after Close). Opening
// with the copy brings the filter back incomplete, as promised; it must
// also leave the filter's file as the Load left it, so that the current
// catalog, put back after that session (closed or killed), opens the
// filter "ok" with every key. Replay skips the filter's records before
// its load record: their after-images, planned before the Load, used to
// overwrite fingerprints the Load had moved (1837 of 81000 keys absent).
func TestOlderCatalogSessionKeepsLoadedFile(t *testing.T) {
	for _, end := range []string{"close", "kill"} {
		t.Run(end, func(t *testing.T) {
			dir := t.TempDir()
			opts := &Options{CheckpointEvery: -1}
			s := mustOpen(t, dir, opts)
			x, err := s.CreateBloom("x", BloomConfig{Capacity: 1000})
			must(t, err)
			xpath := x.b.path(0)
			c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 100_000})
			must(t, err)
			addRange := func(lo, hi int) {
				t.Helper()
				keys := make([][]byte, 0, hi-lo)
				for i := lo; i < hi; i++ {
					keys = append(keys, key(i))
				}
				if n, err := c.AddMany(keys); err != nil || n != hi-lo {
					t.Fatalf("AddMany of %d keys: %d, %v", hi-lo, n, err)
				}
			}
			addRange(0, 20_000)
			must(t, s.Close())
			cat := filepath.Join(dir, format.CatalogName)
			older, err := os.ReadFile(cat)
			must(t, err)
			must(t, os.Rename(xpath, xpath+".away")) // x opens broken: the WAL stays

			s = mustOpen(t, dir, opts)
			c, err = s.Cuckoo("c")
			must(t, err)
			addRange(20_000, 21_000)                     // words records before the Load
			must(t, c.Load(rangeKeys(100_000, 160_000))) // in place
			must(t, s.Close())
			current, err := os.ReadFile(cat)
			must(t, err)

			must(t, os.WriteFile(cat, older, 0o644))
			s = mustOpen(t, dir, opts)
			c, err = s.Cuckoo("c")
			must(t, err)
			if st := mustInfo(t, c).State; st != "incomplete" {
				t.Fatalf("with the catalog from before the Load: state %q, want incomplete", st)
			}
			if end == "close" {
				must(t, s.Close())
			} else {
				s.abandonForTest()
			}

			must(t, os.WriteFile(cat, current, 0o644))
			s = mustOpen(t, dir, opts)
			defer s.Close()
			c, err = s.Cuckoo("c")
			must(t, err)
			absent := 0
			for _, r := range [][2]int{{0, 21_000}, {100_000, 160_000}} {
				for i := r[0]; i < r[1]; i++ {
					if !c.Has(key(i)) {
						absent++
					}
				}
			}
			if st := mustInfo(t, c).State; st != "ok" || absent > 0 {
				t.Fatalf("the current catalog back: state %q, %d of 81000 keys absent; want ok, none", st, absent)
			}
		})
	}
}

// TestLoadCheckpointKeepsSegments: the checkpoint that ends a Load starts
// no WAL segment and deletes none (that is left to the next checkpoint),
// so its load record stays in the WAL. After the process dies, the
// current catalog, which covers the record, opens the filter "ok" with
// every key; one copied before the Load opens it incomplete.
func TestLoadCheckpointKeepsSegments(t *testing.T) {
	for _, tg := range loadTargets {
		t.Run(tg.kind, func(t *testing.T) {
			dir := t.TempDir()
			opts := &Options{CheckpointEvery: -1}
			s := mustOpen(t, dir, opts)
			_, err := tg.create(s)
			must(t, err)
			must(t, s.Checkpoint())
			cat := filepath.Join(dir, format.CatalogName)
			older, err := os.ReadFile(cat)
			must(t, err)
			segments := func() []string {
				t.Helper()
				ents, err := os.ReadDir(filepath.Join(dir, format.WALName))
				must(t, err)
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				return names
			}
			before := segments()
			f, err := tg.open(s)
			must(t, err)
			const n = 5000
			must(t, loadOf(f)(rangeKeys(0, n)))
			if after := segments(); !slices.Equal(before, after) {
				t.Fatalf("the Load's checkpoint changed the WAL's segments: %v -> %v", before, after)
			}
			s.abandonForTest() // killed: the load record stays in the WAL
			current, err := os.ReadFile(cat)
			must(t, err)

			for _, c := range []struct {
				name  string
				cat   []byte
				state string
			}{{"current", current, "ok"}, {"older", older, "incomplete"}} {
				must(t, os.WriteFile(cat, c.cat, 0o644))
				ro := mustOpen(t, dir, &Options{ReadOnly: true})
				f, err := tg.open(ro)
				must(t, err)
				if in, _ := f.Info(); in.State != c.state {
					t.Errorf("%s catalog, read-only: state %q, want %q", c.name, in.State, c.state)
				}
				must(t, ro.Close())
			}
			must(t, os.WriteFile(cat, current, 0o644))
			s = mustOpen(t, dir, opts)
			defer s.Close()
			f, err = tg.open(s)
			must(t, err)
			wantLoaded(t, f, n, "reopened with the current catalog")
		})
	}
}

// TestReadOnlyOpenRacingLoadEnd: a read-only Open reads the catalog while
// a Load runs (the filter "loading"), and the Load ends, with its
// checkpoint, before the Open scans the WAL. That checkpoint keeps the
// WAL's segments, so nothing in the scan tells the Open to start over;
// it must read the catalog again and see the Load ended, or the filter
// answers "maybe" for the read-only store's whole life (it did).
func TestReadOnlyOpenRacingLoadEnd(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	defer s.Close()
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 10_000})
	must(t, err)
	for i := range 100 {
		must(t, c.Add(key(i)))
	}
	must(t, s.Checkpoint())
	paused, resume := make(chan struct{}), make(chan struct{})
	loaded := make(chan error, 1)
	go func() {
		loaded <- c.Load(func(yield func([]byte, error) bool) {
			close(paused)
			<-resume
			for i := 1000; i < 6000; i++ {
				if !yield(key(i), nil) {
					return
				}
			}
		})
	}()
	<-paused // the Load began: its record is logged, the catalog says loading
	var armed, fired atomic.Bool
	var loadErr error
	w.fs.SetInjector(func(op wal.Op, name string) error {
		if op == wal.OpList && armed.Load() && fired.CompareAndSwap(false, true) {
			// The read-only Open read the catalog; let the Load end
			// before it scans the WAL.
			close(resume)
			loadErr = <-loaded
		}
		return nil
	})
	defer w.fs.SetInjector(nil)
	roOpts := w.opts
	roOpts.ReadOnly = true
	armed.Store(true)
	ro, err := Open(w.dir, WithSeams(roOpts, w.sim, w.fs))
	must(t, err)
	defer ro.Close()
	if !fired.Load() {
		t.Fatal("the read-only Open listed no WAL segment: the race was not staged")
	}
	must(t, loadErr)
	rc, err := ro.Cuckoo("c")
	must(t, err)
	if in, _ := rc.Info(); in.State != "ok" {
		t.Fatalf("read-only Open that raced the Load's end: state %q, want ok (the Load ended before its scan)", in.State)
	}
	absent := 0
	for i := 1000; i < 6000; i++ {
		if !rc.Has(key(i)) {
			absent++
		}
	}
	if absent > 0 {
		t.Fatalf("%d of the Load's 5000 keys absent in the read-only store", absent)
	}
}
