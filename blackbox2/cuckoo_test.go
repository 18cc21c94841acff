package blackbox2_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/cuckoo"
)

func rng64(x, n uint64) uint64 { return hi64(x, n) }

// refCuckoo is the package doc's "Hashing" section written out.
func refCuckoo(g cuckoo.Geometry, h uint64) (i1, fp, i2 uint64) {
	m := g.Buckets
	s := g.Salt
	x := h ^ s
	fpn := uint64(1)<<g.FingerprintBits - 1
	if g.Derivation == cuckoo.DeriveMix {
		i1 = rng64(fmix64(x), m)
		fp = rng64(fmix64(x^golden), fpn) + 1
		i2 = (rng64(fmix64(fp^s^0xC2B2AE3D27D4EB4F), m) + m - i1) % m
		return
	}
	i1 = rng64(x, m)
	fp = rng64(x*0xFF51AFD7ED558CCD, fpn) + 1
	z := (fp ^ s ^ 0xC2B2AE3D27D4EB4F) * 0x9E3779B97F4A7C15
	const L = 65536
	var split uint64
	if g.Derivation == cuckoo.DeriveLocal && m >= 2*L {
		split = (m/L - 1) * L
	}
	if g.Derivation == cuckoo.DeriveMul || split == 0 {
		i2 = (rng64(z, m) + m - i1) % m
		return
	}
	if i1 < split {
		i2 = i1 ^ (z >> 48)
		return
	}
	n := m - split
	i2 = split + (rng64(z, n)+n-(i1-split))%n
	return
}

// TestCuckooLocateMatchesDoc checks the package doc's "Hashing" formulas for
// the three derivations, Alt's involution ("Alt(Alt(i, fp), fp) == i"),
// LayerSalt's "i*0xD6E8FEB86659FD93" and Split.
func TestCuckooLocateMatchesDoc(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []cuckoo.Derivation{cuckoo.DeriveMix, cuckoo.DeriveMul, cuckoo.DeriveLocal} {
		for _, m := range []uint64{1, 7, 1000, 2*65536 - 1, 2 * 65536, 3*65536 + 17, 10*65536 + 5} {
			for _, f := range []int{4, 9, 16} {
				g := cuckoo.Geometry{Buckets: m, BucketSize: 4, FingerprintBits: f, Salt: cuckoo.LayerSalt(int(rng.IntN(5))), Derivation: d}
				must(t, g.Validate())
				for range 200 {
					h := rng.Uint64()
					i1, fp, i2 := g.Locate(h)
					w1, wf, w2 := refCuckoo(g, h)
					if i1 != w1 || fp != wf || i2 != w2 {
						t.Fatalf("%v m=%d f=%d h=%#x: Locate (%d,%d,%d), doc (%d,%d,%d)", d, m, f, h, i1, fp, i2, w1, wf, w2)
					}
					if g.Alt(i1, fp) != i2 || g.Alt(i2, fp) != i1 {
						t.Fatalf("%v m=%d: Alt not an involution", d, m)
					}
				}
				wantSplit := uint64(0)
				if d == cuckoo.DeriveLocal && m >= 2*65536 {
					wantSplit = (m/65536 - 1) * 65536
				}
				if g.Split() != wantSplit {
					t.Errorf("%v m=%d Split %d want %d", d, m, g.Split(), wantSplit)
				}
			}
		}
	}
	for i := range 5 {
		if cuckoo.LayerSalt(i) != uint64(i)*0xD6E8FEB86659FD93 {
			t.Errorf("LayerSalt(%d) = %#x", i, cuckoo.LayerSalt(i))
		}
	}
	if cuckoo.LocalBlock != 65536 {
		t.Errorf("LocalBlock %d", cuckoo.LocalBlock)
	}
	for d, s := range map[cuckoo.Derivation]string{cuckoo.DeriveMix: "mix", cuckoo.DeriveMul: "mul", cuckoo.DeriveLocal: "local"} {
		if d.String() != s {
			t.Errorf("%d.String() = %q", d, d.String())
		}
	}
}

// TestCuckooPlanFormula checks Plan's "q = ceil(capacity / (b *
// TargetLoad(b))), computed exactly in integers, plus floor(sqrt(q)) + 1
// buckets of slack", "salt 0", and that Plan chooses DeriveLocal, with
// TargetLoad's table "b=1: 0.30 b=2: 0.78 b=3: 0.86 b=4: 0.90 b=5..7: 0.92
// b>=8: 0.94".
func TestCuckooPlanFormula(t *testing.T) {
	loads := map[int]uint64{1: 300, 2: 780, 3: 860, 4: 900, 5: 920, 6: 920, 7: 920, 8: 940, 12: 940, 16: 940}
	for b, want := range loads {
		if got := cuckoo.TargetLoad(b); got != want {
			t.Errorf("TargetLoad(%d) = %d, doc %d", b, got, want)
		}
	}
	for _, n := range []uint64{1, 10, 199, 1000, 123457, 10_000_000} {
		for _, b := range []int{1, 2, 4, 8} {
			f := 64 / b
			if f > 16 {
				f = 16
			}
			g, err := cuckoo.Plan(n, b, f)
			must(t, err)
			den := uint64(b) * cuckoo.TargetLoad(b)
			q := (n*1000 + den - 1) / den
			want := q + uint64(math.Sqrt(float64(q))) + 1
			if g.Buckets != want {
				t.Errorf("Plan(%d, %d, %d).Buckets = %d, doc formula %d", n, b, f, g.Buckets, want)
			}
			if g.Salt != 0 || g.Derivation != cuckoo.DeriveLocal || g.BucketSize != b || g.FingerprintBits != f {
				t.Errorf("Plan(%d,%d,%d) = %+v", n, b, f, g)
			}
		}
	}
}

// TestCuckooPlanErrors checks that Plan refuses what Geometry and Config
// refuse (capacity "\u003e= 1", "BucketSize ... 1..16", "FingerprintBits ...
// 4..16, with BucketSize*FingerprintBits <= 64") with ErrInvalid, "prefixed
// "cuckoo: "", and never panics.
func TestCuckooPlanErrors(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		b, f int
	}{{0, 4, 16}, {10, 0, 16}, {10, 17, 8}, {10, 4, 3}, {10, 4, 17}, {10, 8, 16}, {math.MaxUint64, 4, 16}, {10, -1, 8}} {
		var err error
		noPanic(t, "Plan", func() { _, err = cuckoo.Plan(c.n, c.b, c.f) })
		wantIs(t, sprintf("Plan(%d,%d,%d)", c.n, c.b, c.f), err, cuckoo.ErrInvalid)
		if err != nil && !strings.HasPrefix(err.Error(), "cuckoo: ") {
			t.Errorf("Plan(%d,%d,%d) message %q", c.n, c.b, c.f, err)
		}
	}
}

// TestCuckooGeometryValidate checks Geometry.Validate's "reports every
// invalid field at once; each error wraps ErrInvalid and names the field" and
// New's "words, which must have exactly g.Words() elements".
func TestCuckooGeometryValidate(t *testing.T) {
	g := cuckoo.Geometry{Buckets: 0, BucketSize: 17, FingerprintBits: 2, Derivation: 7}
	err := g.Validate()
	wantIs(t, "Validate", err, cuckoo.ErrInvalid)
	if err != nil {
		for _, f := range []string{"Buckets", "BucketSize", "FingerprintBits", "Derivation"} {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("Validate error %q does not name %s", err, f)
			}
		}
	}
	if err := (cuckoo.Geometry{Buckets: 1, BucketSize: 5, FingerprintBits: 13}).Validate(); !errors.Is(err, cuckoo.ErrInvalid) {
		t.Errorf("b*f = 65 accepted: %v", err)
	}
	if err := (cuckoo.Geometry{Buckets: cuckoo.MaxBuckets + 1, BucketSize: 4, FingerprintBits: 16}).Validate(); !errors.Is(err, cuckoo.ErrInvalid) {
		t.Errorf("Buckets > MaxBuckets accepted: %v", err)
	}
	good := cuckoo.Geometry{Buckets: 10, BucketSize: 4, FingerprintBits: 16}
	for _, n := range []int{0, 9, 11} {
		var err error
		noPanic(t, "New", func() { _, err = cuckoo.New(good, make([]uint64, n)) })
		wantIs(t, sprintf("New with %d words", n), err, cuckoo.ErrInvalid)
	}
	noPanic(t, "New invalid geometry", func() { _, err = cuckoo.New(g, nil) })
	wantIs(t, "New(invalid)", err, cuckoo.ErrInvalid)
	if good.Slots() != 40 || good.Words() != 10 {
		t.Errorf("Slots/Words %d/%d", good.Slots(), good.Words())
	}
	g6 := cuckoo.Geometry{Buckets: 1, BucketSize: 6, FingerprintBits: 9}
	if n := g6.UsedSlots(0x1FF | 0x1FF<<27 | 1<<63); n != 2 {
		t.Errorf("UsedSlots = %d, want 2 (bits above b*f are not slots)", n)
	}
}

// TestCuckooConfigValidate checks Config.Validate's ranges: "BucketSize ...
// 1..16", "FingerprintBits ... 4..16, with BucketSize*FingerprintBits <= 64",
// "MaxIterations ... 0..MaxIterationsLimit", "Expansion ... 0..64",
// "Capacity ... >= 1", "reports every invalid field at once".
func TestCuckooConfigValidate(t *testing.T) {
	must(t, (cuckoo.Config{Capacity: 1}).Validate())
	for _, c := range []cuckoo.Config{{Capacity: 0}, {Capacity: 1, BucketSize: 17}, {Capacity: 1, BucketSize: -1}, {Capacity: 1, FingerprintBits: 3},
		{Capacity: 1, FingerprintBits: 17}, {Capacity: 1, BucketSize: 8, FingerprintBits: 9}, {Capacity: 1, MaxIterations: cuckoo.MaxIterationsLimit + 1},
		{Capacity: 1, MaxIterations: -1}, {Capacity: 1, Expansion: 65}} {
		var err error
		noPanic(t, "Validate", func() { err = c.Validate() })
		wantIs(t, sprintf("Validate(%+v)", c), err, cuckoo.ErrInvalid)
		noPanic(t, "NewChain", func() { _, err = cuckoo.NewChain(c, nil) })
		wantIs(t, sprintf("NewChain(%+v)", c), err, cuckoo.ErrInvalid)
	}
	err := (cuckoo.Config{Capacity: 0, BucketSize: 17, Expansion: 99}).Validate()
	for _, f := range []string{"Capacity", "BucketSize", "Expansion"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("Validate error %v does not name %s", err, f)
		}
	}
	ch, err := cuckoo.NewChain(cuckoo.Config{Capacity: 10}, nil)
	must(t, err)
	c := ch.Config()
	if c.BucketSize != 4 || c.FingerprintBits != 16 || c.MaxIterations != 500 || c.Expansion != 0 {
		t.Errorf("Config() defaults %+v", c)
	}
}

// TestCuckooFilterBasics checks Insert/Has/Delete/CountKey/Count semantics:
// "Count returns the number of items: successful inserts minus successful
// deletes", "CountHash returns the number of slots in h's two buckets
// holding h's fingerprint", Delete "reports whether a copy was found",
// Occupancy "the fraction of slots holding a fingerprint".
func TestCuckooFilterBasics(t *testing.T) {
	g, _ := cuckoo.Plan(1000, 4, 16)
	f, err := cuckoo.New(g, nil)
	must(t, err)
	for i := range 1000 {
		must(t, f.Insert(keyN("c", i)))
	}
	if f.Count() != 1000 {
		t.Errorf("Count %d", f.Count())
	}
	must(t, f.Insert(keyN("c", 5)))
	if n := f.CountKey(keyN("c", 5)); n < 2 {
		t.Errorf("CountKey after two inserts %d", n)
	}
	for i := range 1000 {
		if !f.Has(keyN("c", i)) {
			t.Fatalf("false negative %d", i)
		}
	}
	if !f.Delete(keyN("c", 5)) || !f.Has(keyN("c", 5)) {
		t.Error("delete of one of two copies")
	}
	if f.Count() != 1000 {
		t.Errorf("Count %d after delete", f.Count())
	}
	used := 0
	for _, w := range f.Words() {
		used += g.UsedSlots(w)
	}
	if f.Occupancy() != float64(used)/float64(g.Slots()) {
		t.Errorf("Occupancy %v, slots say %v", f.Occupancy(), float64(used)/float64(g.Slots()))
	}
	if used != 1000 {
		t.Errorf("used slots %d, want 1000", used)
	}
	absent := 0
	for i := range 1000 {
		if f.Delete(keyN("never", i)) {
			absent++
		}
	}
	if absent > 5 {
		t.Errorf("%d deletes of never-inserted keys succeeded", absent)
	}
	// Bucket layout: the fingerprint sits in a slot of i1 or i2.
	h := cuckoo.Hash(keyN("c", 7))
	i1, fp, i2 := g.Locate(h)
	found := false
	for _, i := range []uint64{i1, i2} {
		w := f.Words()[i]
		for j := 0; j < g.BucketSize; j++ {
			if (w>>(j*g.FingerprintBits))&(1<<g.FingerprintBits-1) == fp {
				found = true
			}
		}
	}
	if !found {
		t.Error("fingerprint not found in slot [j*f, (j+1)*f) of i1 or i2")
	}
}

// TestCuckooFullChangesNothing checks ErrFull's "A failed insert changes
// nothing" and InsertHashes's "stops at the first insert that fails and
// returns how many keys were inserted".
func TestCuckooFullChangesNothing(t *testing.T) {
	g := cuckoo.Geometry{Buckets: 8, BucketSize: 2, FingerprintBits: 8, Derivation: cuckoo.DeriveLocal}
	f, _ := cuckoo.New(g, nil)
	var err error
	i := 0
	for ; i < 100; i++ {
		if err = f.Insert(keyN("full", i)); err != nil {
			break
		}
	}
	wantIs(t, "insert into a full filter", err, cuckoo.ErrFull)
	before := append([]uint64(nil), f.Words()...)
	count := f.Count()
	for j := i; j < i+20; j++ {
		if f.Insert(keyN("full", j)) == nil {
			break
		}
		for w := range before {
			if f.Words()[w] != before[w] {
				t.Fatalf("failed insert changed word %d", w)
			}
		}
		if f.Count() != count {
			t.Fatal("failed insert changed Count")
		}
	}
	f2, _ := cuckoo.New(g, nil)
	var hs []uint64
	for j := range 100 {
		hs = append(hs, cuckoo.Hash(keyN("full", j)))
	}
	n, err := f2.InsertHashes(hs)
	wantIs(t, "InsertHashes", err, cuckoo.ErrFull)
	if n != i {
		t.Errorf("InsertHashes inserted %d, loop of Insert %d", n, i)
	}
}

// TestCuckooInsertToArgs checks InsertTo's "at most MaxIterationsLimit, or the
// call fails with ErrInvalid" and Words's "Given a nil Words, ... DeleteFrom
// deletes nothing and InsertTo fails with ErrInvalid".
func TestCuckooInsertToArgs(t *testing.T) {
	g, _ := cuckoo.Plan(100, 4, 16)
	f, _ := cuckoo.New(g, nil)
	var err error
	noPanic(t, "InsertTo nil", func() { err = f.InsertTo(nil, 1, 0) })
	wantIs(t, "InsertTo(nil Words)", err, cuckoo.ErrInvalid)
	f.InsertHash(1)
	var ok bool
	noPanic(t, "DeleteFrom nil", func() { ok = f.DeleteFrom(nil, 1) })
	if ok || !f.HasHash(1) {
		t.Error("DeleteFrom(nil) deleted")
	}
	if f.HasHashIn(nil, 1) != true || f.CountHashIn(nil, 1) != 1 {
		t.Error("HasHashIn/CountHashIn(nil) do not read the filter's words")
	}
	ws := wordsOf{f.Words()}
	noPanic(t, "InsertTo limit", func() { err = f.InsertTo(ws, 2, cuckoo.MaxIterationsLimit+1) })
	wantIs(t, "InsertTo(maxIter too large)", err, cuckoo.ErrInvalid)
	noPanic(t, "InsertTo negative", func() { err = f.InsertTo(ws, 2, -5) })
	wantIs(t, "InsertTo(maxIter -5)", err, cuckoo.ErrInvalid)
	if !panics(func() { f.ShareSeq(nil) }) {
		t.Error("ShareSeq(nil) did not panic as documented")
	}
}

type wordsOf struct{ w []uint64 }

func (w wordsOf) Load(i uint64) uint64 { return w.w[i] }
func (w wordsOf) Store(i, v uint64)    { w.w[i] = v }

// TestCuckooChain checks Chain: "Adds go to the newest layer; when it is full
// ... and Expansion > 0, a new layer of capacity Capacity*Expansion^i with its
// own salt is added; with Expansion 0 the add fails with ErrFull", the
// Allocator (called with the layer and its geometry), Layers "oldest first",
// Items, AddNX.
func TestCuckooChain(t *testing.T) {
	cfg := cuckoo.Config{Capacity: 100, Expansion: 2, BucketSize: 4, FingerprintBits: 12}
	var calls []int
	alloc := func(layer int, g cuckoo.Geometry) ([]uint64, error) {
		calls = append(calls, layer)
		_, want, _ := cuckoo.LayerParams(cfg, layer)
		if want != g {
			t.Errorf("alloc layer %d geometry %+v, LayerParams %+v", layer, g, want)
		}
		return make([]uint64, g.Words()), nil
	}
	c, err := cuckoo.NewChain(cfg, alloc)
	must(t, err)
	for i := range 1000 {
		must(t, c.Add(keyN("ch", i)))
	}
	if len(c.Layers()) < 2 || len(calls) != len(c.Layers()) {
		t.Errorf("layers %d, allocator calls %v", len(c.Layers()), calls)
	}
	if c.Items() != 1000 {
		t.Errorf("Items %d", c.Items())
	}
	for i, l := range c.Layers() {
		if l.Geometry().Salt != cuckoo.LayerSalt(i) {
			t.Errorf("layer %d salt", i)
		}
		capi, g, err := cuckoo.LayerParams(cfg, i)
		must(t, err)
		if capi != 100<<i || g.Buckets != l.Geometry().Buckets {
			t.Errorf("layer %d capacity %d buckets %d/%d", i, capi, g.Buckets, l.Geometry().Buckets)
		}
	}
	for i := range 1000 {
		if !c.Has(keyN("ch", i)) {
			t.Fatalf("chain lost %d", i)
		}
	}
	ok, err := c.AddNX(keyN("ch", 3))
	if ok || err != nil {
		t.Errorf("AddNX of present key: %v %v", ok, err)
	}
	ok, err = c.AddNX([]byte("brand-new"))
	if !ok || err != nil || !c.Has([]byte("brand-new")) {
		t.Errorf("AddNX new key: %v %v", ok, err)
	}
	if !c.Delete(keyN("ch", 3)) || c.Items() != 1000 {
		t.Errorf("Delete: Items %d", c.Items())
	}
	if c.Count(keyN("ch", 4)) < 1 {
		t.Error("Count < 1")
	}
	nc, _ := cuckoo.NewChain(cuckoo.Config{Capacity: 10}, nil)
	var last error
	for i := 0; i < 1000 && last == nil; i++ {
		last = nc.Add(keyN("nc", i))
	}
	wantIs(t, "Expansion 0 chain", last, cuckoo.ErrFull)
	if len(nc.Layers()) != 1 {
		t.Errorf("Expansion 0 chain grew to %d layers", len(nc.Layers()))
	}
	bad := func(layer int, g cuckoo.Geometry) ([]uint64, error) { return nil, errAlloc }
	noPanic(t, "NewChain", func() { _, err = cuckoo.NewChain(cfg, bad) })
	if !errors.Is(err, errAlloc) {
		t.Errorf("NewChain with failing allocator: %v", err)
	}
	short := func(layer int, g cuckoo.Geometry) ([]uint64, error) { return make([]uint64, 1), nil }
	noPanic(t, "NewChain short", func() { _, err = cuckoo.NewChain(cfg, short) })
	wantIs(t, "NewChain with a short allocator", err, cuckoo.ErrInvalid)
}

// TestCuckooHotItem checks Chain.AddHash's "an item added many times fails
// with ErrFull once both its buckets are full in every layer ... a hot item
// does not grow the chain" and "a layer holds at most 2*BucketSize copies".
func TestCuckooHotItem(t *testing.T) {
	c, _ := cuckoo.NewChain(cuckoo.Config{Capacity: 1000, Expansion: 2}, nil)
	n := 0
	var err error
	for ; n < 100; n++ {
		if err = c.Add([]byte("hot")); err != nil {
			break
		}
	}
	wantIs(t, "hot item", err, cuckoo.ErrFull)
	if n != 8 || len(c.Layers()) != 1 {
		t.Errorf("hot item: %d copies before ErrFull, %d layers; want 8 (2*BucketSize) and 1", n, len(c.Layers()))
	}
	if got := c.Count([]byte("hot")); got != 8 {
		t.Errorf("Count %d", got)
	}
}

// TestCuckooResumeChain checks ResumeChain's "Layer i must have the geometry
// LayerParams(cfg, i), but for its Derivation, which may be any" and "With no
// layers it is NewChain".
func TestCuckooResumeChain(t *testing.T) {
	cfg := cuckoo.Config{Capacity: 100, Expansion: 2}
	_, g, _ := cuckoo.LayerParams(cfg, 0)
	g.Derivation = cuckoo.DeriveMix
	l, _ := cuckoo.New(g, nil)
	l.Insert([]byte("old"))
	l.SetCount(1)
	c, err := cuckoo.ResumeChain(cfg, []*cuckoo.Filter{l}, nil)
	must(t, err)
	if !c.Has([]byte("old")) || c.Items() != 1 {
		t.Error("resumed chain")
	}
	g.Buckets++
	l2, _ := cuckoo.New(g, nil)
	noPanic(t, "ResumeChain", func() { _, err = cuckoo.ResumeChain(cfg, []*cuckoo.Filter{l2}, nil) })
	if err == nil {
		t.Error("ResumeChain accepted a layer of the wrong geometry")
	}
	c, err = cuckoo.ResumeChain(cfg, nil, nil)
	if err != nil || len(c.Layers()) != 1 {
		t.Errorf("ResumeChain with no layers: %v", err)
	}
}

// TestCuckooHasManyOut checks HasMany's "The answers go to out[:len(keys)],
// which is allocated only if cap(out) < len(keys)".
func TestCuckooHasManyOut(t *testing.T) {
	g, _ := cuckoo.Plan(100, 4, 16)
	f, _ := cuckoo.New(g, nil)
	var keys [][]byte
	var hs []uint64
	for i := range 30 {
		keys = append(keys, keyN("hm", i))
		hs = append(hs, cuckoo.Hash(keyN("hm", i)))
		if i%3 == 0 {
			f.Insert(keyN("hm", i))
		}
	}
	buf := make([]bool, 0, 64)
	out := f.HasMany(keys, buf)
	if len(out) != 30 || &out[0] != &buf[:1][0] {
		t.Error("HasMany did not reuse out")
	}
	oh := f.HasManyHash(hs, nil)
	for i := range keys {
		if out[i] != f.Has(keys[i]) || oh[i] != out[i] {
			t.Errorf("HasMany[%d]", i)
		}
	}
}

// TestCuckooBuild checks Build's "returns how many it inserted", "reorders hs
// so that the keys it inserted are hs[:n]", "With n < len(hs) the error wraps
// ErrFull".
func TestCuckooBuild(t *testing.T) {
	g, _ := cuckoo.Plan(20000, 4, 16)
	f, _ := cuckoo.New(g, nil)
	var hs []uint64
	for i := range 20000 {
		hs = append(hs, cuckoo.Hash(keyN("bu", i)))
	}
	n, err := f.Build(hs, 2)
	if err != nil || n != 20000 || f.Count() != 20000 {
		t.Errorf("Build: n %d err %v count %d", n, err, f.Count())
	}
	for _, h := range hs {
		if !f.HasHash(h) {
			t.Fatal("Build lost a key")
		}
	}
	small, _ := cuckoo.New(cuckoo.Geometry{Buckets: 100, BucketSize: 4, FingerprintBits: 16, Derivation: cuckoo.DeriveLocal}, nil)
	hs2 := append([]uint64(nil), hs[:1000]...)
	n, err = small.Build(hs2, 2)
	wantIs(t, "Build over capacity", err, cuckoo.ErrFull)
	for _, h := range hs2[:n] {
		if !small.HasHash(h) {
			t.Fatal("hs[:n] not all present")
		}
	}
	if small.Count() != uint64(n) {
		t.Errorf("Count %d, n %d", small.Count(), n)
	}
}
