package store

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/prefetch"
	"github.com/filterstore/filterstore/internal/smaps"
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
// nearly every lookup misses the CPU caches. ns/op is per key.
//
// Beside each filter's lookups, "lines" is their memory bound: per key,
// as many random cache lines of the same mapped words as a lookup reads
// (a block for Bloom and counting, two buckets for cuckoo), fetched as
// HasManyInto fetches them (16 lines prefetched a batch ahead, then read),
// with no hashing and no probing: what the lookups' memory alone costs on
// this mapping, to which their arithmetic adds. With
// -many.dir the filters are built once and reused by later runs (of this
// binary or another one), e.g.
//
//	go test -run '^$' -bench HasMany -benchtime 4000000x -many.n=100000000 -many.dir=/tmp/many ./store/
func BenchmarkHasMany(b *testing.B) {
	fx := manySetup(b)
	for _, kind := range fx.kinds {
		many := fx.many[kind]
		for _, w := range []struct {
			what string
			keys [][]byte
		}{{"hit", fx.hits}, {"miss", fx.misses}, {"lines", nil}} {
			if w.what == "lines" && fx.lines[kind] == nil {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/%s/%s", fx.n, kind, w.what), func(b *testing.B) {
				const batch = 1024
				if w.what == "lines" {
					lines := fx.lines[kind]
					out := make([]bool, batch)
					for i := 0; i < b.N; i += batch {
						k := min(batch, b.N-i)
						off := i & (manyKeys - 1)
						lines.read(off, out[:k])
					}
					return
				}
				out := make([]bool, batch)
				found := 0
				for i := 0; i < b.N; i += batch {
					k := min(batch, b.N-i)
					off := i & (manyKeys - 1)
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

// BenchmarkHasManyParallel is BenchmarkHasMany's lookups, HasManyInto in
// batches of 1024 (hasmany) and single Has (has), from GOMAXPROCS
// goroutines at once, each from its own offset in the keys: run with
// -test.cpu 1,2,4,... for the scaling with goroutines on filters larger
// than the caches. ns/op is wall time per key over all goroutines.
func BenchmarkHasManyParallel(b *testing.B) {
	fx := manySetup(b)
	var next atomic.Uint64
	for _, kind := range fx.kinds {
		many, has := fx.many[kind], fx.has[kind]
		for _, w := range []struct {
			what string
			keys [][]byte
		}{{"hit", fx.hits}, {"miss", fx.misses}} {
			b.Run(fmt.Sprintf("n=%d/%s/%s/hasmany", fx.n, kind, w.what), func(b *testing.B) {
				const batch = 1024
				var wrong atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					out := make([]bool, batch)
					off := int(next.Add(7919*batch)) & (manyKeys - 1) &^ (batch - 1)
					for pb.Next() {
						out = many(out, w.keys[off:off+batch])
						if w.what == "hit" {
							for _, ok := range out {
								if !ok {
									wrong.Add(1)
								}
							}
						}
						off = (off + batch) & (manyKeys - 1)
					}
				})
				if wrong.Load() != 0 {
					b.Fatalf("%d hits not found", wrong.Load())
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
			})
			b.Run(fmt.Sprintf("n=%d/%s/%s/has", fx.n, kind, w.what), func(b *testing.B) {
				var wrong atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(next.Add(7919))
					for pb.Next() {
						if !has(w.keys[i&(manyKeys-1)]) && w.what == "hit" {
							wrong.Add(1)
						}
						i++
					}
				})
				if wrong.Load() != 0 {
					b.Fatalf("%d hits not found", wrong.Load())
				}
			})
		}
	}
}

// manyKeys is how many hits and misses the HasMany benchmarks look up in
// turn.
const manyKeys = 1 << 20

// manyFixture is the HasMany benchmarks' store, filters and keys.
type manyFixture struct {
	n            uint64
	kinds        []string
	many         map[string]func(dst []bool, keys [][]byte) []bool
	has          map[string]func(key []byte) bool
	lines        map[string]*randomLines // memory bound of the kind's lookups (not for heap)
	hits, misses [][]byte
}

// manySetup opens (or reuses, with -many.dir) the store of the kinds
// -many.kinds names, with -many.n keys each, maps every page, and makes
// the keys. The store is closed at cleanup.
func manySetup(b *testing.B) *manyFixture {
	n := *manyN
	dir := *manyDir
	if dir == "" {
		dir = b.TempDir()
	}
	s, err := Open(dir, &Options{CheckpointEvery: -1, SmallPages: *smallPages})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	fx := &manyFixture{
		n:     n,
		kinds: strings.Split(*manyOf, ","),
		many:  make(map[string]func(dst []bool, keys [][]byte) []bool),
		has:   make(map[string]func(key []byte) bool),
		lines: make(map[string]*randomLines),
	}
	want := make(map[string]bool)
	for _, kind := range fx.kinds {
		want[kind] = true
	}
	bf, cf, nf := manyFilters(b, s, n, want)
	// Map every page before timing: a process's first read of a page of
	// a mapped file takes a minor fault, which is not the lookup's cost.
	var bases []*filterBase
	if bf != nil {
		bases = append(bases, bf.b)
	}
	if cf != nil {
		bases = append(bases, cf.b)
	}
	if nf != nil {
		bases = append(bases, nf.b)
	}
	var sum uint64
	start := time.Now()
	for _, base := range bases {
		for _, r := range base.regions {
			w := r.Words()
			for i := 0; i < len(w); i += 512 {
				sum += atomic.LoadUint64(&w[i])
			}
		}
	}
	manySink = sum
	if m, err := smaps.Rollup(); err == nil {
		// How much of the mapped files the kernel maps with 2 MiB
		// entries (Options.SmallPages, the page cache's folio sizes).
		b.Logf("mapping every page took %v; file pages mapped: %d MiB, with 2 MiB entries: %d MiB",
			time.Since(start).Round(time.Millisecond), (m["Rss"]-m["Anonymous"])>>10, m["FilePmdMapped"]>>10)
	}
	flat := make([]byte, 16*manyKeys)
	fx.hits, fx.misses = make([][]byte, manyKeys), make([][]byte, manyKeys)
	for i := range uint64(manyKeys) {
		fx.hits[i], fx.misses[i] = flat[16*i:16*i+8:16*i+8], flat[16*i+8:16*i+16:16*i+16]
		putBenchKey(fx.hits[i], i*7919%n)
		putBenchKey(fx.misses[i], n+i)
	}
	for _, kind := range fx.kinds {
		switch kind {
		case "bloom":
			fx.many[kind], fx.has[kind] = bf.HasManyInto, bf.Has
			fx.lines[kind] = newRandomLines(bf.b.regions[0].Words(), 1)
		case "cuckoo":
			fx.many[kind], fx.has[kind] = cf.HasManyInto, cf.Has
			fx.lines[kind] = newRandomLines(cf.b.regions[0].Words(), 2)
		case "counting":
			fx.many[kind], fx.has[kind] = nf.HasManyInto, nf.Has
			fx.lines[kind] = newRandomLines(nf.b.regions[0].Words(), 1)
		case "heap":
			mapped := (*bf.layers.Load())[0]
			heap, err := bloom.New(mapped.Geometry(), append([]uint64(nil), mapped.Words()...))
			if err != nil {
				b.Fatal(err)
			}
			fx.many[kind] = func(dst []bool, keys [][]byte) []bool { return heap.HasMany(keys, dst) }
			fx.has[kind] = heap.Has
		default:
			b.Fatalf("unknown kind %q in -many.kinds", kind)
		}
	}
	return fx
}

// manySink keeps BenchmarkHasMany's warming reads.
var manySink uint64

// randomLines is BenchmarkHasMany's memory bound of one filter's lookups:
// for each of manyKeys keys, perKey cache lines of the filter's words
// chosen at random (seeded, so every run reads the same lines).
type randomLines struct {
	perKey int
	ptrs   []unsafe.Pointer // key i's lines at perKey*i ...
}

// linesBatch is how many lines randomLines.read prefetches a batch ahead:
// the 16 lines in flight of HasManyInto (16 Bloom or counting lookups, 8
// cuckoo ones).
const linesBatch = 16

// newRandomLines chooses perKey random lines of words for each key.
func newRandomLines(words []uint64, perKey int) *randomLines {
	r := rand.New(rand.NewPCG(uint64(len(words)), uint64(perKey)))
	lines := uint64(len(words)) / 8
	ptrs := make([]unsafe.Pointer, manyKeys*perKey)
	for i := range ptrs {
		ptrs[i] = unsafe.Pointer(&words[r.Uint64N(lines)*8])
	}
	return &randomLines{perKey: perKey, ptrs: ptrs}
}

// read reads the lines of keys off ... off+len(out)-1 as HasManyInto's
// batches read theirs (prefetched a batch ahead, then loaded) and sets
// out[i] to whether key off+i's lines hold a set bit.
func (l *randomLines) read(off int, out []bool) {
	ptrs := l.ptrs[off*l.perKey : (off+len(out))*l.perKey]
	prefetch.Lines(ptrs[:min(linesBatch, len(ptrs))])
	for i := 0; i < len(ptrs); i += linesBatch {
		end := min(i+linesBatch, len(ptrs))
		if end < len(ptrs) {
			prefetch.Lines(ptrs[end:min(end+linesBatch, len(ptrs))])
		}
		for j := i; j < end; j += l.perKey {
			var v uint64
			for _, p := range ptrs[j : j+l.perKey] {
				v |= atomic.LoadUint64((*uint64)(p))
			}
			out[j/l.perKey] = v != 0
		}
	}
}

// timedLoad loads keys 0..n-1 with load and logs how long that took on
// how many CPUs: a run at -many.n 1e9 doubles as a scaling run of Load.
func timedLoad(b *testing.B, kind string, n uint64, load loadFunc) error {
	start := time.Now()
	err := load(benchLoadKeys(0, n))
	b.Logf("%s: Load of %d keys took %v on GOMAXPROCS %d", kind, n, time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0))
	return err
}

// manyFilters returns BenchmarkHasMany's filters of n keys in s of the
// kinds want names (heap needs the Bloom filter), creating and loading
// the ones s does not hold yet; the others are nil.
func manyFilters(b *testing.B, s *Store, n uint64, want map[string]bool) (bf *Bloom, cf *Cuckoo, nf *Counting) {
	name := func(kind string) string { return fmt.Sprintf("%s-%d", kind, n) }
	var err error
	if want["bloom"] || want["heap"] {
		bf, err = s.Bloom(name("bloom"))
		if err != nil {
			bf, err = s.CreateBloom(name("bloom"), BloomConfig{Capacity: n, ErrorRate: 0.01, NonScaling: true})
			if err == nil {
				err = timedLoad(b, "bloom", n, bf.Load)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if want["cuckoo"] {
		cf, err = s.Cuckoo(name("cuckoo"))
		if err != nil {
			cf, err = s.CreateCuckoo(name("cuckoo"), CuckooConfig{Capacity: n})
			if err == nil {
				err = timedLoad(b, "cuckoo", n, cf.Load)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if want["counting"] {
		nf, err = s.Counting(name("counting"))
		if err != nil {
			nf, err = s.CreateCounting(name("counting"), BloomConfig{Capacity: n, ErrorRate: 0.01})
			if err == nil {
				err = timedLoad(b, "counting", n, nf.Load)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return bf, cf, nf
}
