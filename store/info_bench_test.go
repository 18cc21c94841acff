package store

import (
	"fmt"
	"testing"
)

// BenchmarkInfo measures Info and List on one Bloom filter of each
// capacity (1e5: 120 KB of data; 1e7: 12 MB). Both answer from counts
// kept in memory, so ns/op must not grow with the capacity. Fill, which
// reads every data word, is measured beside them and grows with it. Run
// with
//
//	go test -run '^$' -bench 'Info' -count 5 ./store/
func BenchmarkInfo(b *testing.B) {
	for _, n := range []uint64{1e5, 1e7} {
		s, err := Open(b.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
		if err != nil {
			b.Fatal(err)
		}
		f, err := s.CreateBloom("info", BloomConfig{Capacity: n, ErrorRate: 0.01, NonScaling: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.AddMany(benchKeyBatch(0, 1000)); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Info/capacity=%.0e", float64(n)), func(b *testing.B) {
			for b.Loop() {
				if _, err := f.Info(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("List/capacity=%.0e", float64(n)), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.List(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("Fill/capacity=%.0e", float64(n)), func(b *testing.B) {
			for b.Loop() {
				if _, err := f.Fill(); err != nil {
					b.Fatal(err)
				}
			}
		})
		s.Close()
	}
}

// benchKeyBatch returns keys start..start+n-1, each its own slice.
func benchKeyBatch(start, n uint64) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = benchKey(start + uint64(i))
	}
	return keys
}
