package store

import (
	"flag"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/filterstore/filterstore/bloom"
)

var (
	manyN   = flag.Uint64("many.n", 10_000_000, "keys of BenchmarkHasMany's filters")
	manyDir = flag.String("many.dir", "", "store directory BenchmarkHasMany reuses across runs (default: a new temporary one)")
	manyOf  = flag.String("many.kinds", "bloom,heap,cuckoo,counting", "filters BenchmarkHasMany measures")
)

// BenchmarkHasMany measures HasManyInto per key (issue #11, target 2) on a
// Bloom, a cuckoo and a counting filter of -many.n keys each, and
// bloom.Filter.HasMany over a heap copy of the Bloom's words (heap), in
// batches of 1024 keys: hits spread over the filter and misses, so that
// nearly every lookup misses the CPU caches. ns/op is per key. With
// -many.dir the filters are built once and reused by later runs (of this
// binary or another one), e.g.
//
//	go test -run '^$' -bench HasMany -benchtime 4000000x -many.n=100000000 -many.dir=/tmp/many ./store/
func BenchmarkHasMany(b *testing.B) {
	n := *manyN
	dir := *manyDir
	if dir == "" {
		dir = b.TempDir()
	}
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bf, cf, nf := manyFilters(b, s, n)
	// Map every page before timing: a process's first read of a page of
	// a mapped file takes a minor fault, which is not the lookup's cost.
	var sum uint64
	for _, base := range []*filterBase{bf.b, cf.b, nf.b} {
		for _, r := range base.regions {
			w := r.Words()
			for i := 0; i < len(w); i += 512 {
				sum += atomic.LoadUint64(&w[i])
			}
		}
	}
	manySink = sum
	const m = 1 << 20
	flat := make([]byte, 16*m)
	hits, misses := make([][]byte, m), make([][]byte, m)
	for i := range uint64(m) {
		hits[i], misses[i] = flat[16*i:16*i+8:16*i+8], flat[16*i+8:16*i+16:16*i+16]
		putBenchKey(hits[i], i*7919%n)
		putBenchKey(misses[i], n+i)
	}
	var heap *bloom.Filter
	for _, kind := range strings.Split(*manyOf, ",") {
		var many func(dst []bool, keys [][]byte) []bool
		switch kind {
		case "bloom":
			many = bf.HasManyInto
		case "cuckoo":
			many = cf.HasManyInto
		case "counting":
			many = nf.HasManyInto
		case "heap":
			if heap == nil {
				mapped := (*bf.layers.Load())[0]
				heap, err = bloom.New(mapped.Geometry(), append([]uint64(nil), mapped.Words()...))
				if err != nil {
					b.Fatal(err)
				}
			}
			many = func(dst []bool, keys [][]byte) []bool { return heap.HasMany(keys, dst) }
		default:
			b.Fatalf("unknown kind %q in -many.kinds", kind)
		}
		for _, w := range []struct {
			what string
			keys [][]byte
		}{{"hit", hits}, {"miss", misses}} {
			b.Run(fmt.Sprintf("n=%d/%s/%s", n, kind, w.what), func(b *testing.B) {
				const batch = 1024
				out := make([]bool, batch)
				found := 0
				for i := 0; i < b.N; i += batch {
					k := min(batch, b.N-i)
					off := i & (m - 1)
					out = many(out, w.keys[off:off+k])
					for _, ok := range out {
						if ok {
							found++
						}
					}
				}
				if w.what == "hit" && found != b.N {
					b.Fatalf("%d of %d hits found", found, b.N)
				}
			})
		}
	}
}

// manySink keeps BenchmarkHasMany's warming reads.
var manySink uint64

// manyFilters returns BenchmarkHasMany's filters of n keys in s, creating
// and loading the ones s does not hold yet.
func manyFilters(b *testing.B, s *Store, n uint64) (*Bloom, *Cuckoo, *Counting) {
	name := func(kind string) string { return fmt.Sprintf("%s-%d", kind, n) }
	bf, err := s.Bloom(name("bloom"))
	if err != nil {
		bf, err = s.CreateBloom(name("bloom"), BloomConfig{Capacity: n, ErrorRate: 0.01, NonScaling: true})
		if err == nil {
			err = bf.Load(benchLoadKeys(0, n))
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	cf, err := s.Cuckoo(name("cuckoo"))
	if err != nil {
		cf, err = s.CreateCuckoo(name("cuckoo"), CuckooConfig{Capacity: n})
		if err == nil {
			err = cf.Load(benchLoadKeys(0, n))
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	nf, err := s.Counting(name("counting"))
	if err != nil {
		nf, err = s.CreateCounting(name("counting"), BloomConfig{Capacity: n, ErrorRate: 0.01})
		if err == nil {
			err = nf.Load(benchLoadKeys(0, n))
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	return bf, cf, nf
}
