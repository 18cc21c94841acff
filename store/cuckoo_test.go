package store

import (
	"errors"
	"fmt"
	"testing"
)

// TestCuckooGrowsByDefault: a cuckoo filter of a zero-expansion config
// grows layers of its first's size (RedisBloom's EXPANSION 1); NonScaling
// refuses with ErrFull, and is recorded in the catalog exactly as the old
// default (Expansion 0) was, so filters created before the change keep
// refusing after a reopen.
func TestCuckooGrowsByDefault(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	c, err := s.CreateCuckoo("grows", CuckooConfig{Capacity: 64})
	must(t, err)
	for i := 0; i < 200; i++ {
		if err := c.Add(key(i)); err != nil {
			t.Fatalf("add %d to a default cuckoo filter: %v", i, err)
		}
	}
	info := mustInfo(t, c)
	if info.Layers < 2 || info.Expansion != 1 || info.NonScaling {
		t.Fatalf("default cuckoo filter after 200 adds: %d layers, expansion %d, non-scaling %v; want growth by 1",
			info.Layers, info.Expansion, info.NonScaling)
	}
	if l := c.b.meta.Layers; l[1].Capacity != l[0].Capacity {
		t.Fatalf("layer capacities %d, %d; want equal (Expansion 1)", l[0].Capacity, l[1].Capacity)
	}
	fixed, err := s.CreateCuckoo("fixed", CuckooConfig{Capacity: 64, Expansion: 4, NonScaling: true})
	must(t, err)
	if m := fixed.b.meta; m.Expansion != 0 || !m.NonScaling {
		t.Fatalf("a NonScaling filter's catalog entry has Expansion %d, NonScaling %v; want 0, true (the old default's)", m.Expansion, m.NonScaling)
	}
	full := func(c *Cuckoo) int {
		for i := 0; i < 1000; i++ {
			if err := c.Add(key(i)); err != nil {
				if !errors.Is(err, ErrFull) {
					t.Fatalf("add %d: %v, want ErrFull", i, err)
				}
				return i
			}
		}
		t.Fatalf("a NonScaling cuckoo filter took 1000 keys")
		return 0
	}
	n := full(fixed)
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	fixed, err = s.Cuckoo("fixed")
	must(t, err)
	if err := fixed.Add(key(n)); !errors.Is(err, ErrFull) || mustInfo(t, fixed).Layers != 1 {
		t.Fatalf("reopened NonScaling filter: add = %v, %d layers; want ErrFull, 1", err, mustInfo(t, fixed).Layers)
	}
}

// TestCuckooSmallMaxIterationsGrows: a filter that may grow, with a
// MaxIterations of 1 or 2 (its inserts give up on short displacement
// paths, so its layers fail well below half full), grows a layer when a
// distinct key finds no slot, and every key added is found, through a
// reopen. Such a filter used to refuse the key with ErrFull ("too many
// copies of one item") at about 40% of its first layer: a layer failing
// below half full was taken for one key's copies, which it checks now.
func TestCuckooSmallMaxIterationsGrows(t *testing.T) {
	for _, c := range []struct{ b, iter int }{{1, 1}, {2, 1}, {2, 2}} {
		t.Run(fmt.Sprintf("b%d-iter%d", c.b, c.iter), func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			f, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000, BucketSize: c.b, FingerprintBits: 16, MaxIterations: c.iter})
			must(t, err)
			const n = 3000
			for i := range n {
				if err := f.Add(key(i)); err != nil {
					t.Fatalf("add of distinct key %d: %v (%d layers)", i, err, mustInfo(t, f).Layers)
				}
			}
			if info := mustInfo(t, f); info.Layers < 2 || info.Items != n {
				t.Fatalf("after %d distinct keys: %d layers, %d items", n, info.Layers, info.Items)
			}
			must(t, s.Close())
			s = mustOpen(t, dir, nil)
			defer s.Close()
			f, err = s.Cuckoo("c")
			must(t, err)
			for i := range n {
				if !f.Has(key(i)) {
					t.Fatalf("key %d absent after reopen", i)
				}
			}
		})
	}
}

// TestCuckooOneKeyDoesNotGrow: one key added until its two buckets are
// full fails with ErrFull and does not grow a filter that may grow (the
// layer is far from full: growing would not help), however often it is
// retried, and the layer's count, checked against its fingerprints on
// the first refusal, stays the number of adds that succeeded.
func TestCuckooOneKeyDoesNotGrow(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1024})
	must(t, err)
	added := 0
	for i := range 30 {
		err := c.Add([]byte("same"))
		if err == nil {
			added++
			continue
		}
		if !errors.Is(err, ErrFull) || added == 0 {
			t.Fatalf("add %d of one key: %v after %d added, want ErrFull once its buckets are full", i, err, added)
		}
	}
	info := mustInfo(t, c)
	if info.Layers != 1 || info.Items != uint64(added) || added > 8 {
		t.Fatalf("after 30 adds of one key: %d layers, %d items, %d adds succeeded; want 1 layer and at most 8 (2 buckets of 4)", info.Layers, info.Items, added)
	}
}
