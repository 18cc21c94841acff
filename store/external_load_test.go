package store

import (
	"testing"
	"time"
)

// TestExternalWaitsForLoad pins what ApplyExternal's doc says of a filter
// being loaded: a record changing it waits for the Load, a later record
// on another filter waits behind it (seq order), and both apply, whole,
// once the Load returned. (An adversarial review found a Load whose
// source waited on the second record: it never ended; the doc now says
// so.)
func TestExternalWaitsForLoad(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer s.Close()
	f, err := s.CreateBloom("f", BloomConfig{Capacity: 10_000})
	must(t, err)
	g, err := s.CreateCuckoo("g", CuckooConfig{Capacity: 10_000})
	must(t, err)
	encode := func(add func(*Batch)) []byte {
		b := s.NewBatch()
		add(b)
		rec, err := b.Encode()
		must(t, err)
		return rec
	}
	r1 := encode(func(b *Batch) { b.BloomAdd(f, []byte("to-f")) })
	r2 := encode(func(b *Batch) { b.CuckooAdd(g, []byte("to-g")) })

	started, end := make(chan struct{}), make(chan error, 1)
	loaded := make(chan error, 1)
	go func() { loaded <- f.Load(gatedKeys(2000, started, end)) }()
	<-started
	applied := make(chan error, 2)
	for _, rec := range [][]byte{r1, r2} {
		go func() { _, err := s.ApplyExternal(rec); applied <- err }()
	}
	select {
	case err := <-applied:
		t.Fatalf("an ApplyExternal returned %v while the Load of f ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	end <- nil
	must(t, <-loaded)
	for range 2 {
		select {
		case err := <-applied:
			must(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("ApplyExternal still waits 10 s after the Load returned")
		}
	}
	if !f.Has([]byte("to-f")) || !g.Has([]byte("to-g")) {
		t.Fatalf("after the Load: f has to-f %v, g has to-g %v", f.Has([]byte("to-f")), g.Has([]byte("to-g")))
	}
	for i := 0; i < 2000; i++ {
		if !f.Has(key(i)) {
			t.Fatalf("loaded key %d absent", i)
		}
	}
}
