package bloom

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
)

// Benchmarks at 1e6 and 1e7 keys, error rate 0.01. ns/op is per key. Run
// with a fixed count so the 1e7 filter is built once per run, e.g.
//
//	go test -run '^$' -bench . -benchtime 2000000x ./bloom/

const benchRate = 0.01

var benchSizes = []uint64{1e6, 1e7}

var (
	benchMu      sync.Mutex
	benchFilters = map[uint64]*Filter{} // n -> filter holding keys 0..n-1
)

// benchFilter returns the filter of n keys, building it on first use.
func benchFilter(b *testing.B, n uint64) *Filter {
	benchMu.Lock()
	defer benchMu.Unlock()
	if f := benchFilters[n]; f != nil {
		return f
	}
	g, err := Plan(n, benchRate)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := New(g, nil)
	var buf [8]byte
	for i := range n {
		f.Add(key(&buf, i))
	}
	benchFilters[n] = f
	return f
}

func sizeName(n uint64) string {
	switch n {
	case 1e6:
		return "n=1e6"
	case 1e7:
		return "n=1e7"
	}
	return fmt.Sprintf("n=%d", n)
}

func bitsPerKey(g Geometry, n uint64) float64 { return float64(g.Bits()) / float64(n) }

// BenchmarkAdd adds keys one at a time with Add (n=...) and with AddOwned
// (owned/n=...), hashing included.
func BenchmarkAdd(b *testing.B) {
	for _, owned := range []bool{false, true} {
		for _, n := range benchSizes {
			name := sizeName(n)
			if owned {
				name = "owned/" + name
			}
			b.Run(name, func(b *testing.B) {
				g, _ := Plan(n, benchRate)
				f, _ := New(g, nil)
				var buf [8]byte
				b.ResetTimer()
				for i := range uint64(b.N) {
					if i%n == 0 && i > 0 { // full: start over with an empty filter
						b.StopTimer()
						clear(f.Words())
						b.StartTimer()
					}
					if owned {
						f.AddOwned(key(&buf, i))
					} else {
						f.Add(key(&buf, i))
					}
				}
				b.ReportMetric(bitsPerKey(g, n), "bits/key")
			})
		}
	}
}

// BenchmarkAddHashesOwned is BenchmarkAdd through AddHashesOwned (plain
// writes, one goroutine owning every block), as a bulk load builds a
// layer, in batches of 4096 hashed keys; hashing is included. The base/
// cases add over a base filter holding n/2 other keys, as a Load into a
// layer that held keys does.
func BenchmarkAddHashesOwned(b *testing.B) {
	for _, withBase := range []bool{false, true} {
		for _, n := range benchSizes {
			name := sizeName(n)
			if withBase {
				name = "base/" + name
			}
			b.Run(name, func(b *testing.B) {
				g, _ := Plan(n, benchRate)
				f, _ := New(g, nil)
				var base *Filter
				var buf [8]byte
				if withBase {
					base, _ = New(g, nil)
					for i := range n / 2 {
						base.AddHash(Hash(key(&buf, ^i)))
					}
				}
				hs := make([]uint64, 0, 4096)
				b.ResetTimer()
				for i := range uint64(b.N) {
					if i%n == 0 && i > 0 { // full: start over with an empty filter
						f.AddHashesOwned(hs, 0, g.Blocks, base, nil)
						hs = hs[:0]
						b.StopTimer()
						clear(f.Words())
						b.StartTimer()
					}
					if hs = append(hs, Hash(key(&buf, i))); len(hs) == cap(hs) {
						f.AddHashesOwned(hs, 0, g.Blocks, base, nil)
						hs = hs[:0]
					}
				}
				f.AddHashesOwned(hs, 0, g.Blocks, base, nil)
				b.ReportMetric(bitsPerKey(g, n), "bits/key")
			})
		}
	}
}

func BenchmarkHas(b *testing.B) {
	for _, kind := range []string{"hit", "miss"} {
		for _, n := range benchSizes {
			b.Run(kind+"/"+sizeName(n), func(b *testing.B) {
				f := benchFilter(b, n)
				off := uint64(0)
				if kind == "miss" {
					off = absentBase
				}
				var buf [8]byte
				found := 0
				b.ResetTimer()
				for i := range uint64(b.N) {
					if f.Has(key(&buf, off+i%n)) {
						found++
					}
				}
				b.StopTimer()
				b.ReportMetric(bitsPerKey(f.Geometry(), n), "bits/key")
				if kind == "hit" && found != b.N {
					b.Fatalf("%d of %d present keys found", found, b.N)
				}
			})
		}
	}
}

// BenchmarkHasMany looks keys up in batches of 256; ns/op is per key.
func BenchmarkHasMany(b *testing.B) {
	const batch = 256
	for _, kind := range []string{"hit", "miss"} {
		for _, n := range benchSizes {
			b.Run(kind+"/"+sizeName(n), func(b *testing.B) {
				f := benchFilter(b, n)
				off := uint64(0)
				if kind == "miss" {
					off = absentBase
				}
				flat := make([]byte, 8*batch)
				keys := make([][]byte, batch)
				for j := range keys {
					keys[j] = flat[8*j : 8*j+8]
				}
				out := make([]bool, batch)
				found := 0
				b.ResetTimer()
				for i := uint64(0); i < uint64(b.N); i += batch {
					m := min(batch, uint64(b.N)-i)
					for j := range m {
						binary.LittleEndian.PutUint64(keys[j], off+(i+j)%n)
					}
					out = f.HasMany(keys[:m], out)
					for _, ok := range out {
						if ok {
							found++
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(bitsPerKey(f.Geometry(), n), "bits/key")
				if kind == "hit" && found != b.N {
					b.Fatalf("%d of %d present keys found", found, b.N)
				}
			})
		}
	}
}

// BenchmarkAddNewHashes is BenchmarkAdd through AddNewHashes, in batches
// of 1000 keys as the store's AddMany gives them; hashing is included.
func BenchmarkAddNewHashes(b *testing.B) {
	const batch = 1000
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			g, _ := Plan(n, benchRate)
			f, _ := New(g, nil)
			var buf [8]byte
			hs := make([]uint64, batch)
			added := make([]bool, batch)
			blocks := make([]uint64, batch)
			b.ResetTimer()
			for i := uint64(0); i < uint64(b.N); i += batch {
				m := min(batch, uint64(b.N)-i)
				if i%n+m > n { // full: start over with an empty filter
					b.StopTimer()
					clear(f.Words())
					f.SetCount(0)
					b.StartTimer()
				}
				for j := range m {
					hs[j] = Hash(key(&buf, i+j))
				}
				f.AddNewHashes(hs[:m], nil, added, blocks, n)
			}
			b.ReportMetric(bitsPerKey(g, n), "bits/key")
		})
	}
}
