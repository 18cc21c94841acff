package store

import (
	"flag"
	"fmt"
	"testing"

	"github.com/filterstore/filterstore/bloom"
)

var mappedN = flag.Uint64("mapped.n", 10_000_000, "keys of BenchmarkMappedVsHeap's filter")

// BenchmarkMappedVsHeap splits the cost of a store lookup (issue #11,
// target 1): the same Bloom filter answered three ways, interleaved with
// -count: through the store's handle (store), through the bloom.Filter the
// store wraps, over the mapped file's words (mapped), and through a
// bloom.Filter over a heap copy of the same words (heap). store against
// mapped is the handle's own cost (the off flag, the layer snapshot, the
// re-check after a miss); mapped against heap is the memory's (4 KiB file
// pages against the Go heap). Misses and hits over 1<<20 keys spread over
// the filter, so nearly every lookup misses the CPU caches.
func BenchmarkMappedVsHeap(b *testing.B) {
	n := *mappedN
	s, err := Open(b.TempDir(), &Options{CheckpointEvery: -1, SmallPages: *smallPages})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bf, err := s.CreateBloom("b", BloomConfig{Capacity: n, ErrorRate: 0.01, NonScaling: true})
	if err == nil {
		err = bf.Load(benchLoadKeys(0, n))
	}
	if err != nil {
		b.Fatal(err)
	}
	mapped := (*bf.layers.Load())[0]
	heap, err := bloom.New(mapped.Geometry(), append([]uint64(nil), mapped.Words()...))
	if err != nil {
		b.Fatal(err)
	}
	const m = 1 << 20
	hits, misses := make([]uint64, m), make([]uint64, m)
	for i := range hits {
		hits[i] = Hash(benchKey(uint64(i) * 7919 % n))
		misses[i] = Hash(benchKey(n + uint64(i)))
	}
	for _, c := range []struct {
		name string
		has  func(uint64) bool
	}{{"store", bf.HasHash}, {"mapped", mapped.HasHash}, {"heap", heap.HasHash}} {
		for _, w := range []struct {
			what string
			hs   []uint64
		}{{"hit", hits}, {"miss", misses}} {
			b.Run(fmt.Sprintf("n=%d/%s/%s", n, c.name, w.what), func(b *testing.B) {
				found := 0
				for i := 0; b.Loop(); i++ {
					if c.has(w.hs[i&(m-1)]) {
						found++
					}
				}
				if w.what == "hit" && found != b.N {
					b.Fatalf("%d of %d hits found", found, b.N)
				}
			})
		}
	}
}
