package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/wal"
)

// manyCall is one many-key call of the model test: what it runs on the
// filters, and the single calls it stands for.
type manyCall struct {
	name   string
	many   func(f batchFilters) ([]bool, error)
	single func(f batchFilters, i int) (bool, error)
	n      int
}

func randomManyCall(rng *rand.Rand) manyCall {
	n := 1 + rng.IntN(20)
	keys := make([][]byte, n)
	offs := make([]uint64, n)
	for i := range n {
		keys[i] = []byte(fmt.Sprintf("k%d", rng.IntN(150)))
		offs[i] = rng.Uint64N(300)
	}
	count := func(n int, err error) ([]bool, error) {
		if n == 0 && err != nil {
			return nil, err
		}
		return slices.Repeat([]bool{true}, n), err
	}
	calls := []manyCall{
		{"bloom AddMany", func(f batchFilters) ([]bool, error) { return f.b.AddMany(keys) },
			func(f batchFilters, i int) (bool, error) { return f.b.Add(keys[i]) }, n},
		{"cuckoo AddMany", func(f batchFilters) ([]bool, error) { return count(f.c.AddMany(keys)) },
			func(f batchFilters, i int) (bool, error) { return true, f.c.Add(keys[i]) }, n},
		{"cuckoo DeleteMany", func(f batchFilters) ([]bool, error) { return f.c.DeleteMany(keys) },
			func(f batchFilters, i int) (bool, error) { return f.c.Delete(keys[i]) }, n},
		{"counting AddMany", func(f batchFilters) ([]bool, error) { return count(f.n.AddMany(keys)) },
			func(f batchFilters, i int) (bool, error) { return true, f.n.Add(keys[i]) }, n},
		{"counting DeleteMany", func(f batchFilters) ([]bool, error) { return f.n.DeleteMany(keys) },
			func(f batchFilters, i int) (bool, error) { return f.n.Delete(keys[i]) }, n},
		{"bitmap SetMany", func(f batchFilters) ([]bool, error) { return f.m.SetMany(offs) },
			func(f batchFilters, i int) (bool, error) { return f.m.Set(offs[i]) }, n},
		{"bitmap ClearMany", func(f batchFilters) ([]bool, error) { return f.m.ClearMany(offs) },
			func(f batchFilters, i int) (bool, error) { return f.m.Clear(offs[i]) }, n},
	}
	// Adds twice as often as deletes, so that the cuckoo chain grows.
	return calls[[]int{0, 1, 1, 2, 3, 3, 4, 5, 5, 6}[rng.IntN(10)]]
}

// TestManyMatchesSingleOps: random many-key calls of every kind in one
// store, and the single calls they stand for in another, give the same
// answers (up to and including the first refused key, where both stop),
// each many-key call logs at most one WAL record, and both stores leave
// and recover the same filters.
func TestManyMatchesSingleOps(t *testing.T) {
	seed := testseed.Seed(t)
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		rng := rand.New(rand.NewPCG(seed, uint64(mode)))
		wa, wb := newSimWorld(t, mode), newSimWorld(t, mode)
		sa, err := wa.open(t)
		must(t, err)
		sb, err := wb.open(t)
		must(t, err)
		fa, fb := createBatchFilters(t, sa), createBatchFilters(t, sb)
		refused := 0
		for range 60 {
			c := randomManyCall(rng)
			lsn := sa.log.LastLSN()
			got, err := c.many(fa)
			var want []bool
			var wantErr error
			for i := range c.n {
				ok, err := c.single(fb, i)
				if err != nil {
					wantErr = err
					break
				}
				want = append(want, ok)
			}
			if wantErr != nil {
				refused++
			}
			if (err == nil) != (wantErr == nil) || errors.Is(err, ErrAmbiguous) != errors.Is(wantErr, ErrAmbiguous) ||
				errors.Is(err, ErrFull) != errors.Is(wantErr, ErrFull) || !slices.Equal(got, want) {
				t.Fatalf("seed %d: %s = %v, %v; the single calls %v, %v", seed, c.name, got, err, want, wantErr)
			}
			if n := sa.log.LastLSN() - lsn; n > 1 {
				t.Fatalf("seed %d: %s logged %d records, want at most 1", seed, c.name, n)
			}
		}
		if len(*fa.c.layers.Load()) < 2 {
			t.Fatalf("seed %d: the cuckoo chain never grew: the test misses growth within a call", seed)
		}
		t.Logf("%v: %d calls stopped at a refused key", mode, refused)
		must(t, sa.log.Sync())
		must(t, sb.log.Sync())
		if mode == SyncAlways {
			if d := imageOf(sa).diff(imageOf(sb)); d != "" {
				t.Fatalf("seed %d: many-key and single calls left different filters: %s", seed, d)
			}
		}
		wa.kill(sa)
		wb.kill(sb)
		if sa, err = wa.open(t); err != nil {
			t.Fatalf("seed %d: recovering the many-key calls: %v", seed, err)
		}
		if sb, err = wb.open(t); err != nil {
			t.Fatal(err)
		}
		if d := imageOf(sa).diff(imageOf(sb)); d != "" {
			t.Fatalf("seed %d: after recovery, many-key and single calls differ: %s", seed, d)
		}
		must(t, sa.Close())
		must(t, sb.Close())
	}
}

// TestAddManyStopsAtFull: an add that cannot apply stops AddMany, which
// answers for the keys before it; those are durable (they survive a kill)
// and the keys after it are not added.
func TestAddManyStopsAtFull(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 3, NonScaling: true})
	must(t, err)
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("a"), []byte("c"), []byte("d"), []byte("e")}
	got, err := b.AddMany(keys)
	if !errors.Is(err, ErrFull) || !slices.Equal(got, []bool{true, true, false, true}) {
		t.Fatalf("bloom AddMany = %v, %v; want [true true false true], ErrFull", got, err)
	}
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 8, BucketSize: 2, NonScaling: true})
	must(t, err)
	lsn := s.log.LastLSN()
	hot := slices.Repeat([][]byte{[]byte("hot")}, 6) // two buckets of two slots
	if n, err := c.AddMany(append(hot, []byte("cold"))); n != 4 || !errors.Is(err, ErrFull) {
		t.Fatalf("cuckoo AddMany = %d, %v; want 4, ErrFull", n, err)
	}
	if got := s.log.LastLSN() - lsn; got != 1 {
		t.Fatalf("cuckoo AddMany logged %d records, want 1", got)
	}
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 2, NonScaling: true})
	must(t, err)
	if k, err := n.AddMany(keys[:4]); k != 2 || !errors.Is(err, ErrFull) {
		t.Fatalf("counting AddMany = %d, %v; want 2, ErrFull", k, err)
	}
	w.kill(s)
	s, err = w.open(t)
	must(t, err)
	defer s.Close()
	b, err = s.Bloom("b")
	must(t, err)
	if got := b.HasMany(keys); !slices.Equal(got, []bool{true, true, true, true, false, false}) {
		t.Fatalf("after a kill, bloom HasMany = %v", got)
	}
	c, err = s.Cuckoo("c")
	must(t, err)
	if got := c.Count([]byte("hot")); got != 4 || c.Has([]byte("cold")) {
		t.Fatalf("after a kill, cuckoo Count(hot) = %d, Has(cold) = %v", got, c.Has([]byte("cold")))
	}
	n, err = s.Counting("n")
	must(t, err)
	if got := n.HasMany(keys[:4]); !slices.Equal(got, []bool{true, true, true, false}) || n.Items() != 2 {
		t.Fatalf("after a kill, counting HasMany = %v, items %d", got, n.Items())
	}
}

// TestDeleteManyStopsAtAmbiguous: a cuckoo key matching in two layers
// stops DeleteMany with ErrAmbiguous after the deletes before it, which
// are logged in one record; it and the keys after it stay.
func TestDeleteManyStopsAtAmbiguous(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	c := ambiguousCuckoo(t, s)
	lsn := s.log.LastLSN()
	got, err := c.DeleteMany([][]byte{key(1), []byte("never"), []byte("twice"), key(2)})
	if !errors.Is(err, ErrAmbiguous) || !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("DeleteMany = %v, %v; want [true false], ErrAmbiguous", got, err)
	}
	if n := s.log.LastLSN() - lsn; n != 1 {
		t.Fatalf("DeleteMany logged %d records, want 1", n)
	}
	if c.Count([]byte("twice")) != 2 || !c.Has(key(2)) {
		t.Fatalf("after DeleteMany: Count(twice) = %d, Has(key 2) = %v", c.Count([]byte("twice")), c.Has(key(2)))
	}
}

// ambiguousCuckoo creates the cuckoo filter "c" of two layers, with the
// key "twice" added once before the second layer and once after: its
// fingerprint matches in both, so a delete of it is ambiguous. Keys
// key(0), key(1), ... fill the first layer.
func ambiguousCuckoo(t *testing.T, s *Store) *Cuckoo {
	t.Helper()
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 64, Expansion: 2})
	must(t, err)
	must(t, c.Add([]byte("twice")))
	for i := 0; mustInfo(t, c).Layers < 2; i++ {
		must(t, c.Add(key(i)))
	}
	must(t, c.Add([]byte("twice")))
	return c
}

// TestBitmapMany: SetMany, ClearMany and GetMany answer as the single
// calls; an offset out of range stops the call after the offsets before it.
func TestBitmapMany(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	m, err := s.CreateBitmap("m", 100)
	must(t, err)
	lsn := s.log.LastLSN()
	got, err := m.SetMany([]uint64{1, 64, 1, 99})
	if err != nil || !slices.Equal(got, []bool{true, true, false, true}) {
		t.Fatalf("SetMany = %v, %v", got, err)
	}
	if n := s.log.LastLSN() - lsn; n != 1 {
		t.Fatalf("SetMany logged %d records, want 1", n)
	}
	got, err = m.ClearMany([]uint64{1, 2, 100, 64})
	if !errors.Is(err, ErrInvalid) || !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("ClearMany past the end = %v, %v; want [true false], ErrInvalid", got, err)
	}
	if got := m.GetMany([]uint64{1, 64, 99, 100}); !slices.Equal(got, []bool{false, true, true, false}) || m.Count() != 2 {
		t.Fatalf("GetMany = %v, count %d; want [false true true false], 2", got, m.Count())
	}
}

// TestManyFailedStoreAcknowledgesNothing: a many-key call whose record
// cannot be made durable fails the store and returns no results.
func TestManyFailedStoreAcknowledgesNothing(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	fail := &failSwitch{err: syscall.EIO}
	w.fs.SetInjector(fail.wal(wal.OpSync))
	s, err := w.open(t)
	must(t, err)
	defer s.Close()
	f := createBatchFilters(t, s)
	must(t, f.c.Add([]byte("x")))
	fail.on.Store(true)
	// The sync of SetMany's record fails.
	if res, err := f.m.SetMany([]uint64{1, 2}); res != nil || !errors.Is(err, ErrFailed) {
		t.Fatalf("SetMany whose sync fails = %v, %v; want nil, ErrFailed", res, err)
	}
	fail.on.Store(false)
	for name, call := range map[string]func() ([]bool, error){
		"cuckoo DeleteMany": func() ([]bool, error) { return f.c.DeleteMany([][]byte{[]byte("x")}) },
		"bloom AddMany":     func() ([]bool, error) { return f.b.AddMany([][]byte{[]byte("x")}) },
		"bitmap ClearMany":  func() ([]bool, error) { return f.m.ClearMany([]uint64{1}) },
	} {
		if res, err := call(); res != nil || !errors.Is(err, ErrFailed) {
			t.Fatalf("%s on a failed store = %v, %v; want nil, ErrFailed", name, res, err)
		}
	}
	if n, err := f.n.AddMany([][]byte{[]byte("x")}); n != 0 || !errors.Is(err, ErrFailed) {
		t.Fatalf("counting AddMany on a failed store = %d, %v", n, err)
	}
}

// TestPartRecordsSplitsAtTheLimit: parts whose batch record would pass
// wal.MaxRecordSize go into several records, each within it, in order; a
// record of one part is that part's own record.
func TestPartRecordsSplitsAtTheLimit(t *testing.T) {
	ws := make([]format.WordWrite, 1<<16) // the most a words record holds: 1 MiB
	parts := make([]format.WALRecord, 20)
	for i := range parts {
		parts[i] = format.WALRecord{Op: format.WALOpWords, FilterID: 7, Delta: 1, Writes: ws}
	}
	parts[19] = format.WALRecord{Op: format.WALOpHash, FilterID: 7, Hash: 19}
	payloads, recOf := partRecords(parts)
	if len(payloads) != 2 || recOf[0] != 0 || recOf[len(recOf)-1] != 1 || !slices.IsSorted(recOf) {
		t.Fatalf("%d payloads, recOf from %d to %d; want 2, from 0 to 1, in order", len(payloads), recOf[0], recOf[len(recOf)-1])
	}
	var got []format.WALRecord
	for i, p := range payloads {
		if len(p) > wal.MaxRecordSize {
			t.Fatalf("payload %d is %d bytes, above %d", i, len(p), wal.MaxRecordSize)
		}
		r, err := format.DecodeWALRecord(p)
		must(t, err)
		if r.Op != format.WALOpBatch {
			t.Fatalf("payload %d is op %d, want a batch", i, r.Op)
		}
		for j := range r.Parts {
			if want := len(got) + j; recOf[want] != i {
				t.Fatalf("part %d is in payload %d, recOf says %d", want, i, recOf[want])
			}
		}
		got = append(got, r.Parts...)
	}
	if !slices.EqualFunc(got, parts, func(a, b format.WALRecord) bool {
		return a.Op == b.Op && a.Hash == b.Hash && len(a.Writes) == len(b.Writes)
	}) {
		t.Fatalf("decoded %d parts, want the %d in order", len(got), len(parts))
	}
	one, recOf := partRecords(parts[19:])
	if len(one) != 1 || !slices.Equal(recOf, []int{0}) || !slices.Equal(one[0], format.AppendWALRecord(nil, parts[19])) {
		t.Fatalf("one part: %d payloads, recOf %v; want its own record", len(one), recOf)
	}
}
