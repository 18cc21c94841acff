package fuzz

import (
	"testing"

	"github.com/filterstore/filterstore/internal/fuzzcorpus"
)

// The seed corpora: each target's seeds, built with prog so that they say
// what they exercise. TestCorpus checks that testdata/fuzz/<Target>/
// holds them.

// splitmix is a tiny deterministic generator for the filler ops of seeds
// (math/rand's streams are not promised to stay the same across Go
// releases, and the checked-in files must).
type splitmix uint64

func (s *splitmix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (s *splitmix) byte() byte { return byte(s.next()) }

func bloomFilterSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	add := func(p *prog, key byte) { p.u8(0, 1, key) } // op 0, pick (flag&7 != 0), key
	// A planned filter: named adds, lookups, a HasMany batch across the
	// 32-key boundary.
	p := &prog{}
	p.u8(0).u16(100).u8(2) // Plan(100, 0.01)
	for i := range 64 {
		add(p, byte(i))
		p.u8(2, byte(i*7)) // Has
	}
	p.u8(3, 69) // HasMany of 70 keys ...
	for i := range 70 {
		p.u8(byte(i))
	}
	p.u8(5) // ... into an out slice of length 5
	seeds["plan-100"] = *p
	// One block, k = 32: the block fills, most keys become false
	// positives, so Add must report "not new".
	p = &prog{}
	p.u8(1, 0, 31).u64(0x0123456789abcdef)
	for i := range 120 {
		add(p, byte(i))
	}
	seeds["one-block-k32"] = *p
	// Raw hashes steering blocks and positions, k = 1, 8 blocks.
	p = &prog{}
	p.u8(1, 7, 0).u64(0)
	r := splitmix(1)
	for range 100 {
		p.u8(1, 0).u64(r.next()) // op 1, raw
		p.u8(2, r.byte())
	}
	seeds["raw-k1"] = *p
	// A planned filter at a tight rate with a salt override.
	p = &prog{}
	p.u8(2).u16(1999).u8(4).u64(0xfeedface)
	for i := range 200 {
		add(p, byte(i))
	}
	seeds["plan-1999-1e-6-salted"] = *p
	return seeds
}

func bloomScalableSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	grow := func(name string, capByte, rate, exp, nonScaling byte, adds int) {
		p := &prog{}
		p.u8(capByte, rate, exp, nonScaling)
		r := splitmix(adds)
		for i := range adds {
			if i%5 == 4 {
				p.u8(1, 0).u64(r.next()) // a raw hash
			} else {
				p.u8(0, 1, byte(i))
			}
			if i%10 == 9 {
				p.u8(3, 40) // HasMany of 41 keys
				for j := range 41 {
					p.u8(byte(j * 3))
				}
				p.u8(0)
			}
		}
		seeds[name] = *p
	}
	grow("cap1-exp2-grows", 0, 2, 2, 0, 120)
	grow("cap4-exp1-equal-layers", 3, 1, 1, 0, 150)
	grow("cap8-nonscaling-full", 7, 2, 2, 1, 40)
	grow("cap32-default-exp-tight", 31, 4, 0, 0, 200)
	grow("cap2-exp4-loose", 1, 0, 4, 0, 150)
	return seeds
}

func bloomCountingSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	// One block of 128 counters, k = 32: counters collide and saturate;
	// adds, hot adds, deletes, round trips.
	p := &prog{}
	p.u8(1, 0, 31).u64(7)
	for i := range 30 {
		p.u8(0, byte(i))
	}
	p.u8(3, 5, 19) // key 5 added 20 more times: saturation
	for i := range 30 {
		p.u8(4, byte(i)) // delete each once
		p.u8(5, byte(i+30))
	}
	for range 10 {
		p.u8(4, 5)
	}
	seeds["one-block-saturate"] = *p
	// A planned filter: adds then deletes of the same keys.
	p = &prog{}
	p.u8(0).u16(100).u8(2)
	for i := range 100 {
		p.u8(1, byte(i))
	}
	for i := range 100 {
		p.u8(4, byte(i))
		p.u8(6, byte(i))
	}
	seeds["plan-add-delete"] = *p
	// Deletes of keys never added in a tiny filter: false-positive deletes
	// that corrupt other keys' counters (the key-level checks stop).
	p = &prog{}
	p.u8(1, 1, 3).u64(0)
	for i := range 40 {
		p.u8(0, byte(i))
	}
	for i := range 60 {
		p.u8(4, byte(100+i))
	}
	seeds["two-blocks-misuse"] = *p
	// Raw hashes and mixed ops.
	p = &prog{}
	p.u8(1, 3, 8).u64(1 << 63)
	r := splitmix(3)
	for range 150 {
		switch op := r.byte() % 7; op {
		case 2:
			p.u8(2).u64(r.next())
		case 3:
			p.u8(3, r.byte()%70, r.byte())
		default:
			p.u8(op, r.byte()%70)
		}
	}
	seeds["four-blocks-mixed"] = *p
	return seeds
}

func cuckooChainSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	// Header bytes: bucket size - 1, fingerprint bits - 4, capacity - 1,
	// MaxIterations - 1, expansion (plus 4: a first layer on the mix
	// derivation).
	mixed := func(name string, b, fp, capacity, iter, exp byte, ops int, seed uint64) {
		p := &prog{}
		p.u8(b-1, fp-4, capacity-1, iter-1, exp)
		r := splitmix(seed)
		for range ops {
			switch op := r.byte() % 7; op {
			case 2:
				p.u8(2).u64(r.next())
			case 4:
				p.u8(4, r.byte()%48, r.byte())
			case 5:
				p.u8(5, r.byte()%56) // also keys never added
			default:
				p.u8(op, r.byte()%48)
			}
		}
		seeds[name] = *p
	}
	mixed("b4-f16-cap8-exp2", 4, 16, 8, 50, 2, 250, 1)
	mixed("b2-f8-cap4-exp1-misfires", 2, 8, 4, 8, 1, 300, 2)
	mixed("b1-f4-cap16-single-layer", 1, 4, 16, 20, 0, 200, 3)
	mixed("b16-f4-cap64-exp3", 16, 4, 64, 64, 3, 250, 4)
	mixed("b6-f10-cap1-exp1", 6, 10, 1, 2, 1, 300, 5)
	mixed("b4-f16-cap8-exp2-mix-first", 4, 16, 8, 50, 2|4, 250, 6)
	mixed("b2-f12-cap4-exp1-mix-first", 2, 12, 4, 8, 1|4, 300, 7)
	mixed("b8-f8-cap16-single-mix", 8, 8, 16, 20, 0|4, 200, 8)
	// Fill a single layer until ErrFull, then delete everything.
	p := &prog{}
	p.u8(1, 4, 7, 9, 0) // b=2, f=8, capacity 8, MaxIterations 10, no expansion
	for i := range 40 {
		p.u8(0, byte(i))
	}
	for i := range 40 {
		p.u8(5, byte(i))
	}
	seeds["b2-f8-fill-then-empty"] = *p
	// AddNX until the layer is full (found by the fuzzer: Chain.AddNXHash
	// answers true beside ErrFull).
	seeds["addnx-full"] = []byte("&0000C1.B")
	return seeds
}

func bitmapSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	ops := func(name string, n uint16, sameSize byte, n2 uint16, extra byte, count int, seed uint64) {
		p := &prog{}
		p.u16(n - 1).u8(sameSize)
		if sameSize&7 == 0 {
			p.u16(n2 - 1)
		}
		p.u8(extra)
		r := splitmix(seed)
		for range count {
			op := r.byte() % 10
			p.u8(op)
			switch op {
			case 0, 1, 2, 3, 4:
				p.u16(uint16(r.next()))
			case 5:
				p.u16(uint16(r.next())).u16(uint16(r.next()))
			case 6, 7:
				p.u8(r.byte())
			}
		}
		seeds[name] = *p
	}
	ops("64-bits-one-word", 64, 1, 0, 1, 200, 1)
	ops("65-bits-tail", 65, 1, 0, 2, 200, 2)
	ops("1-bit", 1, 1, 0, 0, 100, 3)
	ops("1000-bits-and-or", 1000, 1, 0, 1, 300, 4)
	ops("sizes-differ", 100, 0, 200, 0, 150, 5)
	return seeds
}

func storeSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	// Header: mode, bloom capacity/rate/expansion/non-scaling, cuckoo
	// bucket size/fingerprint/capacity/iterations/expansion, counting
	// capacity/non-scaling, bitmap bits - 1.
	mixed := func(name string, hdr []byte, bits uint16, ops int, seed uint64) {
		p := &prog{}
		p.u8(hdr...).u16(bits - 1)
		r := splitmix(seed)
		for range ops {
			op := r.byte() % 18
			if op == 13 && r.byte()%4 != 0 {
				op = 0 // reopen rarely
			}
			p.u8(op)
			switch op {
			case 0, 2, 3, 4, 5, 6, 7, 8:
				p.u8(r.byte() % 60)
			case 1:
				p.u8(7)
				for range 8 {
					p.u8(r.byte() % 60)
				}
			case 9, 10, 11:
				p.u16(uint16(r.next()))
			case 14:
				p.u64(r.next())
			case 15:
				p.u8(20)
				for range 21 {
					p.u8(r.byte() % 60)
				}
			case 17:
				n := 1 + int(r.byte()%maxBatchOps)
				p.u8(byte(n - 1))
				for range n {
					kind := r.byte() % byte(numBatchOpKinds)
					p.u8(kind)
					if batchOpKind(kind) == fbBitmapSet || batchOpKind(kind) == fbBitmapClear {
						p.u16(uint16(r.next()))
					} else {
						p.u8(r.byte() % 60)
					}
				}
			}
		}
		seeds[name] = *p
	}
	// maxStoreOps operations each: the target runs no more.
	mixed("always-mixed", []byte{1, 0, 1, 1, 1, 2, 2, 0, 1, 2, 0, 1}, 4096, maxStoreOps, 1)
	mixed("interval-mixed", []byte{0, 0, 1, 1, 1, 2, 2, 0, 1, 2, 0, 1}, 4096, maxStoreOps, 2)
	mixed("interval-cuckoo-grows", []byte{0, 1, 0, 2, 1, 1, 1, 0, 1, 1, 1, 1}, 100, maxStoreOps, 3)
	mixed("always-nonscaling-full", []byte{1, 0, 0, 0, 0, 2, 3, 1, 2, 0, 0, 0}, 1, maxStoreOps, 4)
	mixed("interval-b1-f4-single", []byte{0, 2, 1, 0, 1, 0, 0, 0, 0, 0, 1, 1}, 5000, maxStoreOps, 5)
	return seeds
}

// TestCorpus checks that testdata/fuzz/<Target> holds every seed above as
// a corpus file, or writes them when FILTERSTORE_WRITE_CORPUS=1. Other
// files there (crashers the fuzzer found) are left alone.
func TestCorpus(t *testing.T) {
	for target, seeds := range map[string]map[string][]byte{
		"FuzzBloomFilterOps":   bloomFilterSeeds(),
		"FuzzBloomScalableOps": bloomScalableSeeds(),
		"FuzzBloomCountingOps": bloomCountingSeeds(),
		"FuzzCuckooChainOps":   cuckooChainSeeds(),
		"FuzzBitmapOps":        bitmapSeeds(),
		"FuzzStoreOps":         storeSeeds(),
	} {
		fuzzcorpus.Check(t, target, seeds)
	}
}
