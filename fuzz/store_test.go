package fuzz

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/fuzzcorpus"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
)

// The work of one FuzzStoreOps input is bounded, so that CI's 10-second
// runs reach hundreds of inputs: under SyncAlways each mutation costs an
// fdatasync, and every checkpoint, reopen and filter creation or growth
// costs a bbolt catalog transaction (the catalog opens the bbolt file for
// each) and msyncs.
const (
	maxStoreOps         = 120 // operations per input
	maxStoreCheckpoints = 4   // explicit Checkpoint calls per input
	maxStoreReopens     = 3   // reopens the input asks for, counting the one halfway
)

// planCache memoizes the layer geometries the models take from
// bloom.LayerParams and bloom.PlanCounting: deterministic functions whose
// search costs as much as the store's file operations, called for every
// input with one of the few configurations readStoreWorld can choose.
var planCache sync.Map // planKey -> plan

type planKey struct {
	cfg      bloom.Config
	layer    int
	counting bool
}

type plan struct {
	capacity uint64
	g        bloom.Geometry
	err      error
}

func cachedPlan(k planKey) plan {
	if p, ok := planCache.Load(k); ok {
		return p.(plan)
	}
	var p plan
	if k.counting {
		p.g, p.err = bloom.PlanCounting(k.cfg.Capacity, k.cfg.ErrorRate)
	} else {
		p.capacity, _, p.g, p.err = bloom.LayerParams(k.cfg, k.layer)
	}
	planCache.Store(k, p)
	return p
}

// storeWorld is the state of one FuzzStoreOps input: the store, its four
// filters and their models.
type storeWorld struct {
	t    *testing.T
	dir  string
	opts store.Options
	s    *store.Store

	bloomCfg  store.BloomConfig
	bloomNorm bloom.Config
	bloomRefs []*refBloom

	cuckooCfg cuckoo.Config
	cuckoo    *cuckooModel

	countCfg  store.BloomConfig
	count     *refCounting
	countKeys map[uint64]int // adds - deletes per key hash
	misused   bool           // a key not in countKeys was deleted

	bits *refBitmap

	b *store.Bloom
	c *store.Cuckoo
	n *store.Counting
	m *store.Bitmap
}

func (w *storeWorld) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf(format, args...)
}

func (w *storeWorld) must(what string, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

// info returns f's Info, which must succeed with State "ok".
func (w *storeWorld) info(what string, f interface{ Info() (store.Info, error) }) store.Info {
	w.t.Helper()
	in, err := f.Info()
	if err != nil || in.State != "ok" {
		w.fatalf("%s Info: state %q (%s), %v", what, in.State, in.Reason, err)
	}
	return in
}

// readStoreWorld reads the durability mode and the four filter
// configurations, all small so that the Bloom filter scales, the cuckoo
// filter fills (and grows, with Expansion > 0) and counters saturate.
func readStoreWorld(t *testing.T, in *input) *storeWorld {
	w := &storeWorld{t: t, dir: fuzzcorpus.MemTempDir(t), countKeys: map[uint64]int{}}
	w.opts = store.Options{Sync: store.SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1}
	if in.u8()&1 == 1 {
		w.opts.Sync = store.SyncAlways
	}
	w.bloomCfg = store.BloomConfig{Capacity: []uint64{8, 32, 100}[in.intn(3)], ErrorRate: []float64{0.1, 0.01}[in.intn(2)],
		Expansion: []uint{1, 2, 4}[in.intn(3)], NonScaling: in.u8()&3 == 0}
	w.bloomNorm = bloom.Config{Capacity: w.bloomCfg.Capacity, ErrorRate: w.bloomCfg.ErrorRate,
		Expansion: w.bloomCfg.Expansion, NonScaling: w.bloomCfg.NonScaling}
	b := []int{1, 2, 4, 8}[in.intn(4)]
	fp := min([]int{4, 8, 12, 16}[in.intn(4)], 64/b)
	w.cuckooCfg = cuckoo.Config{Capacity: []uint64{4, 16, 64}[in.intn(3)], BucketSize: b, FingerprintBits: fp,
		MaxIterations: []int{1, 8, 100}[in.intn(3)], Expansion: []uint{0, 1, 2}[in.intn(3)]}
	w.countCfg = store.BloomConfig{Capacity: []uint64{16, 200}[in.intn(2)], ErrorRate: 0.01, NonScaling: in.u8()&3 == 0}
	w.bits = &refBitmap{bits: make([]bool, 1+int(in.u16()%5000))}
	return w
}

// create opens the store and creates the filters.
func (w *storeWorld) create() {
	var err error
	w.s, err = store.Open(w.dir, &w.opts)
	w.must("Open", err)
	w.b, err = w.s.CreateBloom("b", w.bloomCfg)
	w.must("CreateBloom", err)
	w.growBloom()
	c := w.cuckooCfg
	w.c, err = w.s.CreateCuckoo("c", store.CuckooConfig{Capacity: c.Capacity, BucketSize: c.BucketSize,
		FingerprintBits: c.FingerprintBits, MaxIterations: c.MaxIterations, Expansion: c.Expansion,
		NonScaling: c.Expansion == 0}) // the model's Expansion 0: no growth
	w.must("CreateCuckoo", err)
	w.cuckoo = newCuckooModel()
	w.n, err = w.s.CreateCounting("n", w.countCfg)
	w.must("CreateCounting", err)
	p := cachedPlan(planKey{cfg: bloom.Config{Capacity: w.countCfg.Capacity, ErrorRate: w.countCfg.ErrorRate}, counting: true})
	w.must("PlanCounting", p.err)
	w.count = newRefCounting(p.g)
	w.m, err = w.s.CreateBitmap("m", uint64(len(w.bits.bits)))
	w.must("CreateBitmap", err)
	w.checkLayers(-1)
}

// reopen closes the store, checks the files it left against the models,
// opens it again and checks every answer.
func (w *storeWorld) reopen(ops int) {
	w.must("Close", w.s.Close())
	w.checkClosed(ops)
	w.checkFiles(ops)
	var err error
	w.s, err = store.Open(w.dir, &w.opts)
	w.must("reopen", err)
	// After a clean Close every data page matches its checksum.
	if rep, err := w.s.Check(); err != nil || rep.Changed != 0 || rep.Pages == 0 {
		w.fatalf("op %d: Check after a clean reopen: %+v, %v", ops, rep, err)
	}
	w.b, err = w.s.Bloom("b")
	w.must("Bloom", err)
	w.c, err = w.s.Cuckoo("c")
	w.must("Cuckoo", err)
	w.n, err = w.s.Counting("n")
	w.must("Counting", err)
	w.m, err = w.s.Bitmap("m")
	w.must("Bitmap", err)
}

// checkClosed checks the handles of the closed store: every change fails
// with ErrClosed, and no lookup answers "absent" (Has and Bitmap.Get
// answer true, Count math.MaxUint64: unknown), nor does Info describe the
// filter.
func (w *storeWorld) checkClosed(ops int) {
	w.t.Helper()
	x, h := []byte("never added"), uint64(0x5eed)
	for what, err := range map[string]error{
		"bloom Add":       second(w.b.Add(x)),
		"bloom AddMany":   second(w.b.AddManyHash([]uint64{h})),
		"cuckoo Add":      w.c.AddHash(h),
		"cuckoo AddNX":    second(w.c.AddNX(x)),
		"cuckoo Delete":   second(w.c.DeleteHash(h)),
		"counting Add":    w.n.Add(x),
		"counting Delete": second(w.n.DeleteHash(h)),
		"bitmap Set":      second(w.m.Set(0)),
		"bitmap Clear":    second(w.m.Clear(0)),
		"Checkpoint":      w.s.Checkpoint(),
		"bloom Info":      second(w.b.Info()),
		"bitmap Info":     second(w.m.Info()),
	} {
		if !errors.Is(err, store.ErrClosed) {
			w.fatalf("op %d: %s on a closed store: %v, want ErrClosed", ops, what, err)
		}
	}
	if !w.b.Has(x) || !w.b.HasHash(h) || slices.Contains(w.b.HasMany([][]byte{x, x}), false) ||
		!w.c.Has(x) || !w.c.HasHash(h) || slices.Contains(w.c.HasMany([][]byte{x}), false) || !w.n.Has(x) ||
		!w.m.Get(0) || !w.m.Get(uint64(len(w.bits.bits))) {
		w.fatalf("op %d: a handle of the closed store answered 'absent'", ops)
	}
	if c, n := w.c.CountHash(h), w.n.CountHash(h); c != math.MaxUint64 || n != math.MaxUint64 {
		w.fatalf("op %d: closed store: cuckoo Count %d, counting Count %d; want math.MaxUint64 (unknown)", ops, c, n)
	}
}

// second returns the second of two results: the error of a call that
// returns a value and an error.
func second[T any](_ T, err error) error { return err }

// growBloom adds the reference of the Bloom filter's next layer.
func (w *storeWorld) growBloom() {
	p := cachedPlan(planKey{cfg: w.bloomNorm, layer: len(w.bloomRefs)})
	w.must("bloom.LayerParams", p.err)
	w.bloomRefs = append(w.bloomRefs, newRefBloom(p.g, p.capacity))
}

func (w *storeWorld) bloomHas(h uint64) bool {
	for _, r := range w.bloomRefs {
		if r.has(h) {
			return true
		}
	}
	return false
}

// bloomAdd applies an add to the reference and returns the expected answer.
func (w *storeWorld) bloomAdd(h uint64) (bool, error) {
	if w.bloomHas(h) {
		return false, nil
	}
	if last := w.bloomRefs[len(w.bloomRefs)-1]; last.count >= last.capacity {
		if w.bloomNorm.NonScaling {
			return false, store.ErrFull
		}
		w.growBloom()
	}
	return w.bloomRefs[len(w.bloomRefs)-1].add(h), nil
}

func (w *storeWorld) cuckooLayerItems() []uint64 {
	var out []uint64
	for _, l := range w.info("cuckoo", w.c).LayerInfo {
		out = append(out, l.Items)
	}
	return out
}

// cuckooAdd adds k (only if absent, with nx) and updates the class model
// from the layer whose item count grew.
func (w *storeWorld) cuckooAdd(ops int, k key, nx bool) {
	w.t.Helper()
	m := w.cuckoo
	before := w.cuckooLayerItems()
	if nx && m.has(k.h) {
		if ins, err := w.c.AddNXHash(k.h); ins || err != nil {
			w.fatalf("op %d: cuckoo AddNX(%v) of a present key = %v, %v", ops, k, ins, err)
		}
		return
	}
	var err error
	if nx {
		var ins bool
		if k.b != nil {
			ins, err = w.c.AddNX(k.b)
		} else {
			ins, err = w.c.AddNXHash(k.h)
		}
		if ins != (err == nil) {
			w.fatalf("op %d: cuckoo AddNX(%v) of an absent key = %v, %v", ops, k, ins, err)
		}
	} else if k.b != nil {
		err = w.c.Add(k.b)
	} else {
		err = w.c.AddHash(k.h)
	}
	after := w.cuckooLayerItems()
	if err != nil {
		if !errors.Is(err, store.ErrFull) || !slices.Equal(before, after) {
			w.fatalf("op %d: cuckoo Add(%v) failed with %v, layer items %v -> %v; want ErrFull changing nothing", ops, k, err, before, after)
		}
		return
	}
	w.growCuckoo(ops, w.info("cuckoo", w.c), k.h, true)
	landed := -1
	for i := range after {
		var was uint64
		if i < len(before) {
			was = before[i]
		}
		switch {
		case after[i] == was:
		case after[i] == was+1 && landed < 0:
			landed = i
		default:
			w.fatalf("op %d: cuckoo Add(%v): layer items %v -> %v", ops, k, before, after)
		}
	}
	if landed < 0 || (len(after) > len(before) && landed != len(after)-1) {
		w.fatalf("op %d: cuckoo Add(%v): layer items %v -> %v", ops, k, before, after)
	}
	m.addAt(landed, k.h)
}

// checkLayers brings the models' layer lists up to the filters' (checking
// the cuckoo growth rule) and compares their sizes.
func (w *storeWorld) checkLayers(ops int) {
	w.t.Helper()
	ci := w.info("cuckoo", w.c)
	m := w.cuckoo
	w.growCuckoo(ops, ci, 0, false)
	for i, l := range m.layers {
		if ci.LayerInfo[i].Items != l.total {
			w.fatalf("op %d: cuckoo layer %d holds %d items, model %d", ops, i, ci.LayerInfo[i].Items, l.total)
		}
	}
	bi := w.info("bloom", w.b)
	if bi.Layers != len(w.bloomRefs) {
		w.fatalf("op %d: bloom filter has %d layers, reference %d", ops, bi.Layers, len(w.bloomRefs))
	}
	for i, r := range w.bloomRefs {
		if l := bi.LayerInfo[i]; l.Size != r.g.Blocks || l.K != int(r.g.K) || l.Items != r.count {
			w.fatalf("op %d: bloom layer %d: %d blocks, k %d, %d items; reference %+v, %d items", ops, i, l.Size, l.K, l.Items, r.g, r.count)
		}
	}
	if ni := w.info("counting", w.n); ni.LayerInfo[0].Size != w.count.g.Blocks || ni.LayerInfo[0].K != int(w.count.g.K) {
		w.fatalf("op %d: counting filter has %d blocks, k %d; PlanCounting %+v", ops, ni.LayerInfo[0].Size, ni.LayerInfo[0].K, w.count.g)
	}
}

// growCuckoo adds to the cuckoo model the layers the filter grew,
// checking that it grew by the rule and with LayerParams' geometry: one
// layer at a time, and below half the newest's capacity only for a key
// (h, if known: the add that grew it) whose buckets there did not hold
// nothing but its own copies.
func (w *storeWorld) growCuckoo(ops int, ci store.Info, h uint64, known bool) {
	w.t.Helper()
	m := w.cuckoo
	for len(m.layers) < ci.Layers {
		n := len(m.layers)
		if n > 0 {
			capacity, _, err := cuckoo.LayerParams(w.cuckooCfg, n-1)
			w.must("cuckoo.LayerParams", err)
			copiesFill := false
			if known {
				i1, _, i2 := m.layers[n-1].g.Locate(h)
				slots := uint64(w.cuckooCfg.BucketSize)
				if i1 != i2 {
					slots *= 2
				}
				copiesFill = m.layers[n-1].count(h) >= slots
			}
			if w.cuckooCfg.Expansion == 0 || ci.Layers != n+1 || (m.layers[n-1].total < capacity/2 && copiesFill) {
				w.fatalf("op %d: cuckoo filter grew from %d to %d layers (Expansion %d, newest holds %d of %d, the key's buckets full of its copies: %v)",
					ops, n, ci.Layers, w.cuckooCfg.Expansion, m.layers[n-1].total, capacity, copiesFill)
			}
		}
		_, g, err := cuckoo.LayerParams(w.cuckooCfg, n)
		w.must("cuckoo.LayerParams", err)
		if ci.LayerInfo[n].Size != g.Buckets {
			w.fatalf("op %d: cuckoo layer %d has %d buckets, LayerParams %+v", ops, n, ci.LayerInfo[n].Size, g)
		}
		m.grow(g)
	}
	if ci.Layers != len(m.layers) {
		w.fatalf("op %d: cuckoo filter has %d layers, model %d", ops, ci.Layers, len(m.layers))
	}
}

// checkKey compares every filter's answer for k with the models.
func (w *storeWorld) checkKey(ops int, k key) {
	w.t.Helper()
	if got, want := w.b.HasHash(k.h), w.bloomHas(k.h); got != want {
		w.fatalf("op %d: bloom Has(%v) = %v, reference %v", ops, k, got, want)
	}
	m := w.cuckoo
	if got, want := w.c.CountHash(k.h), m.count(k.h); got != want || w.c.HasHash(k.h) != m.has(k.h) {
		w.fatalf("op %d: cuckoo Count(%v) = %d, Has %v; model %d, %v", ops, k, got, w.c.HasHash(k.h), want, m.has(k.h))
	}
	if n := m.owned[k.h]; n > 0 && (!w.c.HasHash(k.h) || w.c.CountHash(k.h) < uint64(n)) {
		w.fatalf("op %d: %v owns %d cuckoo entries; Count %d, Has %v", ops, k, n, w.c.CountHash(k.h), w.c.HasHash(k.h))
	}
	want := w.count.count(k.h)
	if got := w.n.CountHash(k.h); got != want || w.n.HasHash(k.h) != (want > 0) {
		w.fatalf("op %d: counting Count(%v) = %d, Has %v; reference %d", ops, k, got, w.n.HasHash(k.h), want)
	}
	if n := w.countKeys[k.h]; !w.misused && n > 0 && want < uint64(min(n, bloom.MaxCounter)) {
		w.fatalf("op %d: counting Count(%v) = %d after %d more adds than deletes", ops, k, want, n)
	}
	if k.b != nil && (w.b.Has(k.b) != w.b.HasHash(k.h) || w.c.Count(k.b) != w.c.CountHash(k.h) || w.n.Count(k.b) != w.n.CountHash(k.h)) {
		w.fatalf("op %d: answers by key and by hash differ for %v", ops, k)
	}
}

// checkAll compares every answer of every filter with the models.
func (w *storeWorld) checkAll(ops int, ks *keySpace) {
	w.t.Helper()
	for _, k := range ks.keys {
		w.checkKey(ops, k)
	}
	var card uint64
	for _, r := range w.bloomRefs {
		card += r.count
	}
	if w.b.Card() != card {
		w.fatalf("op %d: bloom Card() = %d, reference %d", ops, w.b.Card(), card)
	}
	if w.c.Items() != w.cuckoo.total() {
		w.fatalf("op %d: cuckoo Items() = %d, model %d", ops, w.c.Items(), w.cuckoo.total())
	}
	if w.n.Items() != w.count.items {
		w.fatalf("op %d: counting Items() = %d, reference %d", ops, w.n.Items(), w.count.items)
	}
	if w.m.Count() != w.bits.count {
		w.fatalf("op %d: bitmap Count() = %d, model %d", ops, w.m.Count(), w.bits.count)
	}
	for i, v := range w.bits.bits {
		if w.m.Get(uint64(i)) != v {
			w.fatalf("op %d: bitmap Get(%d) = %v, model %v", ops, i, !v, v)
		}
	}
	w.checkLayers(ops)
}

// checkFiles reads the catalog and the filter files of the closed store
// and compares them with the models: a clean Close leaves every change in
// the files, and the catalog's headers match the references' geometry.
func (w *storeWorld) checkFiles(ops int) {
	w.t.Helper()
	cat, err := catalog.Read(w.dir)
	w.must("catalog.Read", err)
	if len(cat.Filters) != 4 {
		w.fatalf("op %d: catalog holds %d filters, want 4", ops, len(cat.Filters))
	}
	for _, fr := range cat.Filters {
		for i, l := range fr.Layers {
			v, err := mmapbits.OS{}.OpenView(l.Path)
			w.must("OpenView", err)
			if v.Header() != l.Header {
				w.fatalf("op %d: %s layer %d: file header %+v, catalog %+v", ops, fr.Name, i, v.Header(), l.Header)
			}
			words := make([]uint64, v.NumWords())
			for j := range words {
				words[j], _ = v.Word(uint64(j))
			}
			w.must("close view", v.Close())
			if err := w.checkLayerFile(fr, i, l, words); err != nil {
				w.fatalf("op %d: %s layer %d (%s): %v", ops, fr.Name, i, l.Path, err)
			}
		}
	}
}

func (w *storeWorld) checkLayerFile(fr catalog.Filter, i int, l catalog.Layer, words []uint64) error {
	h := l.Header
	switch fr.Name {
	case "b":
		if i >= len(w.bloomRefs) {
			return fmt.Errorf("the reference has %d layers", len(w.bloomRefs))
		}
		r := w.bloomRefs[i]
		if g := (bloom.Geometry{Blocks: h.Size, K: h.K, Salt: h.Salt, Derivation: bloom.Derivation(h.Derivation)}); g != r.g || l.Items != r.count {
			return fmt.Errorf("geometry %+v, %d items; reference %+v, %d items", g, l.Items, r.g, r.count)
		}
		if !slices.Equal(words[:r.g.Words()], r.words) {
			return fmt.Errorf("words differ from the reference")
		}
	case "c":
		if i >= len(w.cuckoo.layers) {
			return fmt.Errorf("the model has %d layers", len(w.cuckoo.layers))
		}
		ml := w.cuckoo.layers[i]
		g := cuckoo.Geometry{Buckets: h.Size, BucketSize: int(h.BucketSize), FingerprintBits: int(h.FingerprintBits), Salt: h.Salt,
			Derivation: cuckoo.Derivation(h.Derivation)}
		if g != ml.g || l.Items != ml.total {
			return fmt.Errorf("geometry %+v, %d items; model %+v, %d items", g, l.Items, ml.g, ml.total)
		}
		f, err := cuckoo.New(g, words[:g.Words()])
		if err != nil {
			return err
		}
		return checkCuckooLayer(ml, words[:g.Words()], f.CountHash)
	case "n":
		r := w.count
		if g := (bloom.Geometry{Blocks: h.Size, K: h.K, Salt: h.Salt, Derivation: bloom.Derivation(h.Derivation)}); g != r.g || l.Items != r.items {
			return fmt.Errorf("geometry %+v, %d items; reference %+v, %d items", g, l.Items, r.g, r.items)
		}
		if !slices.Equal(words[:r.g.Words()], r.words()) {
			return fmt.Errorf("words differ from the reference")
		}
	case "m":
		if h.Size != uint64(len(w.bits.bits)) || l.Items != w.bits.count {
			return fmt.Errorf("%d bits, %d set; model %d, %d", h.Size, l.Items, len(w.bits.bits), w.bits.count)
		}
		for off, v := range w.bits.bits {
			if (words[off/64]>>(off%64)&1 == 1) != v {
				return fmt.Errorf("bit %d is %v, model %v", off, !v, v)
			}
		}
		for j := (len(w.bits.bits) + 63) / 64; j < len(words); j++ {
			if words[j] != 0 {
				return fmt.Errorf("word %d past the end is %#x", j, words[j])
			}
		}
	default:
		return fmt.Errorf("unknown filter")
	}
	return nil
}

// FuzzStoreOps runs sequences of up to maxStoreOps operations on a store
// (see the package comment for its directory) holding a Bloom, a cuckoo, a
// counting Bloom filter and a bitmap of small, input-chosen configurations,
// under SyncAlways or SyncInterval. It closes and reopens the store
// halfway, when half the input or half the operations are consumed, and
// where the input asks until maxStoreReopens reopens have happened; it
// checks the closed store's handles, catalog and files, and after each
// reopen checks every key again.
//
// Input layout: the header of readStoreWorld (mode; Bloom capacity, error
// rate, expansion, non-scaling; cuckoo bucket size, fingerprint bits,
// capacity, MaxIterations, expansion; counting capacity, non-scaling: one
// byte each; the bitmap's size, two bytes), then operations, one byte
// modulo 17 and their arguments: 0 Bloom add (key); 1 Bloom AddMany (count
// byte, keys); 2, 3 cuckoo Add, AddNX (key); 4 cuckoo Delete (key); 5, 8
// lookups of a key; 6, 7 counting Add, Delete (key); 9, 10, 11 bitmap Set,
// Clear, Get (offset); 12 Checkpoint (maxStoreCheckpoints at most); 13
// reopen; 14 a raw hash (eight bytes) joins the key space; 15 HasMany
// (count byte, keys); 16 List; 17 a Batch (count byte, then per op a kind
// byte and its key or two-byte offset; see store_batch_test.go).
//
// Properties: every answer (Add's "new", Has, Count, Delete's answer,
// AddNX, a batch's answers, Items, Card, layer counts and sizes) equals the references and
// the cuckoo class model of the in-memory targets, before and after a
// reopen (a cuckoo Delete of a key matching in two or more layers is
// refused, as store.Cuckoo.Delete documents; otherwise it hits the one
// layer that matches); Info succeeds with State "ok"; no false negative
// for added keys; Count >= min(adds - deletes, 15) for counting keys and
// Count >= entries owned for cuckoo keys; errors are ErrFull (non-scaling
// or full filters) and ErrInvalid (bitmap offsets out of range) where the
// models predict them; after Close every change and Info fail with
// ErrClosed while no lookup answers "absent" (Has and Get answer true,
// Count math.MaxUint64); the files a clean Close leaves hold exactly the
// models' words.
func FuzzStoreOps(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := newInput(data)
		w := readStoreWorld(t, in)
		w.create()
		ks := newKeySpace(48)
		reopens, reopened, checkpoints := 0, false, 0
		for ops := 0; in.more() && ops < maxStoreOps; ops++ {
			if !reopened && (in.off >= len(data)/2 || ops == maxStoreOps/2) {
				w.reopen(ops)
				w.checkAll(ops, ks)
				reopens, reopened = reopens+1, true
			}
			k := ks.keys[0]
			switch op := in.intn(18); op {
			case 0:
				k = ks.pick(in)
				wantNew, wantErr := w.bloomAdd(k.h)
				var got bool
				var err error
				if k.b != nil {
					got, err = w.b.Add(k.b)
				} else {
					got, err = w.b.AddHash(k.h)
				}
				if got != wantNew || !errors.Is(err, wantErr) || (err != nil) != (wantErr != nil) {
					w.fatalf("op %d: bloom Add(%v) = %v, %v; reference %v, %v", ops, k, got, err, wantNew, wantErr)
				}
			case 1:
				n := 1 + in.intn(8)
				var hs []uint64
				var want []bool
				var wantErr error
				for range n {
					k := ks.pick(in)
					hs = append(hs, k.h)
					if wantErr == nil {
						var isNew bool
						isNew, wantErr = w.bloomAdd(k.h)
						want = append(want, isNew)
					}
				}
				got, err := w.b.AddManyHash(hs)
				if wantErr != nil {
					// The answers for the keys before the failing one.
					if want = want[:len(want)-1]; !errors.Is(err, wantErr) || !slices.Equal(got, want) {
						w.fatalf("op %d: bloom AddMany(%x) = %v, %v; want %v, %v", ops, hs, got, err, want, wantErr)
					}
				} else if err != nil || !slices.Equal(got, want) {
					w.fatalf("op %d: bloom AddMany(%x) = %v, %v; reference %v", ops, hs, got, err, want)
				}
			case 2:
				k = ks.pick(in)
				w.cuckooAdd(ops, k, false)
			case 3:
				k = ks.pick(in)
				w.cuckooAdd(ops, k, true)
			case 4:
				// Store.Cuckoo.Delete refuses (false, ErrAmbiguous) a
				// key whose fingerprint matches in two or more layers: a
				// match in the wrong layer may be another key's only copy.
				k = ks.pick(in)
				m := w.cuckoo
				var matches []int
				for i, l := range m.layers {
					if l.count(k.h) > 0 {
						matches = append(matches, i)
					}
				}
				before := w.cuckooLayerItems()
				got, err := w.c.DeleteHash(k.h)
				if wantAmb := len(matches) > 1; errors.Is(err, store.ErrAmbiguous) != wantAmb ||
					err != nil && !wantAmb || got != (len(matches) == 1) {
					w.fatalf("op %d: cuckoo Delete(%v) = %v, %v; model matches in layers %v", ops, k, got, err, matches)
				}
				if got {
					before[matches[0]]--
					m.deleteAt(matches[0], k.h)
				}
				if after := w.cuckooLayerItems(); !slices.Equal(before, after) {
					w.fatalf("op %d: cuckoo Delete(%v) (layers %v): layer items %v, want %v", ops, k, matches, after, before)
				}
			case 5, 8:
				k = ks.pick(in)
			case 6:
				k = ks.pick(in)
				var wantErr error
				if w.countCfg.NonScaling && w.count.items >= w.countCfg.Capacity {
					wantErr = store.ErrFull
				}
				var err error
				if k.b != nil {
					err = w.n.Add(k.b)
				} else {
					err = w.n.AddHash(k.h)
				}
				if !errors.Is(err, wantErr) || (err != nil) != (wantErr != nil) {
					w.fatalf("op %d: counting Add(%v) = %v, want %v", ops, k, err, wantErr)
				}
				if err == nil {
					w.count.add(k.h)
					w.countKeys[k.h]++
				}
			case 7:
				k = ks.pick(in)
				want := w.count.del(k.h)
				got, err := w.n.DeleteHash(k.h)
				if err != nil || got != want {
					w.fatalf("op %d: counting Delete(%v) = %v, %v; reference %v", ops, k, got, err, want)
				}
				if got {
					if w.countKeys[k.h] == 0 {
						w.misused = true
					} else {
						w.countKeys[k.h]--
					}
				}
			case 9, 10:
				off := uint64(in.u16()) % uint64(len(w.bits.bits)+70)
				set := op == 9
				var got bool
				var err error
				if set {
					got, err = w.m.Set(off)
				} else {
					got, err = w.m.Clear(off)
				}
				if off >= uint64(len(w.bits.bits)) {
					if !errors.Is(err, store.ErrInvalid) {
						w.fatalf("op %d: bitmap Set/Clear(%d) of %d bits: %v, want ErrInvalid", ops, off, len(w.bits.bits), err)
					}
					break
				}
				if want := w.bits.set(off, set); err != nil || got != want {
					w.fatalf("op %d: bitmap Set/Clear(%d, %v) = %v, %v; model %v", ops, off, set, got, err, want)
				}
			case 11:
				off := uint64(in.u16()) % uint64(len(w.bits.bits)+70)
				if got, want := w.m.Get(off), off < uint64(len(w.bits.bits)) && w.bits.bits[off]; got != want {
					w.fatalf("op %d: bitmap Get(%d) = %v, model %v", ops, off, got, want)
				}
			case 12:
				if checkpoints < maxStoreCheckpoints {
					w.must("Checkpoint", w.s.Checkpoint())
					checkpoints++
				}
			case 13:
				if reopens < maxStoreReopens {
					w.reopen(ops)
					w.checkAll(ops, ks)
					reopens++
				}
			case 14:
				k = ks.raw(in)
			case 15:
				var keys [][]byte
				var want []bool
				for range 1 + in.intn(40) {
					k := ks.pick(in)
					if k.b != nil {
						keys = append(keys, k.b)
						want = append(want, w.bloomHas(k.h))
					}
				}
				if got := w.b.HasMany(keys); !slices.Equal(got, want) {
					w.fatalf("op %d: bloom HasMany = %v, reference %v", ops, got, want)
				}
				if got := w.c.HasMany(keys); len(got) != len(keys) {
					w.fatalf("op %d: cuckoo HasMany gave %d answers for %d keys", ops, len(got), len(keys))
				} else {
					for i, b := range keys {
						if got[i] != w.cuckoo.has(bloom.Hash(b)) {
							w.fatalf("op %d: cuckoo HasMany answer %d = %v, model %v", ops, i, got[i], !got[i])
						}
					}
				}
			case 16:
				if l, err := w.s.List(); err != nil || len(l) != 4 {
					w.fatalf("op %d: List() = %d filters, %v", ops, len(l), err)
				}
			case 17:
				w.batch(ops, in, ks)
			}
			w.checkKey(ops, k)
		}
		w.checkAll(-1, ks)
		w.must("final Close", w.s.Close())
		w.checkFiles(-1)
	})
}
