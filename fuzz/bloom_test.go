package fuzz

import (
	"errors"
	"math"
	"math/bits"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/bloom"
)

// maxOps bounds the operations one input runs, whatever its length.
const maxOps = 300

// errorRates are the error rates an input chooses from.
var errorRates = []float64{0.5, 0.1, 0.01, 0.001, 1e-6}

// refBloom is the reference Bloom layer: the bit derivation of
// bloom.Geometry.Locate (the documented reference of the format) over plain
// words, written without the filter's fast paths.
type refBloom struct {
	g        bloom.Geometry
	words    []uint64
	count    uint64 // adds that changed a bit
	capacity uint64 // the count at which a Scalable layer is full
	pos      []uint16
}

func newRefBloom(g bloom.Geometry, capacity uint64) *refBloom {
	return &refBloom{g: g, words: make([]uint64, g.Words()), capacity: capacity}
}

func (r *refBloom) has(h uint64) bool {
	var blk uint64
	blk, r.pos = r.g.Locate(h, r.pos[:0])
	for _, p := range r.pos {
		if r.words[blk*bloom.BlockWords+uint64(p/64)]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// add sets h's bits and reports whether any changed.
func (r *refBloom) add(h uint64) bool {
	var blk uint64
	blk, r.pos = r.g.Locate(h, r.pos[:0])
	changed := false
	for _, p := range r.pos {
		w := &r.words[blk*bloom.BlockWords+uint64(p/64)]
		if *w&(1<<(p%64)) == 0 {
			*w |= 1 << (p % 64)
			changed = true
		}
	}
	if changed {
		r.count++
	}
	return changed
}

func (r *refBloom) fill() float64 {
	n := 0
	for _, w := range r.words {
		n += bits.OnesCount64(w)
	}
	return float64(n) / float64(r.g.Bits())
}

// readGeometry reads a geometry: planned by plan for a capacity and error
// rate from the input, or given directly (1..8 blocks, any k and salt), so
// that tiny filters with many collisions and every k are reached.
func readGeometry(in *input, plan func(uint64, float64) (bloom.Geometry, error)) (bloom.Geometry, error) {
	mode := in.u8()
	if mode&1 == 0 {
		g, err := plan(1+uint64(in.u16()%2000), errorRates[in.intn(len(errorRates))])
		if mode&2 != 0 {
			g.Salt = in.u64()
		}
		return g, err
	}
	return bloom.Geometry{Blocks: 1 + uint64(in.intn(8)), K: 1 + uint32(in.intn(bloom.MaxK)), Salt: in.u64(), Derivation: bloom.Derivation(mode >> 2 & 1)}, nil
}

// checkHasMany asks about n keys at once, reusing an out slice of the
// capacity the input picks, and compares with want.
func checkHasMany(t *testing.T, in *input, ks *keySpace, hasMany func([]uint64, []bool) []bool, hasManyKeys func([][]byte, []bool) []bool, want func(uint64) bool) {
	t.Helper()
	n := 1 + in.intn(70) // batches are 32 lookups: cross the boundary
	hs := make([]uint64, n)
	var named [][]byte
	for i := range hs {
		k := ks.pick(in)
		hs[i] = k.h
		if k.b != nil {
			named = append(named, k.b)
		}
	}
	out := make([]bool, in.intn(80))
	got := hasMany(hs, out)
	if len(got) != n {
		t.Fatalf("HasManyHash of %d keys returned %d answers", n, len(got))
	}
	for i, h := range hs {
		if got[i] != want(h) {
			t.Fatalf("HasManyHash answer %d (hash %#x) = %v, reference %v", i, h, got[i], want(h))
		}
	}
	got = hasManyKeys(named, nil)
	for i, b := range named {
		if got[i] != want(bloom.Hash(b)) {
			t.Fatalf("HasMany answer %d (%q) = %v, reference %v", i, b, got[i], want(bloom.Hash(b)))
		}
	}
}

// FuzzBloomFilterOps runs Add/Has/HasMany sequences on one bloom.Filter of
// a planned or arbitrary small geometry. Properties: no false negative for
// an added key; Add reports "new" exactly when some bit of the key was
// clear; Has, HasMany and the final words equal the reference bit
// derivation (refBloom); Count counts the adds that reported new; FillRatio
// matches the words.
func FuzzBloomFilterOps(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := newInput(data)
		g, err := readGeometry(in, bloom.Plan)
		if err != nil {
			if !errors.Is(err, bloom.ErrInvalid) {
				t.Fatalf("Plan: %v does not wrap ErrInvalid", err)
			}
			return
		}
		bf, err := bloom.New(g, nil)
		if err != nil {
			t.Fatalf("New(%+v): %v", g, err)
		}
		ref := newRefBloom(g, 0)
		ks := newKeySpace(64)
		added := map[uint64]bool{}
		for ops := 0; in.more() && ops < maxOps; ops++ {
			switch in.intn(4) {
			case 0, 1:
				var k key
				if in.u8()&7 == 0 {
					k = ks.raw(in)
				} else {
					k = ks.pick(in)
				}
				want := ref.add(k.h)
				var got bool
				if k.b != nil {
					got = bf.Add(k.b)
				} else {
					got = bf.AddHash(k.h)
				}
				if got != want {
					t.Fatalf("op %d: Add(%v) = %v, reference %v", ops, k, got, want)
				}
				added[k.h] = true
			case 2:
				k := ks.pick(in)
				if got, want := bf.HasHash(k.h), ref.has(k.h); got != want || (k.b != nil && bf.Has(k.b) != want) {
					t.Fatalf("op %d: HasHash(%v) = %v, reference %v", ops, k, got, want)
				}
			case 3:
				checkHasMany(t, in, ks, bf.HasManyHash, bf.HasMany, ref.has)
			}
			if bf.Count() != ref.count {
				t.Fatalf("op %d: Count() = %d, reference %d", ops, bf.Count(), ref.count)
			}
		}
		for h := range added {
			if !bf.HasHash(h) {
				t.Fatalf("false negative for added hash %#x", h)
			}
		}
		if !slices.Equal(bf.Words(), ref.words) {
			t.Fatalf("words differ from the reference derivation")
		}
		if got, want := bf.FillRatio(), ref.fill(); math.Abs(got-want) > 1e-12 {
			t.Fatalf("FillRatio() = %v, reference %v", got, want)
		}
	})
}

// maxScalableLayers bounds the layers a Scalable input may grow; an add
// that would grow beyond it, or make a layer of more than
// maxScalableBlocks blocks, is skipped (each layer halves the error rate,
// so a long chain of tiny layers would eventually ask for terabytes).
const (
	maxScalableLayers = 16
	maxScalableBlocks = 1 << 14
)

// FuzzBloomScalableOps runs Add/Has/HasMany sequences on a bloom.Scalable
// with a small first layer, so that it expands. Properties: no false
// negative; Add reports new exactly when no layer held the key; a layer is
// added exactly when the newest one holds its capacity, with the geometry
// LayerParams gives, through the Allocator; a NonScaling filter refuses
// with ErrFull instead; every layer's words and count equal the
// reference.
func FuzzBloomScalableOps(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := newInput(data)
		cfg := bloom.Config{Capacity: 1 + uint64(in.intn(32)), ErrorRate: errorRates[in.intn(len(errorRates))],
			Expansion: uint(in.intn(5)), NonScaling: in.u8()&1 == 1}
		var refs []*refBloom
		var allocs []bloom.Geometry
		alloc := func(layer int, g bloom.Geometry) ([]uint64, error) {
			if layer != len(allocs) {
				t.Fatalf("Allocator asked for layer %d after %d layers", layer, len(allocs))
			}
			allocs = append(allocs, g)
			return make([]uint64, g.Words()), nil
		}
		s, err := bloom.NewScalable(cfg, alloc)
		if err != nil {
			t.Fatalf("NewScalable(%+v): %v", cfg, err)
		}
		norm := s.Config()
		if norm.Expansion == 0 || (cfg.Expansion != 0 && norm.Expansion != cfg.Expansion) {
			t.Fatalf("Config() = %+v for %+v", norm, cfg)
		}
		grow := func() bool {
			capacity, _, g, err := bloom.LayerParams(norm, len(refs))
			if err != nil {
				t.Fatalf("LayerParams(%+v, %d): %v", norm, len(refs), err)
			}
			if len(refs) >= maxScalableLayers || g.Blocks > maxScalableBlocks {
				return false
			}
			refs = append(refs, newRefBloom(g, capacity))
			return true
		}
		grow()
		has := func(h uint64) bool {
			for _, r := range refs {
				if r.has(h) {
					return true
				}
			}
			return false
		}
		ks := newKeySpace(64)
		added := map[uint64]bool{}
		for ops := 0; in.more() && ops < maxOps; ops++ {
			switch in.intn(4) {
			case 0, 1:
				var k key
				if in.u8()&7 == 0 {
					k = ks.raw(in)
				} else {
					k = ks.pick(in)
				}
				var want bool
				var wantErr error
				switch last := refs[len(refs)-1]; {
				case has(k.h):
				case last.count < last.capacity:
					want = true
				case cfg.NonScaling:
					wantErr = bloom.ErrFull
				default:
					if !grow() {
						continue // the chain would grow too large: skip this add
					}
					want = true
				}
				if want {
					refs[len(refs)-1].add(k.h)
				}
				var got bool
				if k.b != nil {
					got, err = s.Add(k.b)
				} else {
					got, err = s.AddHash(k.h)
				}
				if got != want || !errors.Is(err, wantErr) || (err != nil) != (wantErr != nil) {
					t.Fatalf("op %d: Add(%v) = %v, %v; reference %v, %v", ops, k, got, err, want, wantErr)
				}
				if err == nil {
					added[k.h] = true
				}
			case 2:
				k := ks.pick(in)
				if got, want := s.HasHash(k.h), has(k.h); got != want || (k.b != nil && s.Has(k.b) != want) {
					t.Fatalf("op %d: HasHash(%v) = %v, reference %v", ops, k, got, want)
				}
			case 3:
				checkHasMany(t, in, ks, s.HasManyHash, s.HasMany, has)
			}
			layers := s.Layers()
			if len(layers) != len(refs) || len(allocs) != len(refs) {
				t.Fatalf("op %d: %d layers (%d allocated), reference %d", ops, len(layers), len(allocs), len(refs))
			}
			var total uint64
			for _, r := range refs {
				total += r.count
			}
			if s.Count() != total {
				t.Fatalf("op %d: Count() = %d, reference %d", ops, s.Count(), total)
			}
		}
		for h := range added {
			if !s.HasHash(h) {
				t.Fatalf("false negative for added hash %#x", h)
			}
		}
		for i, l := range s.Layers() {
			r := refs[i]
			if l.Geometry() != r.g || allocs[i] != r.g {
				t.Fatalf("layer %d: geometry %+v (allocated %+v), LayerParams %+v", i, l.Geometry(), allocs[i], r.g)
			}
			if l.Count() != r.count || !slices.Equal(l.Words(), r.words) {
				t.Fatalf("layer %d: count %d, reference %d, or words differ", i, l.Count(), r.count)
			}
		}
	})
}

// refCounting is the reference counting filter: one byte per 4-bit
// counter, positions from bloom.Geometry.LocateCounters.
type refCounting struct {
	g     bloom.Geometry
	ctr   []uint8
	items uint64
	pos   []uint16
}

func newRefCounting(g bloom.Geometry) *refCounting {
	return &refCounting{g: g, ctr: make([]uint8, g.Blocks*bloom.CountersPerBlock)}
}

func (r *refCounting) counters(h uint64) []uint8 {
	var blk uint64
	blk, r.pos = r.g.LocateCounters(h, r.pos[:0])
	return r.ctr[blk*bloom.CountersPerBlock : (blk+1)*bloom.CountersPerBlock]
}

func (r *refCounting) add(h uint64) {
	c := r.counters(h)
	for _, p := range r.pos {
		if c[p] < bloom.MaxCounter {
			c[p]++
		}
	}
	r.items++
}

// del decrements h's counters once per occurrence, skipping saturated
// ones, unless one would go below zero.
func (r *refCounting) del(h uint64) bool {
	c := r.counters(h)
	tmp := slices.Clone(c)
	for _, p := range r.pos {
		switch tmp[p] {
		case 0:
			return false
		case bloom.MaxCounter:
		default:
			tmp[p]--
		}
	}
	copy(c, tmp)
	if r.items > 0 {
		r.items--
	}
	return true
}

func (r *refCounting) count(h uint64) uint64 {
	c := r.counters(h)
	m := uint8(bloom.MaxCounter)
	for _, p := range r.pos {
		m = min(m, c[p])
	}
	return uint64(m)
}

// words packs the counters as the format lays them out.
func (r *refCounting) words() []uint64 {
	w := make([]uint64, r.g.Words())
	for i, c := range r.ctr {
		w[i/bloom.CountersPerWord] |= uint64(c) << (uint(i%bloom.CountersPerWord) * bloom.CounterBits)
	}
	return w
}

func (r *refCounting) fill() float64 {
	n := 0
	for _, c := range r.ctr {
		if c != 0 {
			n++
		}
	}
	return float64(n) / float64(len(r.ctr))
}

// FuzzBloomCountingOps runs Add/Delete/Count/Has sequences on a
// bloom.Counting of a planned or tiny geometry (1..8 blocks, so counters
// collide and saturate). Properties: Count, Has, Delete's answer, Items and
// the final words equal the reference counters (refCounting); Add followed
// by Delete restores unsaturated counters; and, as long as only added keys
// were deleted, no false negative and Count >= min(adds - deletes, 15) for
// every key (a successful delete of a key never added may corrupt others,
// as the package documents; the input may do it, and the key-level checks
// stop from then on).
func FuzzBloomCountingOps(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := newInput(data)
		g, err := readGeometry(in, bloom.PlanCounting)
		if err != nil {
			if !errors.Is(err, bloom.ErrInvalid) {
				t.Fatalf("PlanCounting: %v does not wrap ErrInvalid", err)
			}
			return
		}
		c, err := bloom.NewCounting(g, nil)
		if err != nil {
			t.Fatalf("NewCounting(%+v): %v", g, err)
		}
		ref := newRefCounting(g)
		ks := newKeySpace(64)
		model := map[uint64]int{} // adds - deletes per key hash
		misused := false          // a key not in the model was deleted
		check := func(ops int, k key) {
			t.Helper()
			want := ref.count(k.h)
			if got := c.CountHash(k.h); got != want {
				t.Fatalf("op %d: CountHash(%v) = %d, reference %d", ops, k, got, want)
			}
			if k.b != nil && (c.Count(k.b) != want || c.Has(k.b) != (want > 0)) {
				t.Fatalf("op %d: Count(%v) = %d, Has %v, reference %d", ops, k, c.Count(k.b), c.Has(k.b), want)
			}
			if c.HasHash(k.h) != (want > 0) {
				t.Fatalf("op %d: HasHash(%v) = %v with count %d", ops, k, c.HasHash(k.h), want)
			}
			if n := model[k.h]; !misused && n > 0 && want < uint64(min(n, bloom.MaxCounter)) {
				t.Fatalf("op %d: Count(%v) = %d after %d more adds than deletes", ops, k, want, n)
			}
		}
		add := func(k key) {
			ref.add(k.h)
			if k.b != nil {
				c.Add(k.b)
			} else {
				c.AddHash(k.h)
			}
			model[k.h]++
		}
		for ops := 0; in.more() && ops < maxOps; ops++ {
			var k key
			switch in.intn(7) {
			case 0, 1:
				k = ks.pick(in)
				add(k)
			case 2:
				k = ks.raw(in)
				add(k)
			case 3:
				k = ks.pick(in)
				for range 1 + in.intn(20) {
					add(k)
				}
			case 4:
				k = ks.pick(in)
				want := ref.del(k.h)
				var got bool
				if k.b != nil {
					got = c.Delete(k.b)
				} else {
					got = c.DeleteHash(k.h)
				}
				if got != want {
					t.Fatalf("op %d: Delete(%v) = %v, reference %v", ops, k, got, want)
				}
				if model[k.h] > 0 && !misused && !got {
					t.Fatalf("op %d: Delete(%v) of a key added %d more times than deleted found nothing", ops, k, model[k.h])
				}
				if got {
					if model[k.h] == 0 {
						misused = true
					} else {
						model[k.h]--
					}
				}
			case 5:
				// Add then Delete restores every counter the add did not
				// saturate, and Items.
				k = ks.pick(in)
				before, items := slices.Clone(c.Words()), c.Items()
				c.AddHash(k.h)
				if !c.DeleteHash(k.h) {
					t.Fatalf("op %d: Delete(%v) right after its Add found nothing", ops, k)
				}
				for i, w := range c.Words() {
					for j := uint(0); j < 64; j += bloom.CounterBits {
						old, v := before[i]>>j&bloom.MaxCounter, w>>j&bloom.MaxCounter
						if v != old && v != bloom.MaxCounter {
							t.Fatalf("op %d: Add then Delete of %v changed counter %d of word %d from %d to %d", ops, k, j/4, i, old, v)
						}
					}
				}
				if c.Items() != items {
					t.Fatalf("op %d: Add then Delete of %v changed Items from %d to %d", ops, k, items, c.Items())
				}
				ref.add(k.h)
				ref.del(k.h)
			case 6:
				k = ks.pick(in)
			}
			check(ops, k)
			if c.Items() != ref.items {
				t.Fatalf("op %d: Items() = %d, reference %d", ops, c.Items(), ref.items)
			}
		}
		for _, k := range ks.keys {
			check(-1, k)
		}
		if !slices.Equal(c.Words(), ref.words()) {
			t.Fatalf("words differ from the reference counters")
		}
		if got, want := c.FillRatio(), ref.fill(); math.Abs(got-want) > 1e-12 {
			t.Fatalf("FillRatio() = %v, reference %v", got, want)
		}
	})
}
