package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// extRunOps adds the ops of record i (1-based) of the run tests to bt, on
// a store's filters b, c and m: most records add key i to b and c and set
// bit i of m; some delete, re-add or clear what an earlier record of the
// same run did, so that a run's planning must see its earlier records.
func extRunOps(bt *Batch, i int, b *Bloom, c *Cuckoo, m *Bitmap) {
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%d", i) }
	switch i {
	case 9:
		bt.CuckooDelete(c, key(2))
	case 12:
		bt.BloomAdd(b, key(4))
		bt.CuckooAdd(c, key(4))
	case 14:
		bt.BitmapClear(m, 3)
		bt.CuckooDelete(c, key(99)) // never added: false
	default:
		bt.BloomAdd(b, key(i))
		bt.CuckooAdd(c, key(i))
		bt.BitmapSet(m, uint64(i))
	}
}

// waitQueued waits until n ApplyExternal calls of s are queued.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.ext.mu.Lock()
		q := len(s.ext.queued)
		s.ext.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d applies queued after 10 s, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestExternalCombinesRuns: records whose applies wait behind a lower seq
// are applied by the call of that seq, in one run, and each call gets the
// answers of its own ops, as applying the records one after another
// (Batch.Commit on a reference store) gives them; the store then holds
// what the reference holds, after a reopen too.
func TestExternalCombinesRuns(t *testing.T) {
	const n = 17
	dir := t.TempDir()
	s, b, c, m := openExternal(t, dir)
	ref, rb, rc, rm := openExternal(t, t.TempDir())
	defer ref.Close()
	recs := make([][]byte, n+1)
	want := make([][]bool, n+1)
	for i := 1; i <= n; i++ {
		bt := s.NewBatch()
		extRunOps(bt, i, b, c, m)
		rec, err := bt.Encode()
		must(t, err)
		recs[i] = rec
		rt := ref.NewBatch()
		extRunOps(rt, i, rb, rc, rm)
		if want[i], err = rt.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	got := make([][]bool, n+1)
	errs := make(chan error, n)
	for i := 2; i <= n; i++ {
		go func() {
			var err error
			got[i], err = s.ApplyExternal(recs[i])
			errs <- err
		}()
	}
	waitQueued(t, s, n-1)
	runs := s.ext.runs
	var err error
	got[1], err = s.ApplyExternal(recs[1])
	must(t, err)
	for range n - 1 {
		select {
		case err := <-errs:
			must(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("a queued apply did not return")
		}
	}
	if r := s.ext.runs - runs; r != 1 {
		t.Errorf("%d records applied in %d runs, want 1", n, r)
	}
	for i := 1; i <= n; i++ {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("record %d answered %v, applied one by one %v", i, got[i], want[i])
		}
	}
	must(t, s.Close())
	s, b, c, m = openExternal(t, dir)
	defer s.Close()
	if d := s.ExternalDurable(); d != n {
		t.Errorf("after reopen ExternalDurable = %d, want %d", d, n)
	}
	for i := 0; i <= n+1; i++ {
		k := fmt.Appendf(nil, "key-%d", i)
		if b.Has(k) != rb.Has(k) || c.Has(k) != rc.Has(k) || m.Get(uint64(i)) != rm.Get(uint64(i)) {
			t.Errorf("key %d: bloom %v cuckoo %v bit %v, reference %v %v %v",
				i, b.Has(k), c.Has(k), m.Get(uint64(i)), rb.Has(k), rc.Has(k), rm.Get(uint64(i)))
		}
	}
}

// TestExternalRunFailure: when the store fails while a combiner applies a
// run, every call of the run returns the failure (none waits forever: a
// call in a run waits for its combiner alone), and none of it applies.
func TestExternalRunFailure(t *testing.T) {
	s, err := Open(t.TempDir(), WithSeams(Options{Sync: SyncInterval, CheckpointEvery: -1}, mmapbits.NewSim(), wal.NewMemFS()))
	must(t, err)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	const n = 5
	var recs [][]byte
	for i := range n {
		bt := s.NewBatch()
		bt.BloomAdd(b, fmt.Appendf(nil, "key-%d", i))
		rec, err := bt.Encode()
		must(t, err)
		recs = append(recs, rec)
	}
	errs := make(chan error, n-1)
	for _, rec := range recs[1:] {
		go func() { _, err := s.ApplyExternal(rec); errs <- err }()
	}
	waitQueued(t, s, n-1)
	errDisk := errors.New("injected failure")
	s.ext.mu.Lock()
	s.ext.beforeRun = func() { s.fail(errDisk) }
	s.ext.mu.Unlock()
	if _, err := s.ApplyExternal(recs[0]); !errors.Is(err, errDisk) {
		t.Fatalf("the combiner's apply returned %v, want the failure", err)
	}
	for range n - 1 {
		select {
		case err := <-errs:
			if !errors.Is(err, errDisk) {
				t.Errorf("an apply of the failed run returned %v, want the failure", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an apply of a failed run still waits")
		}
	}
	for i := range n {
		if b.Has(fmt.Appendf(nil, "key-%d", i)) {
			t.Errorf("key-%d applied in a failed run", i)
		}
	}
}
