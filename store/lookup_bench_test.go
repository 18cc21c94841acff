package store

// Lookup benchmarks through the store's mapped files: the path #9's
// fault-proofing must not slow down. Hit and miss lookups on filters of
// lookupN keys, run with
//
//	go test -run '^$' -bench 'Lookup' -count 5 ./store/

import (
	"iter"
	"testing"
)

const lookupN = 1 << 20

// lookupStore builds one store with a Bloom, a cuckoo and a counting filter
// of lookupN keys (keys 0..lookupN-1) and a bitmap with every other bit set.
func lookupStore(b *testing.B) (*Store, *Bloom, *Cuckoo, *Counting, *Bitmap) {
	return lookupStoreWith(b, false)
}

// lookupStoreWith is lookupStore, with Options.GuardLookups set to guard.
func lookupStoreWith(b *testing.B, guard bool) (*Store, *Bloom, *Cuckoo, *Counting, *Bitmap) {
	b.Helper()
	s, err := Open(b.TempDir(), &Options{CheckpointEvery: -1, SmallPages: *smallPages, GuardLookups: guard})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	bf, err := s.CreateBloom("b", BloomConfig{Capacity: lookupN, ErrorRate: 0.01, NonScaling: true})
	if err != nil {
		b.Fatal(err)
	}
	cf, err := s.CreateCuckoo("c", CuckooConfig{Capacity: lookupN})
	if err != nil {
		b.Fatal(err)
	}
	nf, err := s.CreateCounting("n", BloomConfig{Capacity: lookupN})
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range []func() error{
		func() error { return bf.Load(benchLoadKeys(0, lookupN)) },
		func() error { return cf.Load(benchLoadKeys(0, lookupN)) },
		func() error { return nf.Load(benchLoadKeys(0, lookupN)) },
	} {
		if err := l(); err != nil {
			b.Fatal(err)
		}
	}
	bm, err := s.CreateBitmap("m", 1<<16)
	if err != nil {
		b.Fatal(err)
	}
	for i := uint64(0); i < 1<<16; i += 2 {
		if _, err := bm.Set(i); err != nil {
			b.Fatal(err)
		}
	}
	return s, bf, cf, nf, bm
}

func BenchmarkLookup(b *testing.B) {
	_, bf, cf, nf, bm := lookupStore(b)
	hits := make([]uint64, 4096)
	misses := make([]uint64, 4096)
	for i := range hits {
		hits[i] = Hash(benchKey(uint64(i) * 255 % lookupN))
		misses[i] = Hash(benchKey(lookupN + uint64(i)))
	}
	run := func(name string, hs []uint64, fn func(h uint64) bool, want bool) {
		b.Run(name, func(b *testing.B) {
			n := 0
			for i := 0; i < b.N; i++ {
				if fn(hs[i&4095]) == want {
					n++
				}
			}
			if want && n != b.N {
				b.Fatalf("%d of %d hits", b.N-n, b.N)
			}
		})
	}
	run("bloom/hit", hits, bf.HasHash, true)
	run("bloom/miss", misses, bf.HasHash, false)
	run("cuckoo/hit", hits, cf.HasHash, true)
	run("cuckoo/miss", misses, cf.HasHash, false)
	run("counting/hit", hits, nf.HasHash, true)
	run("counting/miss", misses, nf.HasHash, false)
	b.Run("bitmap/get", func(b *testing.B) {
		n := 0
		for i := 0; i < b.N; i++ {
			if bm.Get(uint64(i) & 0xffff) {
				n++
			}
		}
		_ = n
	})
	b.Run("bloom/hasmany-1024", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			off := (i * 1024) & 4095
			bf.HasManyHash(misses[off : off+1024])
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1024), "ns/key")
	})
}

// BenchmarkLookupGuarded is BenchmarkLookup's single lookups on two
// stores built alike, one with Options.GuardLookups (guarded) and one
// without (plain), each case's two runs side by side: what the option
// costs a lookup. Run with -count 5 or more and compare the pairs.
func BenchmarkLookupGuarded(b *testing.B) {
	type lookups struct {
		bloom, cuckoo, counting func(h uint64) bool
		bitmap                  func(off uint64) bool
	}
	var by [2]lookups
	for i, guard := range []bool{false, true} {
		_, bf, cf, nf, bm := lookupStoreWith(b, guard)
		by[i] = lookups{bf.HasHash, cf.HasHash, nf.HasHash, bm.Get}
	}
	hits := make([]uint64, 4096)
	misses := make([]uint64, 4096)
	for i := range hits {
		hits[i] = Hash(benchKey(uint64(i) * 255 % lookupN))
		misses[i] = Hash(benchKey(lookupN + uint64(i)))
	}
	for _, c := range []struct {
		name string
		hs   []uint64 // nil: bitmap offsets
		hit  bool     // every lookup must answer true
		fn   func(l lookups) func(h uint64) bool
	}{
		{"bloom/hit", hits, true, func(l lookups) func(uint64) bool { return l.bloom }},
		{"bloom/miss", misses, false, func(l lookups) func(uint64) bool { return l.bloom }},
		{"cuckoo/hit", hits, true, func(l lookups) func(uint64) bool { return l.cuckoo }},
		{"cuckoo/miss", misses, false, func(l lookups) func(uint64) bool { return l.cuckoo }},
		{"counting/hit", hits, true, func(l lookups) func(uint64) bool { return l.counting }},
		{"counting/miss", misses, false, func(l lookups) func(uint64) bool { return l.counting }},
		{"bitmap/get", nil, false, func(l lookups) func(uint64) bool { return l.bitmap }},
	} {
		for i, mode := range []string{"plain", "guarded"} {
			fn := c.fn(by[i])
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				n := 0
				for j := 0; j < b.N; j++ {
					h := uint64(j) & 0xffff // the bitmap's offset
					if c.hs != nil {
						h = c.hs[j&4095]
					}
					if fn(h) {
						n++
					}
				}
				if c.hit && n != b.N {
					b.Fatalf("%d of %d hits", b.N-n, b.N)
				}
			})
		}
	}
}

func benchLoadKeys(start, n uint64) iter.Seq2[[]byte, error] { return Keys(benchKeys(start, n)) }

// BenchmarkLookupParallel is BenchmarkLookup's Bloom and cuckoo lookups
// and a Bloom HasManyHashInto of 1024 keys from GOMAXPROCS goroutines at
// once (b.RunParallel): run with -test.cpu 1,2,... for the scaling with
// goroutines. ns/op is wall time per lookup over all goroutines.
func BenchmarkLookupParallel(b *testing.B) {
	_, bf, cf, _, _ := lookupStore(b)
	hits := make([]uint64, 4096)
	misses := make([]uint64, 4096)
	for i := range hits {
		hits[i] = Hash(benchKey(uint64(i) * 255 % lookupN))
		misses[i] = Hash(benchKey(lookupN + uint64(i)))
	}
	run := func(name string, hs []uint64, fn func(h uint64) bool, want bool) {
		b.Run(name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				i, wrong := 0, 0
				for pb.Next() {
					if fn(hs[i&4095]) != want {
						wrong++
					}
					i++
				}
				if want && wrong != 0 {
					b.Errorf("%d false negatives", wrong)
				}
			})
		})
	}
	run("bloom/hit", hits, bf.HasHash, true)
	run("bloom/miss", misses, bf.HasHash, false)
	run("cuckoo/hit", hits, cf.HasHash, true)
	run("cuckoo/miss", misses, cf.HasHash, false)
	b.Run("bloom/hasmany-1024", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			dst := make([]bool, 1024)
			i := 0
			for pb.Next() {
				off := (i * 1024) & 4095
				bf.HasManyHashInto(dst, misses[off:off+1024])
				i++
			}
		})
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1024), "ns/key")
	})
}
