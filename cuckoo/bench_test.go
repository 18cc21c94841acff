package cuckoo

import (
	"encoding/binary"
	"fmt"
	"testing"
)

var benchSizes = []uint64{1_000_000, 10_000_000}

// benchChains caches one filled chain per size: building 10^7 keys takes
// seconds and must not be repeated for every sub-benchmark.
var benchChains = map[uint64]*Chain{}

func filledChain(b *testing.B, size uint64) *Chain {
	if c, ok := benchChains[size]; ok {
		return c
	}
	c, err := NewChain(Config{Capacity: size}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var key [8]byte
	for i := uint64(0); i < size; i++ {
		binary.LittleEndian.PutUint64(key[:], i)
		if err := c.Add(key[:]); err != nil {
			b.Fatal(err)
		}
	}
	benchChains[size] = c
	return c
}

func bitsPerKey(c *Chain, size uint64) float64 {
	var words uint64
	for _, f := range c.Layers() {
		words += f.Geometry().Words()
	}
	return float64(64*words) / float64(size)
}

// BenchmarkAdd adds distinct keys to a chain of Capacity size (no
// expansion), starting a fresh chain, untimed, whenever size keys are in:
// with b.N < size it measures the first b.N inserts (low load).
func BenchmarkAdd(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", size), func(b *testing.B) {
			cfg := Config{Capacity: size}
			c, _ := NewChain(cfg, nil)
			var key [8]byte
			var in uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if in == size {
					b.StopTimer()
					c, _ = NewChain(cfg, nil)
					in = 0
					b.StartTimer()
				}
				binary.LittleEndian.PutUint64(key[:], uint64(i))
				if err := c.Add(key[:]); err != nil {
					b.Fatal(err)
				}
				in++
			}
			b.ReportMetric(bitsPerKey(c, size), "bits/key")
		})
	}
}

// BenchmarkHas looks up keys in a chain holding size keys: present keys
// (hit) and never-added keys (miss, reporting the false-positive rate).
func BenchmarkHas(b *testing.B) {
	for _, size := range benchSizes {
		for _, hit := range []bool{true, false} {
			name := fmt.Sprintf("miss/n=%d", size)
			if hit {
				name = fmt.Sprintf("hit/n=%d", size)
			}
			b.Run(name, func(b *testing.B) {
				c := filledChain(b, size)
				var key [8]byte
				var positives int
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					k := uint64(i) % size
					if !hit {
						k += size
					}
					binary.LittleEndian.PutUint64(key[:], k) // hashing spreads the accesses
					if c.Has(key[:]) {
						positives++
					} else if hit {
						b.Fatal("false negative")
					}
				}
				b.ReportMetric(bitsPerKey(c, size), "bits/key")
				if !hit {
					b.ReportMetric(float64(positives)/float64(b.N), "fpr")
				}
			})
		}
	}
}
