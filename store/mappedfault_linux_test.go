package store

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/mmapbits"
)

// twoFilters opens a store in a new directory with a Bloom filter "bad"
// and a cuckoo filter "good" of 2000 keys each, checkpointed, and returns
// them and the path of bad's layer file.
func twoFilters(t *testing.T) (dir string, s *Store, bad *Bloom, good *Cuckoo, path string) {
	t.Helper()
	dir = t.TempDir()
	s = mustOpen(t, dir, nil)
	bad, err := s.CreateBloom("bad", BloomConfig{Capacity: 100_000, NonScaling: true})
	must(t, err)
	good, err = s.CreateCuckoo("good", CuckooConfig{Capacity: 10_000, NonScaling: true})
	must(t, err)
	bt := s.NewBatch() // one sync, not 4000
	for i := range 2000 {
		bt.BloomAdd(bad, key(i))
		bt.CuckooAdd(good, key(i))
	}
	must(t, second(bt.Commit()))
	must(t, s.Checkpoint())
	return dir, s, bad, good, bad.base().path(0)
}

// TestReadsOfATruncatedLayerFail: a layer file that another process
// truncates while the store has it mapped makes Check, Fill and WriteTo,
// which read the whole filter through the mapping, return an error naming
// the file and wrapping ErrCorrupt, where the fault (SIGBUS) killed the
// process before; Check goes on to the other filters. (Single lookups of
// such a filter still fault without Options.GuardLookups: store doc,
// "Fault model"; changes fail the store: changefault_linux_test.go.)
func TestReadsOfATruncatedLayerFail(t *testing.T) {
	_, s, bad, good, path := twoFilters(t)
	fi, err := os.Stat(path)
	must(t, err)
	// The header and the first data page stay.
	must(t, os.Truncate(path, mmapbits.HeaderSize+mmapbits.PageSize))

	rep, err := s.Check()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Check of a truncated layer: %v, want ErrCorrupt naming %s as truncated", err, path)
	}
	if !strings.Contains(err.Error(), "SIGBUS at 0x") {
		t.Errorf("Check's error does not give the fault's address: %v", err)
	}
	t.Logf("Check: %v", err)
	if rep == nil || rep.Filters != 2 || len(rep.Problems) != 1 {
		t.Fatalf("Check's report: %+v, want both filters checked and one problem", rep)
	}
	if _, err := bad.Fill(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Fill of a truncated layer: %v, want ErrCorrupt naming %s", err, path)
	}
	if _, err := bad.WriteTo(io.Discard); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteTo of a truncated layer: %v, want ErrCorrupt naming %s", err, path)
	}
	if _, err := good.Fill(); err != nil {
		t.Fatalf("Fill of the other filter: %v", err)
	}
	// Give the file its length back (its lost pages read as zeros) so
	// that Close's checkpoint, which reads every page, does not fault.
	must(t, os.Truncate(path, fi.Size()))
	s.Close()
}

// TestCheckpointOfATruncatedLayerFailsTheStore: a checkpoint that reads a
// changed page of a layer file truncated while mapped (its checksum
// update) fails the store, with an error naming the file, where the fault
// killed the process before (an adversarial reviewer's run: one Add after
// the truncation, then Close). The next Open opens that filter broken and
// the other one whole.
func TestCheckpointOfATruncatedLayerFailsTheStore(t *testing.T) {
	dir, s, bad, _, path := twoFilters(t)
	must(t, os.Truncate(path, mmapbits.HeaderSize+mmapbits.PageSize))
	// A change to the page that is left, as an Add landing there makes.
	b := bad.base()
	b.regions[0].Touch(0, 1)
	b.dirty.Store(true)
	err := s.Checkpoint()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a checkpoint over a truncated layer: %v, want ErrFailed and ErrCorrupt naming %s", err, path)
	}
	if err := s.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close of the failed store: %v, want its failure", err)
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	bad, err = s.Bloom("bad")
	must(t, err)
	if _, err := bad.Add(key(0)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("reopened, an add to the truncated filter: %v, want ErrCorrupt for its size", err)
	}
	if !bad.Has(key(5)) {
		t.Fatal("reopened, the broken filter answers absent")
	}
	good, err := s.Cuckoo("good")
	must(t, err)
	for i := range 2000 {
		if !good.Has(key(i)) {
			t.Fatalf("reopened, key %d of the other filter absent", i)
		}
	}
}

// TestParallelChecksumsOfATruncatedLayerFailTheStore: a checkpoint that
// computes a large filter's stale checksums on two goroutines (every page
// changed, as a Load leaves it; mmapbits' pageSums.update) over a file cut
// inside the second goroutine's half of the data pages (which takes the
// checksum pages after them too, so both goroutines fault) fails the
// store naming the file, as the one-goroutine update does
// (TestCheckpointOfATruncatedLayerFailsTheStore), instead of dying of
// SIGBUS on the other goroutine.
func TestParallelChecksumsOfATruncatedLayerFailTheStore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	big, err := s.CreateBloom("big", BloomConfig{Capacity: 60_000_000, NonScaling: true})
	must(t, err)
	b := big.base()
	r := b.regions[0]
	pages := r.NumWords() / mmapbits.WordsPerPage
	if pages < 2*8192 {
		t.Fatalf("%d data pages: too few for two goroutines with 8192 each (mmapbits.sumsParallelMin)", pages)
	}
	must(t, second(big.Add(key(1))))
	must(t, s.Checkpoint())
	path := b.path(0)
	fi, err := os.Stat(path)
	must(t, err)
	// The last eighth of the data pages go, and the checksum pages after
	// them.
	must(t, os.Truncate(path, fi.Size()-int64(pages/8+r.Header().SumPages())*mmapbits.PageSize))
	r.Touch(0, r.NumWords())
	b.dirty.Store(true)
	err = s.Checkpoint()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a checkpoint over a truncated layer: %v, want ErrFailed and ErrCorrupt naming %s", err, path)
	}
	t.Logf("checkpoint: %v", err)
	closeFailedReopenCheck(t, s, dir)
}

// closeFailedReopenCheck closes s, failed for a truncated layer file,
// which must return the failure, and checks that the store in dir,
// reopened, reports one problem.
func closeFailedReopenCheck(t *testing.T, s *Store, dir string) {
	t.Helper()
	if err := s.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close of the failed store: %v, want its failure", err)
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	if rep, err := s.Check(); !errors.Is(err, ErrCorrupt) || rep == nil || len(rep.Problems) != 1 {
		t.Fatalf("reopened, Check: %v (%+v), want one problem", err, rep)
	}
}

// truncatedLookups is the lookups of a filter whose layer file was
// truncated under the store (see faultingLookups).
type truncatedLookups struct {
	hasMany     func([][]byte) []bool
	hasManyHash func([]uint64) []bool
	has         func([]byte) bool
	add         func([]byte) error
	b           *filterBase
	count       func([]byte) uint64 // a counting or cuckoo filter's Count; nil for the others
	f           any                 // the handle: *Bloom, *Cuckoo, *Counting or *Bitmap
	s           *Store
}

// faultingLookups runs the case of TestBatchLookupsOfATruncatedLayer and
// TestGuardedLookupsOfATruncatedLayer: a store opened with opts holds a
// Bloom filter "good" and a filter "bad" of kind (a bitmap's bit for a
// key is at its hash, modulo the size), 2000 keys each, checkpointed;
// with more set, 40 more keys are added after the checkpoint (under
// SyncInterval they wait in the overlay); then bad's file is cut to its
// header and first data page. first looks absent keys up first, and
// every answer must be "maybe"; then the store must have failed naming
// the file, every lookup of bad answer "maybe", good answer as before,
// and the next Open find the problem.
func faultingLookups(t *testing.T, kind string, opts *Options, more bool, first func(l truncatedLookups, absent [][]byte) []bool) {
	dir := t.TempDir()
	s := mustOpen(t, dir, opts)
	good, err := s.CreateBloom("good", BloomConfig{Capacity: 10_000, NonScaling: true})
	must(t, err)
	var l truncatedLookups
	switch kind {
	case "bloom":
		f, err := s.CreateBloom("bad", BloomConfig{Capacity: 100_000})
		must(t, err)
		l = truncatedLookups{f.HasMany, f.HasManyHash, f.Has, func(k []byte) error { _, err := f.Add(k); return err }, f.base(), nil, f, s}
	case "counting":
		f, err := s.CreateCounting("bad", BloomConfig{Capacity: 100_000})
		must(t, err)
		l = truncatedLookups{f.HasMany, f.HasManyHash, f.Has, f.Add, f.base(), f.Count, f, s}
	case "cuckoo":
		f, err := s.CreateCuckoo("bad", CuckooConfig{Capacity: 100_000})
		must(t, err)
		l = truncatedLookups{f.HasMany, f.HasManyHash, f.Has, f.Add, f.base(), f.Count, f, s}
	default:
		f, err := s.CreateBitmap("bad", 2_000_000)
		must(t, err)
		offsets := func(hs []uint64) []uint64 {
			offs := make([]uint64, len(hs))
			for i, h := range hs {
				offs[i] = h % f.Bits()
			}
			return offs
		}
		l.hasManyHash = func(hs []uint64) []bool { return f.GetMany(offsets(hs)) }
		l.hasMany = func(ks [][]byte) []bool {
			hs := make([]uint64, len(ks))
			for i, k := range ks {
				hs[i] = Hash(k)
			}
			return l.hasManyHash(hs)
		}
		l.has = func(k []byte) bool { return f.Get(Hash(k) % f.Bits()) }
		l.add = func(k []byte) error { _, err := f.Set(Hash(k) % f.Bits()); return err }
		l.b, l.f, l.s = f.base(), f, s
	}
	// The keys go in as one Batch of both filters: one WAL sync, where
	// 4000 single adds under SyncAlways took half a second a case.
	var keys [][]byte
	var hs []uint64
	bt := s.NewBatch()
	for i := range 2000 {
		k := key(i)
		batchAdd(bt, l.f, k)
		bt.BloomAdd(good, k)
		keys, hs = append(keys, k), append(hs, Hash(k))
	}
	must(t, second(bt.Commit()))
	absent := make([][]byte, 2000)
	for i := range absent {
		absent[i] = key(1_000_000 + i)
	}
	must(t, s.Checkpoint())
	if more {
		for i := 2000; i < 2040; i++ {
			must(t, l.add(key(i)))
		}
	}
	path := l.b.path(0)
	must(t, os.Truncate(path, mmapbits.HeaderSize+mmapbits.PageSize))

	for i, ok := range first(l, absent) {
		if !ok {
			t.Fatalf("the first lookups over the truncated layer: absent key %d answers absent, want every answer \"maybe\"", i)
		}
	}
	_, err = good.Add(key(0))
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("an add after the faulting lookup: %v, want ErrFailed and ErrCorrupt naming %s as truncated", err, path)
	}
	t.Logf("after the fault: %v", err)
	if err := l.add(key(3)); !errors.Is(err, ErrFailed) {
		t.Fatalf("an add to the faulting filter: %v, want ErrFailed", err)
	}
	for i, ok := range l.hasManyHash(hs) {
		if !ok {
			t.Fatalf("HasManyHash after the fault: key %d answers absent", i)
		}
	}
	for i := range 200 {
		if !l.has(absent[i]) {
			t.Fatalf("Has after the fault: absent key %d answers absent, want \"maybe\" without a read", i)
		}
	}
	// The other filter still reads its own file.
	got := good.HasMany(append(keys[:1000:1000], absent[:1000]...))
	falses := 0
	for i, ok := range got {
		if i < 1000 && !ok {
			t.Fatalf("the other filter: key %d absent", i)
		}
		if !ok {
			falses++
		}
	}
	if falses < 900 {
		t.Fatalf("the other filter answers %d of 1000 absent keys absent, want most", falses)
	}
	if err := s.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close of the failed store: %v, want its failure", err)
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	rep, err := s.Check()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || rep == nil || len(rep.Problems) != 1 {
		t.Fatalf("reopened, Check: %v (%+v), want one problem naming %s", err, rep, path)
	}
}

// batchAdd adds to bt the op that adds key to f, a *Bloom, *Cuckoo,
// *Counting or *Bitmap (which sets the bit at key's hash, modulo its
// size, as faultingLookups gives keys bits).
func batchAdd(bt *Batch, f any, key []byte) {
	switch f := f.(type) {
	case *Bloom:
		bt.BloomAdd(f, key)
	case *Cuckoo:
		bt.CuckooAdd(f, key)
	case *Counting:
		bt.CountingAdd(f, key)
	case *Bitmap:
		bt.BitmapSet(f, Hash(key)%f.Bits())
	}
}

// TestBatchLookupsOfATruncatedLayer: a batch lookup (HasMany and its
// forms, a Bitmap's GetMany) that reads a layer file truncated while
// mapped answers every key "maybe", where the fault (SIGBUS) killed the
// process before; the filter answers every later lookup "maybe", single
// ones included, without reading the mapping; the store fails with an
// error naming the file, so no change can write to it; the other filters
// answer as before.
//
// Under SyncInterval with changes waiting in the overlay, a batch of a
// cuckoo or counting filter or a bitmap reads one key at a time through
// it, and does so under the guard too (twenty-first session; before, that
// path was unguarded and the fault killed the process, seen in this
// test).
func TestBatchLookupsOfATruncatedLayer(t *testing.T) {
	for _, kind := range []string{"bloom", "counting", "cuckoo", "bitmap"} {
		for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
			t.Run(fmt.Sprintf("%s/%v", kind, mode), func(t *testing.T) {
				opts := &Options{Sync: mode, SyncEvery: time.Hour, CheckpointEvery: -1}
				faultingLookups(t, kind, opts, mode == SyncInterval, func(l truncatedLookups, absent [][]byte) []bool {
					if mode == SyncInterval && kind != "bloom" && l.b.ov.size.Load() == 0 {
						t.Fatal("nothing waits in the overlay")
					}
					return l.hasMany(absent)
				})
			})
		}
	}
}

// TestGuardedLookupsOfATruncatedLayer: with Options.GuardLookups, a
// single lookup (Has, a Bitmap's Get) over a truncated layer file answers
// "maybe" and fails the store as a batch lookup does, where without it
// the fault kills the process; under SyncInterval, with changes waiting
// in the overlay, through the overlay's locked reads too (a fault there
// releases the mutex: the store's handling of it, which takes it, would
// hang otherwise).
func TestGuardedLookupsOfATruncatedLayer(t *testing.T) {
	for _, kind := range []string{"bloom", "counting", "cuckoo", "bitmap"} {
		for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
			t.Run(fmt.Sprintf("%s/%v", kind, mode), func(t *testing.T) {
				opts := &Options{GuardLookups: true, Sync: mode, SyncEvery: time.Hour, CheckpointEvery: -1}
				faultingLookups(t, kind, opts, mode == SyncInterval, func(l truncatedLookups, absent [][]byte) []bool {
					out := make([]bool, len(absent))
					for i, k := range absent {
						out[i] = l.has(k)
					}
					return out
				})
			})
		}
	}
	// A counting or cuckoo filter's Count first: "maybe" is the largest
	// count.
	for _, c := range []struct {
		kind string
		mode SyncMode
	}{
		{"counting", SyncAlways}, {"counting", SyncInterval}, {"cuckoo", SyncAlways}, {"cuckoo", SyncInterval},
	} {
		kind, mode := c.kind, c.mode
		t.Run(fmt.Sprintf("%s-Count/%v", kind, mode), func(t *testing.T) {
			opts := &Options{GuardLookups: true, Sync: mode, SyncEvery: time.Hour, CheckpointEvery: -1}
			faultingLookups(t, kind, opts, mode == SyncInterval, func(l truncatedLookups, absent [][]byte) []bool {
				out := make([]bool, len(absent))
				for i, k := range absent {
					out[i] = l.count(k) == math.MaxUint64
				}
				return out
			})
		})
	}
}
