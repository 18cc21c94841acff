package blackbox_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// BloomConfig doc: "A scalable chain's compound rate stayed under ErrorRate
// at every rate the review tried (0.0001 to 0.99)"; ErrorRate: "the whole
// chain's compound rate stays at or below it". Probe high rates well past
// capacity.
func TestScalableFPRHighRates(t *testing.T) {
	s, _ := newStore(t, nil)
	for _, rate := range []float64{0.2, 0.5, 0.9} {
		b, err := s.CreateBloom(sprintf("r%g", rate), store.BloomConfig{Capacity: 500, ErrorRate: rate})
		must(t, err)
		_, err = b.AddMany(keys("hr", 20000))
		must(t, err)
		fp := 0
		const probes = 40000
		for i := range probes {
			if b.Has(keyN("absent-hr", i)) {
				fp++
			}
		}
		in, _ := b.Info()
		m := float64(fp) / probes
		t.Logf("rate %g: %d layers, measured %.4f, estimated %.4f", rate, in.Layers, m, in.EstimatedFPR)
		if m > rate*1.05 {
			t.Errorf("rate %g: measured compound FPR %.4f above ErrorRate", rate, m)
		}
	}
}

// NonScaling Bloom at its capacity at 0.01: "0.997x at 0.01" measured; the
// estimate from Info should be close to the configured rate.
func TestNonScalingFPRAtCapacity(t *testing.T) {
	s, _ := newStore(t, nil)
	for _, kind := range []string{"bloom", "counting"} {
		var has func([]byte) bool
		var info func() (store.Info, error)
		ks := keys("cap", 20000)
		if kind == "bloom" {
			b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 20000, ErrorRate: 0.01, NonScaling: true})
			_, err := b.AddMany(ks)
			if err != nil && !errors.Is(err, store.ErrFull) {
				t.Fatal(err)
			}
			has, info = b.Has, b.Info
		} else {
			n, _ := s.CreateCounting("n", store.BloomConfig{Capacity: 20000, ErrorRate: 0.01, NonScaling: true})
			_, err := n.AddMany(ks)
			must(t, err)
			has, info = n.Has, n.Info
		}
		fp := 0
		const probes = 100000
		for i := range probes {
			if has(keyN("absent-cap", i)) {
				fp++
			}
		}
		in, _ := info()
		m := float64(fp) / probes
		t.Logf("%s: measured %.4f, estimated %.4f", kind, m, in.EstimatedFPR)
		if m > 0.0115 {
			t.Errorf("%s at capacity: measured FPR %.4f, configured 0.01", kind, m)
		}
	}
}

// Cuckoo ErrAmbiguous: "This happens for keys added again after an
// expansion": nothing is deleted and the key stays.
func TestCuckooAmbiguousDelete(t *testing.T) {
	s, _ := newStore(t, nil)
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 64})
	k := []byte("twice")
	must(t, c.Add(k))
	i := 0
	for {
		in, _ := c.Info()
		if in.Layers > 1 {
			break
		}
		must(t, c.Add(keyN("fill", i)))
		i++
	}
	// Fill the first layer's room so the second copy goes to the new layer.
	must(t, c.Add(k))
	_, err := c.Delete(k)
	if err == nil {
		t.Skip("second copy landed in the same layer")
	}
	wantIs(t, "Delete of a key in two layers", err, store.ErrAmbiguous)
	if c.Count(k) != 2 {
		t.Errorf("Count after refused delete %d, want 2", c.Count(k))
	}
	res, err := c.DeleteMany([][]byte{keyN("fill", 0), k, keyN("fill", 1)})
	wantIs(t, "DeleteMany with ambiguous key", err, store.ErrAmbiguous)
	if len(res) != 1 || !res[0] {
		t.Errorf("DeleteMany results %v, want [true]", res)
	}
	bt := s.NewBatch()
	bt.CuckooDelete(c, keyN("fill", 2))
	bt.CuckooDelete(c, k)
	_, err = bt.Commit()
	wantIs(t, "batch with ambiguous delete", err, store.ErrAmbiguous)
	if !c.Has(keyN("fill", 2)) {
		t.Error("failed batch deleted fill-2")
	}
}

// "All methods are safe for concurrent use": concurrent adds and deletes on
// every kind lose no acknowledged key, counts are exact.
func TestConcurrentChanges(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 512})
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 512})
	m, _ := s.CreateBitmap("m", 4096)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 250 {
				k := keyN(sprintf("g%d", g), i)
				if err := c.Add(k); err != nil {
					t.Error(err)
					return
				}
				if _, err := b.Add(k); err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Set(uint64(g*500 + i)); err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					if _, err := c.Delete(k); err != nil && !errors.Is(err, store.ErrAmbiguous) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	// A checkpoint and lookups meanwhile.
	wg.Go(func() {
		for range 5 {
			if err := s.Checkpoint(); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	for g := range 8 {
		for i := range 250 {
			k := keyN(sprintf("g%d", g), i)
			if !b.Has(k) || (i%2 == 1 && !c.Has(k)) || !m.Get(uint64(g*500+i)) {
				t.Fatalf("lost %s", k)
			}
		}
	}
	if m.Count() != 2000 {
		t.Errorf("bitmap Count %d, want 2000", m.Count())
	}
	t.Logf("cuckoo items %d (1000 + ambiguous deletes refused)", c.Items())
}

// CheckpointBytes: "how much the WAL grows past what the last checkpoint
// left of it before the next checkpoint starts". CheckpointEvery: "the period
// of background checkpoints".
func TestAutomaticCheckpoints(t *testing.T) {
	s, _ := newStore(t, &store.Options{CheckpointBytes: 64 << 10, CheckpointEvery: -1})
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 200000})
	lsn0 := s.Stats().CheckpointLSN
	for i := range 40 {
		_, err := b.AddMany(keys(sprintf("cb%d", i), 500))
		must(t, err)
	}
	deadline := time.Now().Add(time.Second)
	for s.Stats().CheckpointLSN == lsn0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	st := s.Stats()
	if st.CheckpointLSN == lsn0 {
		t.Errorf("no size-triggered checkpoint after %d WAL bytes (CheckpointBytes 64 KiB)", st.WAL.Bytes)
	}
	s2, _ := newStore(t, &store.Options{CheckpointEvery: 10 * time.Millisecond})
	b2, _ := s2.CreateBloom("b", store.BloomConfig{})
	_, err := b2.Add([]byte("x"))
	must(t, err)
	lsn0 = s2.Stats().CheckpointLSN
	deadline = time.Now().Add(time.Second)
	for s2.Stats().CheckpointLSN == lsn0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s2.Stats().CheckpointLSN == lsn0 {
		t.Error("no periodic checkpoint within 1s at CheckpointEvery 10ms")
	}
}

// ExternalDurable: "the highest external seq through which every applied
// external record is durable in the store (its filter files or its synced
// WAL)". After the background sync (SyncEvery) it should cover applied
// records without a Close.
func TestExternalDurableAdvancesWithSync(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval, SyncEvery: 5 * time.Millisecond, CheckpointEvery: -1})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	bt := s.NewBatch()
	bt.CuckooAdd(c, []byte("x"))
	rec, _ := bt.Encode()
	_, err := s.ApplyExternal(rec)
	must(t, err)
	deadline := time.Now().Add(time.Second)
	for s.ExternalDurable() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("ExternalDurable after 1 applied record and >=1 SyncEvery: %d", s.ExternalDurable())
	if s.ExternalDurable() < 1 {
		t.Log("ExternalDurable advances only at a checkpoint")
		must(t, s.Checkpoint())
		if s.ExternalDurable() < 1 {
			t.Error("ExternalDurable did not advance after a Checkpoint")
		}
	}
}

// Load waits: a Rename over another filter waits for a running Load; a
// Rename to a free name does not; lookups do not wait.
func TestRenameWaitsForLoad(t *testing.T) {
	s, _ := newStore(t, nil)
	_, _ = s.CreateBloom("users", store.BloomConfig{})
	next, _ := s.CreateBloom("next", store.BloomConfig{Capacity: 10000})
	gate := make(chan struct{})
	loadDone := make(chan error, 1)
	go func() {
		loadDone <- next.Load(func(yield func([]byte, error) bool) {
			for i := range 5000 {
				if i == 100 {
					<-gate
				}
				if !yield(keyN("ld", i), nil) {
					return
				}
			}
		})
	}()
	time.Sleep(20 * time.Millisecond)
	renamed := make(chan error, 1)
	go func() { renamed <- s.Rename("next", "users") }()
	select {
	case err := <-renamed:
		t.Fatalf("Rename over another returned during the Load: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	// Another filter's changes go on meanwhile.
	o, _ := s.CreateCuckoo("other", store.CuckooConfig{})
	must(t, o.Add([]byte("y")))
	close(gate)
	must(t, <-loadDone)
	must(t, <-renamed)
	u, _ := s.Bloom("users")
	if !u.Has(keyN("ld", 4999)) {
		t.Error("renamed filter misses loaded key")
	}
}

// WriteTo of a filter under Load waits for the Load (exports whole or not).
func TestWriteToWaitsForLoad(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateCuckoo("f", store.CuckooConfig{Capacity: 10000})
	gate := make(chan struct{})
	loadDone := make(chan error, 1)
	go func() {
		loadDone <- f.Load(func(yield func([]byte, error) bool) {
			for i := range 3000 {
				if i == 10 {
					<-gate
				}
				if !yield(keyN("w", i), nil) {
					return
				}
			}
		})
	}()
	time.Sleep(20 * time.Millisecond)
	exported := make(chan int, 1)
	go func() {
		var buf bytesBuffer
		_, err := f.WriteTo(&buf)
		if err != nil {
			t.Error(err)
		}
		exported <- buf.n
	}()
	select {
	case <-exported:
		t.Fatal("WriteTo returned while the Load ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	must(t, <-loadDone)
	<-exported
	if f.Items() != 3000 {
		t.Errorf("items %d", f.Items())
	}
}

type bytesBuffer struct{ n int }

func (b *bytesBuffer) Write(p []byte) (int, error) { b.n += len(p); return len(p), nil }

// Load into a filter that already holds items keeps them (every key, not a
// replacement).
func TestLoadIntoNonEmpty(t *testing.T) {
	s, _ := newStore(t, nil)
	for _, kind := range []string{"bloom", "cuckoo", "counting"} {
		var add func([]byte) error
		var has func([]byte) bool
		var load func(ks [][]byte) error
		switch kind {
		case "bloom":
			f, _ := s.CreateBloom(kind, store.BloomConfig{Capacity: 100})
			add = func(k []byte) error { _, err := f.Add(k); return err }
			has = f.Has
			load = func(ks [][]byte) error { return f.Load(store.Keys(slices.Values(ks))) }
		case "cuckoo":
			f, _ := s.CreateCuckoo(kind, store.CuckooConfig{Capacity: 100})
			add, has = f.Add, f.Has
			load = func(ks [][]byte) error { return f.Load(store.Keys(slices.Values(ks))) }
		case "counting":
			f, _ := s.CreateCounting(kind, store.BloomConfig{Capacity: 100})
			add, has = f.Add, f.Has
			load = func(ks [][]byte) error { return f.Load(store.Keys(slices.Values(ks))) }
		}
		for _, k := range keys("pre", 50) {
			must(t, add(k))
		}
		must(t, load(keys("ld", 2000))) // past capacity: bloom and cuckoo grow
		for _, k := range append(keys("pre", 50), keys("ld", 2000)...) {
			if !has(k) {
				t.Fatalf("%s: lost %s", kind, k)
			}
		}
	}
}
