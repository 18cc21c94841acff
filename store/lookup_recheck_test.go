//go:build filterstore_testhooks

package store

// Run with: go test -tags filterstore_testhooks -run TestLookupsRecheckAfterRead ./store/
// (make test and CI do).

import (
	"math"
	"testing"
)

// TestLookupsRecheckAfterRead: every lookup of an added item that reads
// the filter after Close or Drop replaced its mapping by zero pages (the
// hook closes the store or drops the filter after the lookup's first check
// that the filter is on, before it reads) still answers "maybe present"
// (true, or an unknown count): each lookup checks the filter again after
// reading. In TestLookupsRacingCloseAndDrop that interleaving is left to
// the scheduler, and a lookup missing its second check could pass there.
func TestLookupsRecheckAfterRead(t *testing.T) {
	const n = 5000
	added := key(7 * 11) // in every kind: keys 0..n-1, bitmap bits i%7 == 0
	h := Hash(added)
	var grown *Bloom        // a scalable Bloom filter of several layers (each subtest's)
	var grownCuckoo *Cuckoo // a cuckoo filter of several layers (each subtest's)
	lookups := []struct {
		name string
		kind func(k kinds) *filterBase
		// present runs the lookup and reports whether it answered
		// "maybe present" for the added item: a count at least 1 while the
		// filter is on, "unknown" (math.MaxUint64) once it is off.
		present func(k kinds, off bool) bool
	}{
		{"bloom.HasHash", func(k kinds) *filterBase { return k.b.b }, func(k kinds, _ bool) bool { return k.b.HasHash(h) }},
		{"bloom.Has", func(k kinds) *filterBase { return k.b.b }, func(k kinds, _ bool) bool { return k.b.Has(added) }},
		{"grown-bloom.HasHash", func(k kinds) *filterBase { return grown.b }, func(k kinds, _ bool) bool { return grown.HasHash(h) }},
		{"grown-bloom.Has", func(k kinds) *filterBase { return grown.b }, func(k kinds, _ bool) bool { return grown.Has(added) }},
		{"bloom.HasManyHash", func(k kinds) *filterBase { return k.b.b }, func(k kinds, _ bool) bool { return k.b.HasManyHash([]uint64{h})[0] }},
		{"counting.HasHash", func(k kinds) *filterBase { return k.n.b }, func(k kinds, _ bool) bool { return k.n.HasHash(h) }},
		{"counting.Has", func(k kinds) *filterBase { return k.n.b }, func(k kinds, _ bool) bool { return k.n.Has(added) }},
		{"counting.CountHash", func(k kinds) *filterBase { return k.n.b }, func(k kinds, off bool) bool { return countSays(k.n.CountHash(h), off) }},
		{"counting.HasManyHash", func(k kinds) *filterBase { return k.n.b }, func(k kinds, _ bool) bool { return k.n.HasManyHash([]uint64{h})[0] }},
		{"cuckoo.HasHash", func(k kinds) *filterBase { return k.c.b }, func(k kinds, _ bool) bool { return k.c.HasHash(h) }},
		{"cuckoo.Has", func(k kinds) *filterBase { return k.c.b }, func(k kinds, _ bool) bool { return k.c.Has(added) }},
		{"grown-cuckoo.HasHash", func(k kinds) *filterBase { return grownCuckoo.b }, func(k kinds, _ bool) bool { return grownCuckoo.HasHash(h) }},
		{"grown-cuckoo.Has", func(k kinds) *filterBase { return grownCuckoo.b }, func(k kinds, _ bool) bool { return grownCuckoo.Has(added) }},
		{"cuckoo.CountHash", func(k kinds) *filterBase { return k.c.b }, func(k kinds, off bool) bool { return countSays(k.c.CountHash(h), off) }},
		{"cuckoo.HasManyHash", func(k kinds) *filterBase { return k.c.b }, func(k kinds, _ bool) bool { return k.c.HasManyHash([]uint64{h})[0] }},
		{"bitmap.Get", func(k kinds) *filterBase { return k.m.b }, func(k kinds, _ bool) bool { return k.m.Get(7 * 11) }},
	}
	for _, what := range []string{"close", "drop"} {
		for _, l := range lookups {
			t.Run(what+"/"+l.name, func(t *testing.T) {
				s := mustOpen(t, t.TempDir(), nil)
				k := fillKinds(t, s, n)
				var err error
				grown, err = s.CreateBloom("grown", BloomConfig{Capacity: n / 8})
				must(t, err)
				must(t, grown.Load(rangeKeys(0, n)))
				if l := len(*grown.layers.Load()); l < 2 {
					t.Fatalf("the grown filter has %d layer", l)
				}
				grownCuckoo, err = s.CreateCuckoo("grown-cuckoo", CuckooConfig{Capacity: n / 8, Expansion: 2})
				must(t, err)
				must(t, grownCuckoo.Load(rangeKeys(0, n)))
				if l := len(*grownCuckoo.layers.Load()); l < 2 {
					t.Fatalf("the grown cuckoo filter has %d layer", l)
				}
				must(t, s.Checkpoint())
				if !l.present(k, false) {
					t.Fatalf("the added item is not found before %s", what)
				}
				target := l.kind(k)
				fired := false
				lookupReadHook = func(b *filterBase) {
					if fired || b != target {
						return
					}
					fired = true
					if what == "close" {
						must(t, s.Close())
					} else {
						must(t, s.Drop(b.name()))
					}
				}
				defer func() { lookupReadHook = nil }()
				got := l.present(k, true)
				if !fired {
					t.Fatalf("the hook did not run in %s", l.name)
				}
				if !got {
					t.Errorf("%s after %s during the lookup answered absent for an added item (it read the zero pages and did not check again)", l.name, what)
				}
				if what == "drop" {
					lookupReadHook = nil
					must(t, s.Close())
				}
			})
		}
	}
}

// countSays reports whether a count answers "maybe present": at least 1
// while the filter is on, math.MaxUint64 once it is off.
func countSays(n uint64, off bool) bool {
	if off {
		return n == math.MaxUint64
	}
	return n > 0
}
