package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
)

// batchFilters are the filters of the batch tests: every kind, chains
// small enough to grow.
type batchFilters struct {
	b *Bloom
	c *Cuckoo
	n *Counting
	m *Bitmap
}

func createBatchFilters(t *testing.T, s *Store) batchFilters {
	t.Helper()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 10, ErrorRate: 0.01})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 8, BucketSize: 2, FingerprintBits: 8, Expansion: 2, MaxIterations: 50})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 200})
	must(t, err)
	m, err := s.CreateBitmap("m", 300)
	must(t, err)
	return batchFilters{b, c, n, m}
}

// batchTestOp is one op of the model test, applied as a batch op or as
// the single call.
type batchTestOp struct {
	kind batchKind
	key  []byte
	off  uint64
}

func (op batchTestOp) String() string {
	what, _ := op.kind.describe()
	if op.kind >= batchBitmapSet {
		return fmt.Sprintf("%s %d", what, op.off)
	}
	return fmt.Sprintf("%s %s", what, op.key)
}

func (op batchTestOp) addTo(bt *Batch, f batchFilters) {
	switch op.kind {
	case batchBloomAdd:
		bt.BloomAdd(f.b, op.key)
	case batchCuckooAdd:
		bt.CuckooAdd(f.c, op.key)
	case batchCuckooDelete:
		bt.CuckooDelete(f.c, op.key)
	case batchCountingAdd:
		bt.CountingAdd(f.n, op.key)
	case batchCountingDelete:
		bt.CountingDelete(f.n, op.key)
	case batchBitmapSet:
		bt.BitmapSet(f.m, op.off)
	case batchBitmapClear:
		bt.BitmapClear(f.m, op.off)
	}
}

func (op batchTestOp) single(f batchFilters) (bool, error) {
	switch op.kind {
	case batchBloomAdd:
		return f.b.Add(op.key)
	case batchCuckooAdd:
		return true, f.c.Add(op.key)
	case batchCuckooDelete:
		return f.c.Delete(op.key)
	case batchCountingAdd:
		return true, f.n.Add(op.key)
	case batchCountingDelete:
		return f.n.Delete(op.key)
	case batchBitmapSet:
		return f.m.Set(op.off)
	}
	return f.m.Clear(op.off)
}

func randomBatchOp(rng *rand.Rand) batchTestOp {
	op := batchTestOp{kind: batchKind(rng.IntN(int(batchBitmapClear) + 1))}
	op.key = []byte(fmt.Sprintf("k%d", rng.IntN(150)))
	op.off = rng.Uint64N(300)
	return op
}

// TestBatchMatchesSingleOps: random ops, committed in random batches in
// one store and as single calls in another, get the same answers, leave
// the same words and counts, and recover to them after the writers die
// (replaying batch records on one side, single records on the other).
func TestBatchMatchesSingleOps(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			seed := testseed.Seed(t)
			grew := 0
			for i := range uint64(8) {
				if batchModelSequence(t, mode, seed+i) {
					grew++
				}
			}
			if grew == 0 {
				t.Fatalf("no sequence grew both chains: the test misses growth within a batch")
			}
		})
	}
}

// batchModelSequence runs one sequence and reports whether both chains
// grew a layer.
func batchModelSequence(t *testing.T, mode SyncMode, seed uint64) (grew bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	wa, wb := newSimWorld(t, mode), newSimWorld(t, mode)
	sa, err := wa.open(t)
	must(t, err)
	sb, err := wb.open(t)
	must(t, err)
	fa, fb := createBatchFilters(t, sa), createBatchFilters(t, sb)
	for range 30 {
		ops := make([]batchTestOp, 1+rng.IntN(12))
		bt := sa.NewBatch()
		for i := range ops {
			ops[i] = randomBatchOp(rng)
			ops[i].addTo(bt, fa)
		}
		got, err := bt.Commit()
		if errors.Is(err, ErrAmbiguous) && strings.Contains(err.Error(), "(cuckoo delete from ") ||
			errors.Is(err, ErrFull) && strings.Contains(err.Error(), "(cuckoo add to ") {
			// A cuckoo delete of a key in two layers, or a cuckoo add
			// the chain refuses (a key's two buckets full in a young
			// layer): the batch failed whole. The other store commits
			// the same batch, which must fail the same way: a layer an
			// earlier op of it grew stays in both (Commit's one
			// exception), so the chains stay alike.
			bb := sb.NewBatch()
			for _, op := range ops {
				op.addTo(bb, fb)
			}
			res, errB := bb.Commit()
			if errB == nil || errB.Error() != err.Error() || res != nil {
				t.Fatalf("seed %d: batch %v failed with %v in one store and with %v, %v in the other", seed, ops, err, res, errB)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: batch %v: %v", seed, ops, err)
		}
		want := make([]bool, len(ops))
		for i, op := range ops {
			if want[i], err = op.single(fb); err != nil {
				t.Fatalf("seed %d: single %v: %v", seed, op, err)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: batch %v answered %v, the single calls %v", seed, ops, got, want)
		}
	}
	must(t, sa.log.Sync())
	must(t, sb.log.Sync())
	compare := func(when string) {
		t.Helper()
		for i := range 150 {
			k := []byte(fmt.Sprintf("k%d", i))
			if fa.b.Has(k) != fb.b.Has(k) || fa.c.Count(k) != fb.c.Count(k) || fa.n.Count(k) != fb.n.Count(k) {
				t.Fatalf("seed %d: %s: lookups of %s differ", seed, when, k)
			}
		}
		for off := range uint64(300) {
			if fa.m.Get(off) != fb.m.Get(off) {
				t.Fatalf("seed %d: %s: bit %d differs", seed, when, off)
			}
		}
		if fa.b.Card() != fb.b.Card() || fa.c.Items() != fb.c.Items() || fa.n.Items() != fb.n.Items() || fa.m.Count() != fb.m.Count() {
			t.Fatalf("seed %d: %s: counts differ", seed, when)
		}
	}
	compare("after the ops")
	grew = len(*fa.b.layers.Load()) > 1 && len(*fa.c.layers.Load()) > 1
	if mode == SyncAlways {
		if d := imageOf(sa).diff(imageOf(sb)); d != "" {
			t.Fatalf("seed %d: batches and single calls left different filters: %s", seed, d)
		}
	}
	// Recovery replays the batch records on one side, the single records
	// on the other.
	wa.kill(sa)
	wb.kill(sb)
	if sa, err = wa.open(t); err != nil {
		t.Fatalf("seed %d: recovering the batches: %v", seed, err)
	}
	defer sa.Close()
	if sb, err = wb.open(t); err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	fa, fb = reopenBatchFilters(t, sa), reopenBatchFilters(t, sb)
	compare("after recovery")
	if d := imageOf(sa).diff(imageOf(sb)); d != "" {
		t.Fatalf("seed %d: after recovery, batches and single calls differ: %s", seed, d)
	}
	return grew
}

func reopenBatchFilters(t *testing.T, s *Store) batchFilters {
	t.Helper()
	var f batchFilters
	var err error
	f.b, err = s.Bloom("b")
	must(t, err)
	f.c, err = s.Cuckoo("c")
	must(t, err)
	f.n, err = s.Counting("n")
	must(t, err)
	f.m, err = s.Bitmap("m")
	must(t, err)
	return f
}

// TestBatchSeesItsOwnOps: ops on one filter see the batch's earlier ops,
// as the single calls would.
func TestBatchSeesItsOwnOps(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	defer s.Close()
	f := createBatchFilters(t, s)
	bt := s.NewBatch()
	bt.BloomAdd(f.b, []byte("x"))
	bt.BloomAdd(f.b, []byte("x")) // no longer new
	bt.BitmapSet(f.m, 7)
	bt.BitmapSet(f.m, 7) // already set
	bt.BitmapClear(f.m, 7)
	bt.CountingDelete(f.n, []byte("y")) // nothing to delete yet
	bt.CountingAdd(f.n, []byte("y"))
	bt.CountingDelete(f.n, []byte("y"))
	bt.CuckooAdd(f.c, []byte("z"))
	bt.CuckooDelete(f.c, []byte("z"))
	bt.CuckooDelete(f.c, []byte("z"))
	got, err := bt.Commit()
	must(t, err)
	want := []bool{true, false, true, false, true, false, true, true, true, true, false}
	if !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	if f.b.Card() != 1 || f.m.Count() != 0 || f.n.Items() != 0 || f.c.Items() != 0 || f.m.Get(7) {
		t.Fatalf("after the batch: card %d, bits %d, counting %d, cuckoo %d", f.b.Card(), f.m.Count(), f.n.Items(), f.c.Items())
	}
	if _, err := bt.Commit(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second Commit: %v, want ErrInvalid", err)
	}
	if res, err := s.NewBatch().Commit(); res != nil || err != nil {
		t.Fatalf("empty batch: %v, %v", res, err)
	}
}

// TestBatchFailsWhole: a batch with an op that cannot apply returns an
// error naming that op and wrapping its cause, and changes nothing: no
// word, no count, no WAL record.
func TestBatchFailsWhole(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	defer s.Close()
	f := createBatchFilters(t, s)
	tiny, err := s.CreateCuckoo("tiny", CuckooConfig{Capacity: 8, BucketSize: 2, NonScaling: true})
	must(t, err)
	// amb holds "twice" in two layers: its delete is ambiguous.
	amb, err := s.CreateCuckoo("amb", CuckooConfig{Capacity: 64, Expansion: 2})
	must(t, err)
	must(t, amb.Add([]byte("twice")))
	for i := 0; mustInfo(t, amb).Layers < 2; i++ {
		must(t, amb.Add(key(i)))
	}
	must(t, amb.Add([]byte("twice")))
	full, err := s.CreateBloom("full", BloomConfig{Capacity: 2, NonScaling: true})
	must(t, err)
	gone, err := s.CreateBitmap("gone", 64)
	must(t, err)
	must(t, s.Drop("gone"))
	other, err := newSimWorld(t, SyncAlways).open(t)
	must(t, err)
	defer other.Close()
	foreign, err := other.CreateCounting("n", BloomConfig{})
	must(t, err)
	// Some state to keep.
	must(t, second(f.b.Add([]byte("old"))))
	must(t, f.c.Add([]byte("old")))

	good := func(bt *Batch) {
		bt.BloomAdd(f.b, []byte("new"))
		bt.CuckooAdd(f.c, []byte("new"))
		bt.CuckooDelete(f.c, []byte("old"))
		bt.CountingAdd(f.n, []byte("new"))
		bt.BitmapSet(f.m, 3)
	}
	cases := []struct {
		name  string
		build func(bt *Batch)
		op    int
		want  error
	}{
		{"cuckoo full within the batch", func(bt *Batch) {
			good(bt)
			for range 5 { // two buckets of two slots: the fifth copy fails
				bt.CuckooAdd(tiny, []byte("hot"))
			}
		}, 9, ErrFull},
		{"bloom full within the batch", func(bt *Batch) {
			good(bt)
			bt.BloomAdd(full, []byte("a"))
			bt.BloomAdd(full, []byte("b"))
			bt.BloomAdd(full, []byte("c"))
		}, 7, ErrFull},
		{"ambiguous cuckoo delete", func(bt *Batch) {
			good(bt)
			bt.CuckooDelete(amb, key(1))
			bt.CuckooDelete(amb, []byte("twice"))
			bt.CuckooAdd(amb, []byte("after"))
		}, 6, ErrAmbiguous},
		{"dropped filter", func(bt *Batch) { good(bt); bt.BitmapSet(gone, 1) }, 5, ErrClosed},
		{"another store's handle", func(bt *Batch) { good(bt); bt.CountingAdd(foreign, []byte("x")) }, 5, ErrInvalid},
		{"nil handle", func(bt *Batch) { good(bt); bt.CuckooAdd(nil, []byte("x")) }, 5, ErrInvalid},
		{"zero handle", func(bt *Batch) { bt.BloomAdd(&Bloom{}, []byte("x")); good(bt) }, 0, ErrInvalid},
		{"offset out of range", func(bt *Batch) { good(bt); bt.BitmapClear(f.m, 300) }, 5, ErrInvalid},
	}
	for _, tc := range cases {
		before, lsn := imageOf(s), s.log.LastLSN()
		bt := s.NewBatch()
		tc.build(bt)
		res, err := bt.Commit()
		if !errors.Is(err, tc.want) || res != nil || !strings.Contains(err.Error(), fmt.Sprintf("batch op %d ", tc.op)) {
			t.Errorf("%s: Commit = %v, %v; want an error naming op %d and wrapping %v", tc.name, res, err, tc.op, tc.want)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
		if d := imageOf(s).diff(before); d != "" {
			t.Errorf("%s: the failed batch changed the filters: %s", tc.name, d)
		}
		if got := s.log.LastLSN(); got != lsn {
			t.Errorf("%s: the failed batch logged LSNs %d..%d", tc.name, lsn+1, got)
		}
	}
	if f.b.Has([]byte("new")) && f.b.Card() != 1 {
		t.Fatalf("bloom card %d after failed batches", f.b.Card())
	}
	// The store goes on: the same good ops commit.
	bt := s.NewBatch()
	good(bt)
	res, err := bt.Commit()
	must(t, err)
	if !slices.Equal(res, []bool{true, true, true, true, true}) {
		t.Fatalf("good batch after failures: %v", res)
	}
	// A closed store refuses, naming op 0.
	must(t, other.Close())
	bt = other.NewBatch()
	bt.CountingAdd(foreign, []byte("x"))
	if _, err := bt.Commit(); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "batch op 0 (counting add to \"n\")") {
		t.Fatalf("batch on a closed store: %v", err)
	}
}

// TestBatchReadOnlyOverlay: a read-only open beside the writer reads a
// batch record of the WAL tail into its overlay: every change shows, and
// the counts include them.
func TestBatchReadOnlyOverlay(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1, Sync: SyncInterval})
	defer s.Close()
	f := createBatchFilters(t, s)
	must(t, s.Checkpoint())
	bt := s.NewBatch()
	for i := range 20 {
		k := key(i)
		bt.BloomAdd(f.b, k)
		bt.CuckooAdd(f.c, k)
		bt.CountingAdd(f.n, k)
		bt.BitmapSet(f.m, uint64(i))
	}
	bt.BitmapClear(f.m, 0)
	_, err := bt.Commit()
	must(t, err)
	must(t, s.log.Sync())
	ro := mustOpen(t, dir, &Options{ReadOnly: true})
	defer ro.Close()
	g := reopenBatchFilters(t, ro)
	for i := range 20 {
		k := key(i)
		if !g.b.Has(k) || !g.c.Has(k) || g.n.Count(k) == 0 || g.m.Get(uint64(i)) != (i != 0) {
			t.Fatalf("read-only store misses batch op on %s", k)
		}
	}
	if g.b.Card() != 20 || g.c.Items() != 20 || g.n.Items() != 20 || g.m.Count() != 19 {
		t.Fatalf("read-only counts %d %d %d %d, want 20 20 20 19", g.b.Card(), g.c.Items(), g.n.Items(), g.m.Count())
	}
}

// TestBatchRecordOutsideGeometry: a batch record whose part writes a word
// beyond its filter's geometry fails recovery and a read-only Open with
// ErrCorrupt naming the part, like a lone record, and changes nothing.
func TestBatchRecordOutsideGeometry(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	f := createBatchFilters(t, s)
	good := format.WALRecord{Op: format.WALOpHash, FilterID: f.b.b.id, Hash: 1}
	bad := format.WALRecord{Op: format.WALOpWords, FilterID: f.m.b.id, Delta: 1, Writes: []format.WordWrite{{Index: 1 << 20, Value: 1}}}
	_, err := s.log.Append(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpBatch, Parts: []format.WALRecord{good, bad}}))
	must(t, err)
	must(t, s.log.Sync())
	s.abandonForTest()
	for _, ro := range []bool{false, true} {
		_, err := Open(dir, &Options{ReadOnly: ro})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), ".log offset") {
			t.Fatalf("ReadOnly=%v: Open: %v, want ErrCorrupt naming the segment and offset", ro, err)
		}
		if !ro && !strings.Contains(err.Error(), "batch part 1") {
			t.Fatalf("Open: %v, want the part named", err)
		}
	}
}

// TestBatchConcurrent: batches over overlapping filters in different
// orders, single calls and checkpoints run at once without deadlock, and
// every acknowledged change is there.
func TestBatchConcurrent(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer s.Close()
	f := createBatchFilters(t, s)
	const workers, rounds = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				k := []byte(fmt.Sprintf("w%d-%d", w, r))
				bt := s.NewBatch()
				if (w+r)%2 == 0 {
					bt.BitmapSet(f.m, uint64(w*rounds+r))
					bt.CountingAdd(f.n, k)
					bt.BloomAdd(f.b, k)
				} else {
					bt.BloomAdd(f.b, k)
					bt.CountingAdd(f.n, k)
					bt.BitmapSet(f.m, uint64(w*rounds+r))
				}
				if _, err := bt.Commit(); err != nil {
					errs <- err
					return
				}
				if _, err := f.m.Clear(uint64(w*rounds + r)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			if err := s.Checkpoint(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range workers {
		for r := range rounds {
			k := []byte(fmt.Sprintf("w%d-%d", w, r))
			if !f.b.Has(k) || f.n.Count(k) == 0 || f.m.Get(uint64(w*rounds+r)) {
				t.Fatalf("batch %d of worker %d: missing, or its bit not cleared after", r, w)
			}
		}
	}
	if f.n.Items() != workers*rounds || f.m.Count() != 0 {
		t.Fatalf("counting items %d, bits %d", f.n.Items(), f.m.Count())
	}
}

// TestBatchManyFilters: a batch over more filters than Batch.filters
// searches linearly (it switches to a map) sends each op to its own
// filter, and ops repeated on a filter see the earlier ones.
func TestBatchManyFilters(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{Sync: SyncInterval})
	must(t, err)
	defer s.Close()
	const n = 40
	ms := make([]*Bitmap, n)
	for i := range ms {
		ms[i], err = s.CreateBitmap(fmt.Sprintf("m%02d", i), n)
		must(t, err)
	}
	bt := s.NewBatch()
	for range 2 {
		for i := n - 1; i >= 0; i-- { // not in id order
			bt.BitmapSet(ms[i], uint64(i))
		}
	}
	res, err := bt.Commit()
	must(t, err)
	for j, r := range res {
		if want := j < n; r != want {
			t.Errorf("op %d reported %v, want %v (the second set of a bit changes nothing)", j, r, want)
		}
	}
	for i, m := range ms {
		for off := range uint64(n) {
			if got, want := m.Get(off), off == uint64(i); got != want {
				t.Errorf("bitmap %d bit %d = %v, want %v", i, off, got, want)
			}
		}
	}
}
