package cuckoo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

func keyOf(i uint64) []byte { return binary.LittleEndian.AppendUint64(nil, i) }

// TestChainModel runs random Add/AddNX/Delete mixes against a model, across
// configurations with and without expansion. The model is exact at two
// levels:
//
//   - class level: a layer is a multiset of (fingerprint, bucket pair)
//     classes; the test locates the layer each add/delete changed and checks
//     after every step that every layer's CountHash equals the model's class
//     count for every key of the universe (so no false negative, Count
//     exact, nothing moved between classes, failed adds change nothing);
//   - key level: every key still in the model (added more often than
//     deleted) is Has==true with Count >= its multiplicity, after every
//     delete. A delete of x that hits a layer holding no copy of x (x falsely
//     matching there: the cross-layer hazard of Chain.DeleteHash) is
//     counted as misdirected and charged to a key of the same class in that
//     layer; it must never happen with one layer.
//
// Each configuration runs 20,000 operations, or 4,000 with -short: the
// test is one goroutine's, so the race detector (CI's -race -short stage)
// finds nothing in it that the full run without the detector does not,
// and it took 148 s of that stage's CPU there.
func TestChainModel(t *testing.T) {
	seed := testseed.Seed(t)
	ops := 20_000
	if testing.Short() {
		ops = 4_000
		if racedetect.Enabled { // one goroutine: the race detector finds nothing here
			ops = 1_500
		}
	}
	configs := []Config{
		{Capacity: 50, Expansion: 2},
		{Capacity: 30, BucketSize: 2, FingerprintBits: 8, Expansion: 1},
		{Capacity: 300, FingerprintBits: 12},                                 // no expansion: ErrFull
		{Capacity: 20, BucketSize: 8, FingerprintBits: 8, Expansion: 3},      // wide buckets
		{Capacity: 60, BucketSize: 4, FingerprintBits: 4, Expansion: 2},      // many fingerprint collisions
		{Capacity: 300, BucketSize: 4, FingerprintBits: 4},                   // collisions, one layer
		{Capacity: 25, BucketSize: 1, FingerprintBits: 16, Expansion: 2},     // b=1
		{Capacity: 300, BucketSize: 4, FingerprintBits: 6, MaxIterations: 3}, // short searches
	}
	for ci, cfg := range configs {
		t.Run(fmt.Sprintf("%d_b%d_f%d_x%d", ci, cfg.BucketSize, cfg.FingerprintBits, cfg.Expansion), func(t *testing.T) {
			runModel(t, cfg, seed+uint64(ci), ops, 400)
		})
	}
}

type class struct{ fp, lo, hi uint64 }

func classOf(g Geometry, h uint64) class {
	i1, fp, i2 := g.Locate(h)
	return class{fp, min(i1, i2), max(i1, i2)}
}

func runModel(t *testing.T, cfg Config, seed uint64, ops int, universe uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	c, err := NewChain(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([]uint64, universe)
	for k := range hashes {
		hashes[k] = Hash(keyOf(uint64(k)))
	}
	var (
		classes   []map[class]uint64 // per layer: class -> entries
		copies    = map[uint64][]uint64{}
		items     uint64
		fulls     int
		nxRefused int
		misdirect int
	)
	mult := func(k uint64) (n uint64) {
		for _, v := range copies[k] {
			n += v
		}
		return n
	}
	addCopy := func(k uint64, layer int, d int) {
		for len(copies[k]) <= layer {
			copies[k] = append(copies[k], 0)
		}
		copies[k][layer] += uint64(d)
	}
	perLayer := func(h uint64) []uint64 {
		var out []uint64
		for _, f := range c.Layers() {
			out = append(out, f.CountHash(h))
		}
		return out
	}
	// changed returns the one layer whose count of h moved by d.
	changed := func(op string, pre, post []uint64, d int) int {
		layer := -1
		for L := range post {
			var p uint64
			if L < len(pre) {
				p = pre[L]
			}
			switch {
			case post[L] == p:
			case post[L] == p+uint64(d) && layer < 0:
				layer = L
			default:
				t.Fatalf("%s: per-layer counts %v -> %v", op, pre, post)
			}
		}
		if layer < 0 {
			t.Fatalf("%s: no layer changed: %v -> %v", op, pre, post)
		}
		return layer
	}
	record := func(k uint64, layer, d int) {
		for len(classes) <= layer {
			classes = append(classes, map[class]uint64{})
		}
		classes[layer][classOf(c.Layers()[layer].Geometry(), hashes[k])] += uint64(d)
	}
	sweepKeys := func(op string) {
		for k := range copies {
			m := mult(k)
			if m > 0 && !c.HasHash(hashes[k]) {
				t.Fatalf("%s: false negative for key %d (multiplicity %d)", op, k, m)
			}
			if n := c.CountHash(hashes[k]); n < m {
				t.Fatalf("%s: Count(%d) = %d < multiplicity %d", op, k, n, m)
			}
		}
		if c.Items() != items {
			t.Fatalf("%s: Items = %d, model %d", op, c.Items(), items)
		}
	}
	sweepClasses := func(op string) {
		ls := c.Layers()
		for k, h := range hashes {
			for L, f := range ls {
				var want uint64
				if L < len(classes) {
					want = classes[L][classOf(f.Geometry(), h)]
				}
				if got := f.CountHash(h); got != want {
					t.Fatalf("%s: layer %d CountHash(key %d) = %d, model class count %d", op, L, k, got, want)
				}
			}
		}
	}
	var present []uint64
	for i := 0; i < ops; i++ {
		k := r.Uint64N(universe)
		h := hashes[k]
		p := r.IntN(100)
		delP := 25
		if items > 600 {
			delP = 60
		}
		pre := perLayer(h)
		switch {
		case p < delP:
			for len(present) > 0 {
				j := r.IntN(len(present))
				k = present[j]
				if mult(k) > 0 {
					break
				}
				present[j] = present[len(present)-1]
				present = present[:len(present)-1]
			}
			if len(present) == 0 {
				continue
			}
			h = hashes[k]
			pre = perLayer(h)
			op := fmt.Sprintf("op %d delete %d", i, k)
			if !c.DeleteHash(h) {
				t.Fatalf("%s: Delete = false with multiplicity %d", op, mult(k))
			}
			L := changed(op, pre, perLayer(h), -1)
			for M := L + 1; M < len(pre); M++ {
				if pre[M] > 0 {
					t.Fatalf("%s: deleted from layer %d, but newer layer %d matched", op, L, M)
				}
			}
			record(k, L, -1)
			items--
			if L < len(copies[k]) && copies[k][L] > 0 {
				addCopy(k, L, -1)
			} else {
				// x falsely matched in layer L: the entry removed belongs
				// to another key of the same class there.
				misdirect++
				if len(c.Layers()) == 1 {
					t.Fatalf("%s: misdirected delete with one layer", op)
				}
				cl := classOf(c.Layers()[L].Geometry(), h)
				found := false
				for y, cs := range copies {
					if L < len(cs) && cs[L] > 0 && classOf(c.Layers()[L].Geometry(), hashes[y]) == cl {
						addCopy(y, L, -1)
						found = true
						break
					}
				}
				if !found {
					t.Fatalf("%s: removed an entry of a class no key holds", op)
				}
			}
			sweepKeys(op)
		case p < delP+25:
			op := fmt.Sprintf("op %d addnx %d", i, k)
			had := c.HasHash(h)
			added, err := c.AddNXHash(h)
			if err != nil {
				if !errors.Is(err, ErrFull) || had {
					t.Fatalf("%s: %v", op, err)
				}
				fulls++
				break
			}
			if added == had {
				t.Fatalf("%s: AddNX = %v but Has was %v (multiplicity %d)", op, added, had, mult(k))
			}
			if !added {
				nxRefused++
				break
			}
			L := changed(op, pre, perLayer(h), 1)
			record(k, L, 1)
			addCopy(k, L, 1)
			items++
			present = append(present, k)
		default:
			op := fmt.Sprintf("op %d add %d", i, k)
			if err := c.AddHash(h); err != nil {
				if !errors.Is(err, ErrFull) {
					t.Fatalf("%s: %v", op, err)
				}
				fulls++
				sweepClasses(op + " (failed)") // a failed add changes nothing
				break
			}
			L := changed(op, pre, perLayer(h), 1)
			record(k, L, 1)
			addCopy(k, L, 1)
			items++
			present = append(present, k)
		}
		if i%25 == 0 {
			sweepKeys(fmt.Sprintf("op %d", i))
			sweepClasses(fmt.Sprintf("op %d", i))
		}
	}
	sweepKeys("end")
	sweepClasses("end")

	// A chain resumed over the same layers answers the same.
	r2, err := ResumeChain(cfg, c.Layers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c = r2
	sweepKeys("resumed")
	sweepClasses("resumed")
	t.Logf("layers %d, items %d, ErrFull %d, AddNX refused %d, misdirected deletes %d", len(c.Layers()), items, fulls, nxRefused, misdirect)
}

// TestChainExpansion: layers grow by Expansion with distinct salts, and a
// chain without expansion fills then refuses with ErrFull.
func TestChainExpansion(t *testing.T) {
	var allocated []int
	alloc := func(layer int, g Geometry) ([]uint64, error) {
		allocated = append(allocated, layer)
		return make([]uint64, g.Words()), nil
	}
	c, err := NewChain(Config{Capacity: 1000, Expansion: 2}, alloc)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 10_000; i++ {
		if err := c.AddHash(mix(i)); err != nil {
			t.Fatal(err)
		}
	}
	ls := c.Layers()
	if len(ls) < 3 || len(allocated) != len(ls) {
		t.Fatalf("%d layers, allocated %v", len(ls), allocated)
	}
	for i, f := range ls {
		capacity, g, _ := LayerParams(c.Config(), i)
		if f.Geometry() != g || capacity != 1000<<i || g.Salt != LayerSalt(i) {
			t.Errorf("layer %d: geometry %+v, want %+v (capacity %d)", i, f.Geometry(), g, capacity)
		}
		t.Logf("layer %d: capacity %d, buckets %d, items %d, load %.3f", i, capacity, g.Buckets, f.Count(), f.Occupancy())
	}
	for i := uint64(0); i < 10_000; i++ {
		if !c.HasHash(mix(i)) {
			t.Fatalf("miss %d", i)
		}
	}

	n, err := NewChain(Config{Capacity: 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var added uint64
	for ; ; added++ {
		if err := n.AddHash(mix(added)); err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	if len(n.Layers()) != 1 || added < 1000 {
		t.Fatalf("no-expansion chain: %d layers, %d added", len(n.Layers()), added)
	}
	t.Logf("no-expansion chain of Capacity 1000 took %d before ErrFull", added)
}

// TestResumeChainMixLayers: a chain resumed over layers on the mix
// derivation (planned by a build before DeriveMul) keeps them on it and
// finds their keys, takes deletes and adds there, and grows new layers on
// the mul derivation. A layer whose geometry differs otherwise is still
// refused.
func TestResumeChainMixLayers(t *testing.T) {
	cfg := Config{Capacity: 200, Expansion: 2}
	var layers []*Filter
	for i := range 2 {
		_, g, err := LayerParams(cfg, i)
		if err != nil {
			t.Fatal(err)
		}
		g.Derivation = DeriveMix
		f, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, f)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%d", i)) }
	for i := range 300 { // the first layer's capacity, then the second's
		if err := layers[min(i/200, 1)].Insert(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ResumeChain(cfg, layers, nil)
	if err != nil {
		t.Fatalf("ResumeChain over mix layers: %v", err)
	}
	for i := range 300 {
		if !c.Has(key(i)) {
			t.Fatalf("key %d missing after resume", i)
		}
	}
	if !c.Delete(key(7)) {
		t.Fatal("Delete of a key on a mix layer found nothing")
	}
	for i := 300; i < 1500; i++ { // past the second layer's capacity: a third layer
		if err := c.Add(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	ls := c.Layers()
	if len(ls) < 3 || ls[0].Geometry().Derivation != DeriveMix || ls[1].Geometry().Derivation != DeriveMix || ls[2].Geometry().Derivation != DeriveLocal {
		t.Fatalf("%d layers, derivations %v", len(ls), []Derivation{ls[0].Geometry().Derivation, ls[1].Geometry().Derivation})
	}
	for i := range 1500 {
		if i != 7 && !c.Has(key(i)) {
			t.Fatalf("key %d missing after growth", i)
		}
	}
	g := ls[0].Geometry()
	g.Salt++
	other, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ResumeChain(cfg, []*Filter{other}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ResumeChain over a layer with another salt: %v, want ErrInvalid", err)
	}
}

// TestChainSmallMaxIterationsGrows: a chain whose MaxIterations is 1 or 2
// (its inserts give up on short displacement paths, so a layer fails
// well below half full) expands when a distinct key finds no slot, and
// every key added is found. The chain used to refuse the
// distinct key with ErrFull ("too many copies of one item") at about 40%
// of its first layer.
func TestChainSmallMaxIterationsGrows(t *testing.T) {
	r := testseed.New(t)
	for _, c := range []struct{ b, iter int }{{1, 1}, {2, 1}, {2, 2}} {
		cfg := Config{Capacity: 1000, BucketSize: c.b, FingerprintBits: 16, MaxIterations: c.iter, Expansion: 1}
		ch, err := NewChain(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs := make([]uint64, 3000)
		for i := range hs {
			hs[i] = r.Uint64()
		}
		for i, h := range hs {
			if err := ch.AddHash(h); err != nil {
				t.Fatalf("b=%d iter=%d: add of distinct key %d: %v", c.b, c.iter, i, err)
			}
		}
		for i, h := range hs {
			if !ch.HasHash(h) {
				t.Fatalf("b=%d iter=%d: key %d absent", c.b, c.iter, i)
			}
		}
	}
}
