package store

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
)

// A change reads and writes the filter's mapping (changeguard.go): over a
// layer file truncated while mapped, the change must fail the store with
// an error naming the file, where the fault (SIGBUS) killed the process
// before.

// faultingChange is a change TestChangesOfATruncatedLayer makes first over
// a truncated layer file, for the kinds it names. run makes it and returns
// its first error: present are keys the filter holds, absent keys it does
// not.
type faultingChange struct {
	name  string
	kinds []string
	run   func(l truncatedLookups, present, absent [][]byte) error
	// whole: the change is one call that acknowledges all its keys or
	// none, so a cuckoo or counting filter's item count must not move.
	whole bool
}

var allKinds = []string{"bloom", "counting", "cuckoo", "bitmap"}

// bitOffsets is the bitmap offsets faultingLookups gives keys.
func bitOffsets(m *Bitmap, keys [][]byte) []uint64 {
	offs := make([]uint64, len(keys))
	for i, k := range keys {
		offs[i] = Hash(k) % m.Bits()
	}
	return offs
}

var faultingChanges = []faultingChange{
	{"Add", allKinds, func(l truncatedLookups, _, absent [][]byte) error {
		for _, k := range absent {
			if err := l.add(k); err != nil {
				return err
			}
		}
		return nil
	}, false},
	{"AddMany", allKinds, func(l truncatedLookups, _, absent [][]byte) (err error) {
		switch f := l.f.(type) {
		case *Bloom:
			_, err = f.AddMany(absent)
		case *Cuckoo:
			_, err = f.AddMany(absent)
		case *Counting:
			_, err = f.AddMany(absent)
		case *Bitmap:
			_, err = f.SetMany(bitOffsets(f, absent))
		}
		return err
	}, true},
	{"Delete", []string{"counting", "cuckoo", "bitmap"}, func(l truncatedLookups, present, _ [][]byte) (err error) {
		for _, k := range present {
			switch f := l.f.(type) {
			case *Cuckoo:
				_, err = f.Delete(k)
			case *Counting:
				_, err = f.Delete(k)
			case *Bitmap:
				_, err = f.Clear(bitOffsets(f, [][]byte{k})[0])
			}
			if err != nil {
				return err
			}
		}
		return nil
	}, false},
	{"AddNX", []string{"cuckoo"}, func(l truncatedLookups, _, absent [][]byte) error {
		for _, k := range absent {
			if _, err := l.f.(*Cuckoo).AddNX(k); err != nil {
				return err
			}
		}
		return nil
	}, false},
	{"Batch", allKinds, func(l truncatedLookups, _, absent [][]byte) error {
		bt := l.s.NewBatch()
		for _, k := range absent {
			batchAdd(bt, l.f, k)
		}
		_, err := bt.Commit()
		return err
	}, true},
	{"Load", []string{"bloom", "counting", "cuckoo"}, func(l truncatedLookups, _, absent [][]byte) error {
		keys := func(yield func([]byte, error) bool) {
			for _, k := range absent {
				if !yield(k, nil) {
					return
				}
			}
		}
		switch f := l.f.(type) {
		case *Bloom:
			return f.Load(keys)
		case *Cuckoo:
			return f.Load(keys)
		case *Counting:
			return f.Load(keys)
		}
		return nil
	}, false},
}

// inFirstPageFirst returns keys reordered so that those whose counters
// lie in f's first data page come first.
func inFirstPageFirst(f *Counting, keys [][]byte) [][]byte {
	var first, rest [][]byte
	for _, k := range keys {
		if f.c.BlockOf(Hash(k)) < mmapbits.WordsPerPage/bloom.BlockWords {
			first = append(first, k)
		} else {
			rest = append(rest, k)
		}
	}
	if len(first) == 0 {
		panic("no key's counters lie in the first page")
	}
	return append(first, rest...)
}

// TestChangesOfATruncatedLayer: a change (single and batch adds, deletes,
// a Batch, a Load into the filter) that reads or writes a layer file
// truncated while mapped fails with ErrFailed and ErrCorrupt naming the
// file, where the fault (SIGBUS) killed the process before; then, as after
// a lookup's fault (faultingLookups): the filter answers every lookup
// "maybe" without reading (single lookups are unguarded here: a read
// would fault), the store refuses changes, the other filter answers as
// before, and the next Open finds the problem. Under SyncInterval with
// changes waiting in the overlay too.
func TestChangesOfATruncatedLayer(t *testing.T) {
	present := make([][]byte, 2000)
	for i := range present {
		present[i] = key(i)
	}
	for _, c := range faultingChanges {
		for _, kind := range c.kinds {
			for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
				t.Run(fmt.Sprintf("%s/%s/%v", c.name, kind, mode), func(t *testing.T) {
					opts := &Options{Sync: mode, SyncEvery: time.Hour, CheckpointEvery: -1}
					faultingLookups(t, kind, opts, mode == SyncInterval, func(l truncatedLookups, absent [][]byte) []bool {
						items := func() uint64 {
							if f, ok := l.f.(interface{ Items() uint64 }); ok {
								return f.Items()
							}
							return 0
						}
						before := items()
						if f, ok := l.f.(*Counting); ok && c.whole {
							// Keys whose counters lie in the page left first:
							// their plans move the count before a later key
							// faults.
							absent = inFirstPageFirst(f, absent)
						}
						err := c.run(l, present, absent)
						if after := items(); c.whole && after != before {
							t.Errorf("%s: the item count went from %d to %d over a change that failed whole", c.name, before, after)
						}
						path := l.b.path(0)
						if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
							t.Fatalf("%s over the truncated layer: %v, want ErrFailed and ErrCorrupt naming %s as truncated", c.name, err, path)
						}
						t.Logf("%s: %v", c.name, err)
						return l.hasMany(absent)
					})
				})
			}
		}
	}
}

// TestApplyOfATruncatedLayerFailsTheStore: under SyncInterval, changes
// wait in the overlay until the WAL is synced, and are then written into
// the mapping: by a checkpoint, or by the background goroutine after the
// periodic sync (applySynced). Over a layer file truncated meanwhile,
// that write faults: the checkpoint fails, and the background goroutine
// fails the store, naming the file, where the fault killed the process
// before; the filter answers every lookup "maybe" from then on.
func TestApplyOfATruncatedLayerFailsTheStore(t *testing.T) {
	for _, kind := range []string{"counting", "cuckoo", "bitmap"} {
		for _, by := range []string{"checkpoint", "background"} {
			for _, cut := range truncations {
				t.Run(fmt.Sprintf("%s/%s/%s", kind, by, cut.name), func(t *testing.T) {
					applyOfATruncatedLayer(t, kind, by, cut.size)
				})
			}
		}
	}
}

// truncations are the lengths the tests cut a layer file to: its header
// and first data page, or nothing (a change that writes the header page
// first, as a cuckoo filter's move counter, faults there).
var truncations = []struct {
	name string
	size int64
}{
	{"to-one-page", mmapbits.HeaderSize + mmapbits.PageSize},
	{"to-zero", 0},
}

// applyOfATruncatedLayer is a case of
// TestApplyOfATruncatedLayerFailsTheStore: the overlay of a filter of
// kind applied by a checkpoint or the background goroutine (by) over its
// layer file cut to size bytes.
func applyOfATruncatedLayer(t *testing.T, kind, by string, size int64) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1})
	var b *filterBase
	var add func(i int) error
	var has func(i int) bool
	switch kind {
	case "counting":
		f, err := s.CreateCounting("bad", BloomConfig{Capacity: 100_000})
		must(t, err)
		b, add, has = f.base(), func(i int) error { return f.Add(key(i)) }, func(i int) bool { return f.Has(key(i)) }
	case "cuckoo":
		f, err := s.CreateCuckoo("bad", CuckooConfig{Capacity: 100_000})
		must(t, err)
		b, add, has = f.base(), func(i int) error { return f.Add(key(i)) }, func(i int) bool { return f.Has(key(i)) }
	default:
		f, err := s.CreateBitmap("bad", 2_000_000)
		must(t, err)
		b = f.base()
		add = func(i int) error { return second(f.Set(uint64(i) * 997 % f.Bits())) }
		has = func(i int) bool { return f.Get(uint64(i) * 997 % f.Bits()) }
	}
	must(t, s.Checkpoint())
	for i := range 500 {
		must(t, add(i))
	}
	if b.ov.size.Load() == 0 {
		t.Fatal("nothing waits in the overlay")
	}
	path := b.path(0)
	must(t, os.Truncate(path, size))
	var err error
	if by == "checkpoint" {
		err = s.Checkpoint()
	} else {
		must(t, s.log.Sync()) // wakes the background apply
		deadline := time.Now().Add(10 * time.Second)
		for err = s.failed(); err == nil && time.Now().Before(deadline); err = s.failed() {
			time.Sleep(time.Millisecond)
		}
	}
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("applying the overlay to the truncated layer: %v, want ErrFailed and ErrCorrupt naming %s as truncated", err, path)
	}
	t.Logf("%s: %v", by, err)
	for i := range 1000 {
		if !has(1_000_000 + i) {
			t.Fatalf("after the fault, absent key %d answers absent, want \"maybe\" without a read", i)
		}
	}
	if err := add(7); !errors.Is(err, ErrFailed) {
		t.Fatalf("a change after the fault: %v, want ErrFailed", err)
	}
	closeFailedReopenCheck(t, s, dir)
}

// TestReplayOfATruncatedLayerFailsOpen: Open writes into the filters'
// mappings (the stamps, the cuckoo move counters in the header page, the
// replay of the WAL); a layer file cut under it after Open checked it
// (replayHook) makes Open fail with an error naming the file, where the
// fault (SIGBUS) killed the process before, and leave the store to the
// next Open, which finds the file short, opens that filter broken and
// replays the other one's records.
func TestReplayOfATruncatedLayerFailsOpen(t *testing.T) {
	for _, kind := range []string{"bloom", "cuckoo"} {
		for _, cut := range truncations {
			t.Run(kind+"/"+cut.name, func(t *testing.T) {
				replayOfATruncatedLayer(t, kind, cut.size)
			})
		}
	}
}

// replayOfATruncatedLayer is a case of
// TestReplayOfATruncatedLayerFailsOpen: the filter "bad" of kind cut to
// size bytes, the other kind's filter "good".
func replayOfATruncatedLayer(t *testing.T, kind string, size int64) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	var badBase *filterBase
	var goodHas func(k []byte) bool
	bl, err := s.CreateBloom(map[bool]string{true: "bad", false: "good"}[kind == "bloom"], BloomConfig{Capacity: 100_000})
	must(t, err)
	ck, err := s.CreateCuckoo(map[bool]string{true: "bad", false: "good"}[kind == "cuckoo"], CuckooConfig{Capacity: 100_000})
	must(t, err)
	if kind == "bloom" {
		badBase = bl.base()
		goodHas = func(k []byte) bool {
			c, err := s.Cuckoo("good")
			must(t, err)
			return c.Has(k)
		}
	} else {
		badBase = ck.base()
		goodHas = func(k []byte) bool {
			b, err := s.Bloom("good")
			must(t, err)
			return b.Has(k)
		}
	}
	must(t, s.Checkpoint())
	bt := s.NewBatch() // one record for the replay, one sync
	for i := range 2000 {
		bt.BloomAdd(bl, key(i))
		bt.CuckooAdd(ck, key(i))
	}
	must(t, second(bt.Commit()))
	path := badBase.path(0)
	s.abandonForTest() // a crash: the records after the checkpoint wait for the replay

	replayHook = func(s *Store) {
		if s.dir == dir {
			must(t, os.Truncate(path, size))
		}
	}
	_, err = Open(dir, nil)
	replayHook = nil
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("Open whose replay faults: %v, want ErrCorrupt naming %s as truncated", err, path)
	}
	t.Logf("Open: %v", err)

	s = mustOpen(t, dir, nil)
	defer s.Close()
	rep, err := s.Check()
	if !errors.Is(err, ErrCorrupt) || rep == nil || len(rep.Problems) != 1 || !strings.Contains(err.Error(), path) {
		t.Fatalf("reopened, Check: %v (%+v), want one problem naming %s", err, rep, path)
	}
	for i := range 2000 {
		if !goodHas(key(i)) {
			t.Fatalf("reopened, key %d of the other filter absent", i)
		}
	}
}

// TestCheckpointStampOfATruncatedVersion2Layer: a checkpoint of a changed
// version-2 layer (no checksum pages to read first) writes its stamp into
// the header page; over a file cut to nothing that write faults, and the
// checkpoint fails the store naming the file, where the fault killed the
// process before (an adversarial review's finding).
func TestCheckpointStampOfATruncatedVersion2Layer(t *testing.T) {
	dir := v2StoreCopy(t)
	s := mustOpen(t, dir, nil)
	must(t, s.Checkpoint())
	f := mustBloom(t, s, "bloom")
	must(t, second(f.Add([]byte("one more"))))
	path := f.base().path(0)
	must(t, os.Truncate(path, 0))
	err := s.Checkpoint()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("a checkpoint of a truncated version-2 layer: %v, want ErrFailed and ErrCorrupt naming %s as truncated", err, path)
	}
	t.Logf("checkpoint: %v", err)
	if err := s.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close of the failed store: %v, want its failure", err)
	}
}
