package cuckoo

import (
	"encoding/binary"
	"testing"
)

// BenchmarkDerivation times both derivations on a 1e5-key filter (b=4,
// f=16: 222 KB, in the caches, so the arithmetic shows rather than
// memory): Geometry.Locate alone, HasHash of added keys, and a fill of an
// empty filter to 90% of its slots (ns/insert).
func BenchmarkDerivation(b *testing.B) {
	for _, d := range []Derivation{DeriveMix, DeriveMul, DeriveLocal} {
		g, _ := Plan(100000, 4, 16)
		g.Derivation = d
		b.Run("locate/"+d.String(), func(b *testing.B) {
			var s uint64
			h := uint64(12345)
			for i := 0; i < b.N; i++ {
				i1, fp, i2 := g.Locate(h)
				s += i1 ^ fp ^ i2
				h += 0x9e3779b97f4a7c15
			}
			derivSink = s
		})
		f, _ := New(g, nil)
		var key [16]byte
		for i := uint64(0); i < 100000; i++ {
			binary.LittleEndian.PutUint64(key[:], i*0x9e3779b97f4a7c15)
			f.Insert(key[:])
		}
		hs := make([]uint64, 1<<16)
		for i := range hs {
			binary.LittleEndian.PutUint64(key[:], uint64(i)*0x9e3779b97f4a7c15)
			hs[i] = Hash(key[:])
		}
		b.Run("hashash-1e5/"+d.String(), func(b *testing.B) {
			n := 0
			for i := 0; i < b.N; i++ {
				if f.HasHash(hs[i&(1<<16-1)]) {
					n++
				}
			}
			derivSink = uint64(n)
		})
		b.Run("insert-fill-1e5/"+d.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				f, _ := New(g, nil)
				b.StartTimer()
				for j := uint64(0); j < 100000; j++ {
					binary.LittleEndian.PutUint64(key[:], j*0x9e3779b97f4a7c15)
					f.Insert(key[:])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100000, "ns/insert")
		})
	}
}

// derivSink keeps BenchmarkDerivation's results.
var derivSink uint64
