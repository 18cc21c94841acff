package bench

// Go benchmarks of every adapter at 1e6 keys, for benchstat:
//
//	go test -run '^$' -bench . -count 6 -benchtime 3x -timeout 30m . | tee old.txt
//	benchstat old.txt
//
// BenchmarkBuild builds a whole filter per op (ns/key is reported beside);
// the lookup benchmarks build one filter per sub-benchmark run, untimed, and
// look up benchKeys' first 2^19 keys (or 2^19 absent keys) in turn. Keys come
// from NewKeys with benchSeed.

import (
	"path/filepath"
	"sync"
	"testing"
)

const (
	benchN    = 1_000_000
	benchFPR  = 0.01
	benchSeed = 1
	benchMask = 1<<19 - 1
)

var (
	benchOnce            sync.Once
	benchKeys, benchMiss *Keys
)

func keysForBench() (*Keys, *Keys) {
	benchOnce.Do(func() {
		benchKeys = NewKeys(benchN, benchSeed, 1)
		benchMiss = NewKeys(benchMask+1, benchSeed, 2)
	})
	return benchKeys, benchMiss
}

// built returns lib's filter holding every bench key.
func built(b *testing.B, lib Lib) Filter {
	b.Helper()
	keys, _ := keysForBench()
	f, err := lib.New(Config{N: benchN, FPR: benchFPR, Dir: filepath.Join(b.TempDir(), "store")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if _, err := Build(f, keys); err != nil {
		b.Fatal(err)
	}
	return f
}

func BenchmarkBuild(b *testing.B) {
	keys, _ := keysForBench()
	for _, lib := range Libs() {
		b.Run(lib.Name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				f, err := lib.New(Config{N: benchN, FPR: benchFPR, Dir: filepath.Join(b.TempDir(), "store")})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Build(f, keys); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchN, "ns/key")
		})
	}
}

func benchLookup(b *testing.B, absent bool) {
	for _, lib := range Libs() {
		b.Run(lib.Name, func(b *testing.B) {
			f := built(b, lib)
			keys, miss := keysForBench()
			if absent {
				keys = miss
			}
			n := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if f.Has(keys.At(i & benchMask)) {
					n++
				}
			}
			b.StopTimer()
			if !absent && n != b.N {
				b.Fatalf("%d of %d added keys not found", b.N-n, b.N)
			}
		})
	}
}

func BenchmarkHas(b *testing.B)     { benchLookup(b, false) }
func BenchmarkHasMiss(b *testing.B) { benchLookup(b, true) }

func BenchmarkHasMany(b *testing.B) {
	for _, lib := range Libs() {
		b.Run(lib.Name, func(b *testing.B) {
			f := built(b, lib)
			bat, ok := f.(Batcher)
			if !ok {
				b.Skip("no batch lookup")
			}
			keys, _ := keysForBench()
			sl := keys.Prefix(benchMask + 1).Slices()
			out := make([]bool, 1024)
			b.ResetTimer()
			for i := 0; i < b.N; i += 1024 {
				j := i & benchMask
				out = bat.HasMany(sl[j:j+min(1024, b.N-i)], out)
			}
		})
	}
}
