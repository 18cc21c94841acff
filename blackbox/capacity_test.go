package blackbox_test

import (
	"errors"
	"strings"
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

// Info.State while a Load runs. Info doc: State "incomplete" (a Load is
// running or did not finish); inspect help: "incomplete  a bulk Load is
// running, or was interrupted". The writer's Info and List, a read-only
// store beside it and inspect agree, and the writer says "ok" once the
// Load ended. (Before, the writer said "ok" during the Load.)
func TestInfoStateDuringLoad(t *testing.T) {
	s, dir := newStore(t, nil)
	f, _ := s.CreateBloom("f", store.BloomConfig{Capacity: 100000})
	gate := make(chan struct{})
	reached := make(chan struct{})
	done := make(chan error, 1)
	src := func(yield func([]byte, error) bool) {
		for i := range 20000 {
			if i == 9000 {
				close(reached)
				<-gate
			}
			if !yield(keyN("il", i), nil) {
				return
			}
		}
	}
	go func() { done <- f.Load(src) }()
	<-reached
	in, _ := f.Info()
	l, _ := s.List()
	r := openStore(t, dir, &store.Options{ReadOnly: true})
	rf, _ := r.Bloom("f")
	rin, _ := rf.Info()
	so, _, _ := run(t, "ls", "--json", dir)
	r.Close()
	close(gate)
	must(t, waitOrFail(t, "the Load", done, 30*time.Second))
	for what, st := range map[string]string{"writer Info": in.State, "writer List": l[0].State, "read-only Info": rin.State} {
		if st != "incomplete" {
			t.Errorf("during a Load the %s says %q, want incomplete", what, st)
		}
	}
	if !strings.Contains(so, `"incomplete"`) {
		t.Errorf("during a Load inspect ls says %s, want incomplete", so)
	}
	if in, _ := f.Info(); in.State != "ok" {
		t.Errorf("after the Load the writer's Info says %q, want ok", in.State)
	}
}
