package fuzz

import (
	"errors"
	"fmt"
	"testing"

	"github.com/filterstore/filterstore/cuckoo"
)

// The cuckoo model works on classes. Within one layer an entry is only a
// fingerprint in a bucket, and since the alternate bucket depends only on
// the bucket and the fingerprint, every entry belongs to exactly one class
// (its bucket pair and fingerprint), and CountHash(h) of a layer is exactly
// the number of entries in h's class: kicks move entries between the two
// buckets of their class and never change these numbers. So the model keeps,
// per layer, how many entries each class holds, and can predict exactly
// Has, Count, which layer a Delete hits (the newest whose class count for
// the key is positive, as Chain.DeleteHash documents) and Delete's answer.
// Which layer an Add lands in depends on bucket contents: the test observes
// it (the layer whose count for the key grew) and checks that exactly one
// layer gained exactly one entry.
//
// Keys own the entries their adds made. A delete removes one entry of the
// key's class in the layer it hits: the key's own if it owns one there,
// otherwise another key's (a "misfire": in a chain, the key's fingerprint
// can match another key's entry in a newer layer by a false positive; see
// cuckoo/doc.go). The model follows that, so the key-level properties (no
// false negative for a key owning an entry, Count >= entries owned) stay
// exact through misfires, and the fuzzer may delete any key.

// cuckooClass identifies the class of an entry in one layer.
type cuckooClass struct{ lo, hi, fp uint64 }

type classEntry struct {
	n      uint64
	rep    uint64         // a hash of this class, to ask the filter about it
	owners map[uint64]int // key hash -> entries of this class it owns
}

// classLayer is the model of one layer.
type classLayer struct {
	g       cuckoo.Geometry
	classes map[cuckooClass]*classEntry
	total   uint64
}

func (l *classLayer) classOf(h uint64) cuckooClass {
	i1, fp, i2 := l.g.Locate(h)
	return cuckooClass{min(i1, i2), max(i1, i2), fp}
}

func (l *classLayer) count(h uint64) uint64 {
	if e := l.classes[l.classOf(h)]; e != nil {
		return e.n
	}
	return 0
}

// cuckooModel is the model of a chain of layers.
type cuckooModel struct {
	layers   []*classLayer
	owned    map[uint64]int // key hash -> entries owned over all layers
	misfires int            // deletes of an owning key that hit another's entry
}

func newCuckooModel() *cuckooModel { return &cuckooModel{owned: map[uint64]int{}} }

func (m *cuckooModel) grow(g cuckoo.Geometry) {
	m.layers = append(m.layers, &classLayer{g: g, classes: map[cuckooClass]*classEntry{}})
}

func (m *cuckooModel) has(h uint64) bool { return m.hitLayer(h) >= 0 }

func (m *cuckooModel) count(h uint64) uint64 {
	var n uint64
	for _, l := range m.layers {
		n += l.count(h)
	}
	return n
}

func (m *cuckooModel) total() uint64 {
	var n uint64
	for _, l := range m.layers {
		n += l.total
	}
	return n
}

// hitLayer returns the layer a delete of h hits: the newest whose class
// of h is not empty; -1 if none.
func (m *cuckooModel) hitLayer(h uint64) int {
	for i := len(m.layers) - 1; i >= 0; i-- {
		if m.layers[i].count(h) > 0 {
			return i
		}
	}
	return -1
}

func (m *cuckooModel) addAt(layer int, h uint64) {
	l := m.layers[layer]
	c := l.classOf(h)
	e := l.classes[c]
	if e == nil {
		e = &classEntry{rep: h, owners: map[uint64]int{}}
		l.classes[c] = e
	}
	e.n++
	e.owners[h]++
	l.total++
	m.owned[h]++
}

// deleteAt removes one entry of h's class from layer and returns the key
// whose entry it was.
func (m *cuckooModel) deleteAt(layer int, h uint64) uint64 {
	l := m.layers[layer]
	c := l.classOf(h)
	e := l.classes[c]
	victim := h
	if e.owners[h] == 0 {
		// Another key's entry goes: a misfire if h owns an entry in an
		// older layer, a misuse (deleting a key never added) otherwise.
		// Which owner loses one is arbitrary (the entries are
		// indistinguishable); take the smallest hash.
		if m.owned[h] > 0 {
			m.misfires++
		}
		first := true
		for o, n := range e.owners {
			if n > 0 && (first || o < victim) {
				victim, first = o, false
			}
		}
	}
	e.owners[victim]--
	if e.owners[victim] == 0 {
		delete(e.owners, victim)
	}
	if e.n--; e.n == 0 {
		delete(l.classes, c)
	}
	l.total--
	if m.owned[victim]--; m.owned[victim] == 0 {
		delete(m.owned, victim)
	}
	return victim
}

// checkCuckooLayer compares a layer's words with the model: every class
// holds its count of entries, the non-empty slots are as many as the
// model's entries, and bits above BucketSize*FingerprintBits are zero.
func checkCuckooLayer(l *classLayer, words []uint64, countHash func(uint64) uint64) error {
	g := l.g
	used := uint64(0)
	mask := uint64(1)<<uint(g.FingerprintBits) - 1
	width := uint(g.BucketSize * g.FingerprintBits)
	for i, w := range words {
		if width < 64 && w>>width != 0 {
			return fmt.Errorf("bucket %d = %#x has bits above slot %d set", i, w, g.BucketSize)
		}
		for j := 0; j < g.BucketSize; j++ {
			if w>>(uint(j*g.FingerprintBits))&mask != 0 {
				used++
			}
		}
	}
	if used != l.total {
		return fmt.Errorf("%d slots in use, model %d entries", used, l.total)
	}
	for c, e := range l.classes {
		if got := countHash(e.rep); got != e.n {
			return fmt.Errorf("class %+v holds %d entries, model %d", c, got, e.n)
		}
	}
	return nil
}

// readCuckooConfig reads a small chain configuration: any valid bucket
// size and fingerprint width, a capacity of 1..64, a short MaxIterations so
// that layers fill up, and an expansion of 0 (a single layer) to 3.
//
// mix (bit 2 of the expansion byte, which intn(4) left unused, so older
// seeds read the same configuration) asks for a first layer on the mix
// derivation, as a chain made before cuckoo.DeriveMul has.
func readCuckooConfig(in *input) (cfg cuckoo.Config, mix bool) {
	b := 1 + in.intn(cuckoo.MaxBucketSize)
	fp := cuckoo.MinFingerprintBits + in.intn(cuckoo.MaxFingerprintBits-cuckoo.MinFingerprintBits+1)
	if b*fp > 64 {
		fp = max(64/b, cuckoo.MinFingerprintBits)
		b = 64 / fp
	}
	capacity, iters, e := 1+uint64(in.intn(64)), 1+in.intn(64), in.u8()
	return cuckoo.Config{Capacity: capacity, BucketSize: b, FingerprintBits: fp,
		MaxIterations: iters, Expansion: uint(e % 4)}, e&4 != 0
}

// FuzzCuckooChainOps runs Add/AddNX/Delete/Has/Count sequences on a
// cuckoo.Chain of a small capacity, any bucket size and fingerprint width
// and expansion 0..3, against the class model above. Properties: Has,
// Count, Items, each layer's count, Delete's answer and the layer it hits
// equal the model; an add lands in exactly one layer or fails with ErrFull
// changing nothing; a layer is added only with Expansion > 0, one at a
// time, and below half the newest's capacity only for a key whose buckets
// there do not hold nothing but its own copies, with the geometry
// LayerParams gives; AddNX inserts exactly when Has is false; no false negative for a
// key owning an entry and Count >= its entries; at the end, every layer's
// words hold exactly the model's classes.
func FuzzCuckooChainOps(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := newInput(data)
		cfg, mix := readCuckooConfig(in)
		var first []*cuckoo.Filter
		if mix {
			// A chain whose first layer an older build planned: resumed
			// over it, it keeps the mix derivation there and grows
			// layers on the mul one.
			_, g, err := cuckoo.LayerParams(cfg, 0)
			if err != nil {
				t.Fatalf("LayerParams(%+v, 0): %v", cfg, err)
			}
			g.Derivation = cuckoo.DeriveMix
			f0, err := cuckoo.New(g, nil)
			if err != nil {
				t.Fatalf("New(%+v): %v", g, err)
			}
			first = []*cuckoo.Filter{f0}
		}
		c, err := cuckoo.ResumeChain(cfg, first, nil)
		if err != nil {
			t.Fatalf("ResumeChain(%+v, mix %v): %v", cfg, mix, err)
		}
		m := newCuckooModel()
		layerParams := func(i int) (uint64, cuckoo.Geometry) {
			capacity, g, err := cuckoo.LayerParams(cfg, i)
			if err != nil {
				t.Fatalf("LayerParams(%+v, %d): %v", cfg, i, err)
			}
			return capacity, g
		}
		// checkGrowth checks the layers an add of h (ops >= 0) left: a
		// chain grows by one layer at a time, and below half its capacity
		// only if h's buckets in the newest layer did not hold nothing but
		// copies of h (one key added many times grows nothing there).
		checkGrowth := func(ops int, ls []*cuckoo.Filter, h uint64) {
			t.Helper()
			for len(m.layers) < len(ls) {
				n := len(m.layers)
				if n > 0 {
					capacity, _ := layerParams(n - 1)
					i1, _, i2 := ls[n-1].Geometry().Locate(h)
					slots := uint64(cfg.BucketSize)
					if i1 != i2 {
						slots *= 2
					}
					copiesFill := m.layers[n-1].count(h) >= slots
					if cfg.Expansion == 0 || len(ls) != n+1 || (m.layers[n-1].total < capacity/2 && copiesFill) {
						t.Fatalf("op %d: chain grew from %d to %d layers (Expansion %d, newest holds %d of %d, %d copies of the key in its buckets)",
							ops, n, len(ls), cfg.Expansion, m.layers[n-1].total, capacity, m.layers[n-1].count(h))
					}
				}
				_, g := layerParams(n)
				if mix && n == 0 {
					g.Derivation = cuckoo.DeriveMix
				}
				if ls[n].Geometry() != g {
					t.Fatalf("op %d: layer %d has geometry %+v, LayerParams %+v", ops, n, ls[n].Geometry(), g)
				}
				m.grow(ls[n].Geometry())
			}
			if len(ls) < len(m.layers) {
				t.Fatalf("op %d: chain shrank from %d to %d layers", ops, len(m.layers), len(ls))
			}
		}
		checkGrowth(-1, c.Layers(), 0)
		ks := newKeySpace(48)
		add := func(ops int, k key, nx bool) {
			t.Helper()
			before := len(m.layers)
			if nx && m.has(k.h) {
				if ins, err := c.AddNXHash(k.h); ins || err != nil {
					t.Fatalf("op %d: AddNX(%v) of a present key = %v, %v", ops, k, ins, err)
				}
				return
			}
			var err error
			switch {
			case nx:
				var ins bool
				ins, err = c.AddNXHash(k.h)
				// An absent key is inserted exactly when there is no
				// error (the addnx-full seed once caught true with ErrFull).
				if ins != (err == nil) {
					t.Fatalf("op %d: AddNX(%v) of an absent key = %v, %v", ops, k, ins, err)
				}
			case k.b != nil:
				err = c.Add(k.b)
			default:
				err = c.AddHash(k.h)
			}
			ls := c.Layers()
			if err != nil {
				if !errors.Is(err, cuckoo.ErrFull) || len(ls) != before {
					t.Fatalf("op %d: Add(%v) failed with %v (layers %d -> %d), want ErrFull changing nothing", ops, k, err, before, len(ls))
				}
				for i, l := range ls {
					if l.CountHash(k.h) != m.layers[i].count(k.h) || l.Count() != m.layers[i].total {
						t.Fatalf("op %d: failed Add(%v) changed layer %d", ops, k, i)
					}
				}
				return
			}
			checkGrowth(ops, ls, k.h)
			landed := -1
			for i, l := range ls {
				got, want := l.CountHash(k.h), m.layers[i].count(k.h)
				switch {
				case got == want:
				case got == want+1 && landed < 0:
					landed = i
				default:
					t.Fatalf("op %d: Add(%v): layer %d holds %d entries of its class, had %d (landed in %d)", ops, k, i, got, want, landed)
				}
			}
			if landed < 0 || (len(ls) > before && landed != len(ls)-1) {
				t.Fatalf("op %d: Add(%v) landed in layer %d of %d (%d before)", ops, k, landed, len(ls), before)
			}
			m.addAt(landed, k.h)
		}
		for ops := 0; in.more() && ops < maxOps; ops++ {
			var k key
			switch in.intn(7) {
			case 0, 1:
				k = ks.pick(in)
				add(ops, k, false)
			case 2:
				k = ks.raw(in)
				add(ops, k, false)
			case 3:
				k = ks.pick(in)
				add(ops, k, true)
			case 4:
				k = ks.pick(in)
				for range 1 + in.intn(2*cfg.BucketSize+2) {
					add(ops, k, false)
				}
			case 5:
				k = ks.pick(in)
				hit := m.hitLayer(k.h)
				var got bool
				if k.b != nil {
					got = c.Delete(k.b)
				} else {
					got = c.DeleteHash(k.h)
				}
				if got != (hit >= 0) {
					t.Fatalf("op %d: Delete(%v) = %v, model hits layer %d", ops, k, got, hit)
				}
				if hit >= 0 {
					want := m.layers[hit].count(k.h) - 1
					if n := c.Layers()[hit].CountHash(k.h); n != want {
						t.Fatalf("op %d: Delete(%v) left %d entries of its class in layer %d, want %d", ops, k, n, hit, want)
					}
					m.deleteAt(hit, k.h)
				}
			case 6:
				k = ks.pick(in)
			}
			if got, want := c.CountHash(k.h), m.count(k.h); got != want || c.HasHash(k.h) != m.has(k.h) {
				t.Fatalf("op %d: Count(%v) = %d, Has %v; model %d, %v", ops, k, got, c.HasHash(k.h), want, m.has(k.h))
			}
			if k.b != nil && (c.Count(k.b) != m.count(k.h) || c.Has(k.b) != m.has(k.h)) {
				t.Fatalf("op %d: Count/Has by key of %v disagree with CountHash/HasHash", ops, k)
			}
			if n := m.owned[k.h]; n > 0 && (!c.HasHash(k.h) || c.CountHash(k.h) < uint64(n)) {
				t.Fatalf("op %d: %v owns %d entries, Count %d, Has %v", ops, k, n, c.CountHash(k.h), c.HasHash(k.h))
			}
			if c.Items() != m.total() {
				t.Fatalf("op %d: Items() = %d, model %d", ops, c.Items(), m.total())
			}
		}
		ls := c.Layers()
		if len(ls) != len(m.layers) {
			t.Fatalf("%d layers, model %d", len(ls), len(m.layers))
		}
		for i, l := range ls {
			if l.Count() != m.layers[i].total {
				t.Fatalf("layer %d: Count() = %d, model %d", i, l.Count(), m.layers[i].total)
			}
			if err := checkCuckooLayer(m.layers[i], l.Words(), l.CountHash); err != nil {
				t.Fatalf("layer %d of %d: %v", i, len(ls), err)
			}
		}
		for _, k := range ks.keys {
			if n := m.owned[k.h]; n > 0 && (!c.HasHash(k.h) || c.CountHash(k.h) < uint64(n)) {
				t.Fatalf("%v owns %d entries, Count %d, Has %v", k, n, c.CountHash(k.h), c.HasHash(k.h))
			}
		}
	})
}
