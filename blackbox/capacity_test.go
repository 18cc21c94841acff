package blackbox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// CuckooConfig.Capacity: "the number of items the first layer holds". A
// NonScaling cuckoo filter must take at least Capacity distinct keys before
// ErrFull; Info.Capacity reports it.
func TestCuckooHoldsCapacity(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval})
	cfgs := []store.CuckooConfig{
		{Capacity: 100},
		{Capacity: 1000},
		{Capacity: 5000, BucketSize: 2, FingerprintBits: 16},
		{Capacity: 3000, BucketSize: 1, FingerprintBits: 16},
		{Capacity: 2000, BucketSize: 8, FingerprintBits: 8},
		{Capacity: 2000, BucketSize: 16, FingerprintBits: 4},
	}
	for i, cfg := range cfgs {
		cfg.NonScaling = true
		c, err := s.CreateCuckoo(sprintf("c%d", i), cfg)
		must(t, err)
		in, _ := c.Info()
		n, err := c.AddMany(keys(sprintf("cap%d", i), int(cfg.Capacity)))
		if err != nil {
			t.Errorf("%+v: ErrFull after %d of Capacity %d keys: %v (Info.Capacity %d)", cfg, n, cfg.Capacity, err, in.Capacity)
		}
		t.Logf("%+v: Info.Capacity %d, layer size %d buckets", cfg, in.Capacity, in.LayerInfo[0].Size)
	}
}

// A counting filter's Count is "at least the number of times key was added
// and not deleted" and a Bloom layer at Capacity is "full": NonScaling
// Bloom takes exactly Capacity new items (Card) before ErrFull.
func TestBloomNonScalingExactCapacity(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval})
	for _, c := range []uint64{1, 7, 100, 4096} {
		b, err := s.CreateBloom(sprintf("b%d", c), store.BloomConfig{Capacity: c, NonScaling: true})
		must(t, err)
		_, err = b.AddMany(keys(sprintf("ex%d", c), int(c)*2+10))
		if !errors.Is(err, store.ErrFull) {
			t.Errorf("capacity %d: %v", c, err)
		}
		if b.Card() != c {
			t.Errorf("capacity %d: Card %d at ErrFull", c, b.Card())
		}
	}
}

// Info.State while a Load runs. Info doc: State "incomplete" (a Load did not
// finish); inspect help: "incomplete  a bulk Load is running, or was
// interrupted". The writer's Info and inspect should agree.
func TestMismatchInfoStateDuringLoad(t *testing.T) {
	mismatch(t)
	s, dir := newStore(t, nil)
	f, _ := s.CreateBloom("f", store.BloomConfig{Capacity: 100000})
	gate := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- f.Load(gatedSource("il", 20000, 9000, gate)) }()
	defer func() {
		close(gate)
		<-done
	}()
	time.Sleep(30 * time.Millisecond)
	in, _ := f.Info()
	l, _ := s.List()
	r := openStore(t, dir, &store.Options{ReadOnly: true})
	defer r.Close()
	rf, _ := r.Bloom("f")
	rin, _ := rf.Info()
	so, _, _ := run(t, "ls", "--json", dir)
	t.Logf("writer Info %q, writer List %q, read-only Info %q, read-only Has(never) %v, inspect ls %s",
		in.State, l[0].State, rin.State, rf.Has([]byte("never-zz")), so)
	if in.State != rin.State {
		t.Errorf("during a Load the writer's Info says %q, a read-only store's %q", in.State, rin.State)
	}
}
