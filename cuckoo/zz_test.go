package cuckoo

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

var zzN = flag.Int("zz.n", 10_000_000, "")
var zzRounds = flag.Int("zz.rounds", 5, "")

const c1 = 0x9E3779B97F4A7C15
const c2 = 0xC2B2AE3D27D4EB4F

func (g Geometry) locateCheap(h uint64) (i1, fp, i2 uint64) {
	x := h ^ g.Salt
	i1, _ = bits.Mul64(x, g.Buckets)
	fp, _ = bits.Mul64(x*c1, 1<<uint(g.FingerprintBits)-1)
	fp++
	hf, _ := bits.Mul64(fp*c2, g.Buckets)
	if hf >= i1 {
		i2 = hf - i1
	} else {
		i2 = hf + g.Buckets - i1
	}
	return
}

func (f *Filter) hasCheap(h uint64) bool {
	i1, fp, i2 := f.g.locateCheap(h)
	s := atomic.LoadUint64(f.seq)
	if f.match(f.load(i1), fp) || f.match(f.load(i2), fp) {
		return true
	}
	if f.stable(s) {
		return false
	}
	return f.hasRetry(f.own, i1, fp, i2)
}

func (f *Filter) zzPut(i1, fp, i2 uint64) bool {
	return f.putEmpty(f.own, i1, fp) || f.putEmpty(f.own, i2, fp)
}

func BenchmarkZZCheap(b *testing.B) {
	n := *zzN
	g, _ := Plan(uint64(n), 4, 16)
	fa, _ := New(g, nil)
	fb, _ := New(g, nil)
	r := rand.New(rand.NewPCG(1, 2))
	const nk = 1 << 20
	var hitA, hitB, miss [][16]byte
	for i := 0; i < n*85/100; i++ {
		var k [16]byte
		binary.LittleEndian.PutUint64(k[:], r.Uint64())
		binary.LittleEndian.PutUint64(k[8:], r.Uint64())
		h := Hash(k[:])
		if fa.zzPut(fa.g.Locate(h)) && len(hitA) < nk {
			hitA = append(hitA, k)
		}
		if fb.zzPut(fb.g.locateCheap(h)) && len(hitB) < nk {
			hitB = append(hitB, k)
		}
	}
	for range nk {
		var k [16]byte
		binary.LittleEndian.PutUint64(k[:], r.Uint64())
		binary.LittleEndian.PutUint64(k[8:], r.Uint64())
		miss = append(miss, k)
	}
	fpA, fpB := 0, 0
	for _, k := range miss {
		if fa.Has(k[:]) {
			fpA++
		}
		if fb.hasCheap(Hash(k[:])) {
			fpB++
		}
	}
	b.Logf("hits %d %d, fpr cur %.5f cheap %.5f", len(hitA), len(hitB), float64(fpA)/nk, float64(fpB)/nk)
	hitA, hitB = hitA[:1<<(bits.Len(uint(len(hitA)))-1)], hitB[:1<<(bits.Len(uint(len(hitB)))-1)]
	for round := 0; round < *zzRounds; round++ {
		for _, set := range []string{"hit", "miss"} {
			for _, v := range []string{"cur", "cheap"} {
				keys := miss
				has := fa.HasHash
				if v == "cheap" {
					has = fb.hasCheap
				}
				if set == "hit" {
					keys = hitA
					if v == "cheap" {
						keys = hitB
					}
				}
				mask := len(keys) - 1
				b.Run(fmt.Sprintf("%s/%s/r%d", set, v, round), func(b *testing.B) {
					found := 0
					for i := 0; i < b.N; i++ {
						if has(Hash(keys[i&mask][:])) {
							found++
						}
					}
					if set == "hit" && found != b.N {
						b.Fatal("missing")
					}
				})
			}
		}
	}
}
