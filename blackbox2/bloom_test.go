package blackbox2_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/filterstore/filterstore/bloom"
)

// refLocate is the package doc's derivation, written from its drawing:
// "DeriveMul: block = hi64(x * Blocks), r_1 = x * 0x9e3779b97f4a7c15, s_1 = x;
// DeriveMix: y = mix64(x), block = hi64(y * Blocks), s_1 = y + 0x9e37..,
// r_1 = mix64(s_1); both: s_d = s_(d-1) + 0x9e37.., r_d = mix64(s_d)".
// Bloom cuts 7 positions of 9 bits per draw, counting 9 of 7 bits.
func refLocate(g bloom.Geometry, h uint64, width, per int) (uint64, []uint16) {
	x := h ^ g.Salt
	var block, s, r uint64
	if g.Derivation == bloom.DeriveMul {
		block = hi64(x, g.Blocks)
		s = x
		r = x * golden
	} else {
		y := mix64(x)
		block = hi64(y, g.Blocks)
		s = y + golden
		r = mix64(s)
	}
	var pos []uint16
	mask := uint64(1)<<width - 1
	for {
		for j := 0; j < per && len(pos) < int(g.K); j++ {
			pos = append(pos, uint16(r>>(width*j)&mask))
		}
		if len(pos) == int(g.K) {
			return block, pos
		}
		s += golden
		r = mix64(s)
	}
}

// TestBloomLocateMatchesDoc checks the package doc's "Hash derivation" and
// "Memory layout": Locate follows the drawn derivation for both derivations,
// and after Add the K bits are at "bit position p = 64*j + i" of block
// "words[8b : 8b+8]".
func TestBloomLocateMatchesDoc(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []bloom.Derivation{bloom.DeriveMix, bloom.DeriveMul} {
		for _, k := range []uint32{1, 7, 8, 14, 15, 32} {
			g := bloom.Geometry{Blocks: 1 + rng.Uint64N(1000), K: k, Salt: rng.Uint64(), Derivation: d}
			f, err := bloom.New(g, nil)
			must(t, err)
			for i := range 50 {
				h := bloom.Hash(keyN("loc", i))
				wb, wp := refLocate(g, h, 9, 7)
				b, p := g.Locate(h, nil)
				if b != wb || len(p) != len(wp) {
					t.Fatalf("%v k=%d: Locate block %d (%d pos), doc says %d (%d pos)", d, k, b, len(p), wb, len(wp))
				}
				for j := range p {
					if p[j] != wp[j] {
						t.Fatalf("%v k=%d: position %d is %d, doc says %d", d, k, j, p[j], wp[j])
					}
				}
				if f.BlockOf(h) != b || f.Block(h) != b {
					t.Fatalf("BlockOf/Block = %d/%d, Locate %d", f.BlockOf(h), f.Block(h), b)
				}
				f.AddHash(h)
				w := f.Words()
				for _, q := range p {
					if w[8*b+uint64(q)/64]&(1<<(q%64)) == 0 {
						t.Fatalf("bit %d of block %d not set after Add", q, b)
					}
				}
				cb, cp := g.LocateCounters(h, nil)
				wcb, wcp := refLocate(g, h, 7, 9)
				if cb != wcb {
					t.Fatalf("LocateCounters block %d, doc %d", cb, wcb)
				}
				for j := range cp {
					if cp[j] != wcp[j] {
						t.Fatalf("%v k=%d: counter position %d is %d, doc says %d", d, k, j, cp[j], wcp[j])
					}
				}
			}
		}
	}
}

// TestBloomLayerSalt checks "LayerSalt(i) = mix64((i+1) * 0x9e3779b97f4a7c15)"
// and "a plain Filter made by Plan uses Salt 0", "Plan and PlanCounting
// choose" DeriveMul.
func TestBloomLayerSalt(t *testing.T) {
	for i := range 10 {
		if got, want := bloom.LayerSalt(i), mix64(uint64(i+1)*golden); got != want {
			t.Errorf("LayerSalt(%d) = %#x, doc says %#x", i, got, want)
		}
	}
	g, err := bloom.Plan(1000, 0.01)
	must(t, err)
	if g.Salt != 0 || g.Derivation != bloom.DeriveMul {
		t.Errorf("Plan geometry %+v: want salt 0, DeriveMul", g)
	}
	g, err = bloom.PlanCounting(1000, 0.01)
	must(t, err)
	if g.Salt != 0 || g.Derivation != bloom.DeriveMul {
		t.Errorf("PlanCounting geometry %+v: want salt 0, DeriveMul", g)
	}
	if bloom.DeriveMix.String() != "mix" || bloom.DeriveMul.String() != "mul" {
		t.Errorf("Derivation strings %q %q", bloom.DeriveMix, bloom.DeriveMul)
	}
}

// TestBloomPlanErrors checks Plan's "Errors wrap ErrInvalid: capacity 0,
// errorRate not in (0, 1) (NaN included), a rate below the planner's floor
// (3.6e-19 for Plan, 5.7e-18 for PlanCounting ...)" and ErrInvalid's "The
// wrapping message starts with "bloom: "".
func TestBloomPlanErrors(t *testing.T) {
	type planner func(uint64, float64) (bloom.Geometry, error)
	for name, p := range map[string]planner{"Plan": bloom.Plan, "PlanCounting": bloom.PlanCounting,
		"PlanClassic": bloom.PlanClassic, "PlanCountingClassic": bloom.PlanCountingClassic} {
		for _, c := range []struct {
			n uint64
			r float64
		}{{0, 0.01}, {10, 0}, {10, 1}, {10, -0.5}, {10, 1.5}, {10, math.NaN()}, {10, math.Inf(1)}, {10, 1e-300}} {
			var err error
			noPanic(t, name, func() { _, err = p(c.n, c.r) })
			wantIs(t, name, err, bloom.ErrInvalid)
			if err != nil && !strings.HasPrefix(err.Error(), "bloom: ") {
				t.Errorf("%s(%d, %g): message %q does not start with \"bloom: \"", name, c.n, c.r, err)
			}
		}
	}
	if _, err := bloom.Plan(1000, 3.7e-19); err != nil {
		t.Errorf("Plan at 3.7e-19 (above the documented floor 3.6e-19): %v", err)
	}
	if _, err := bloom.Plan(1000, 3.5e-19); !errors.Is(err, bloom.ErrInvalid) {
		t.Errorf("Plan at 3.5e-19 (below the floor): %v", err)
	}
	if _, err := bloom.PlanCounting(1000, 5.8e-18); err != nil {
		t.Errorf("PlanCounting at 5.8e-18 (above the documented floor 5.7e-18): %v", err)
	}
	if _, err := bloom.PlanCounting(1000, 5.6e-18); !errors.Is(err, bloom.ErrInvalid) {
		t.Errorf("PlanCounting at 5.6e-18 (below the floor): %v", err)
	}
	if _, err := bloom.Plan(math.MaxUint64, 0.01); !errors.Is(err, bloom.ErrInvalid) {
		t.Errorf("Plan(MaxUint64): %v, want ErrInvalid (more than MaxBlocks blocks)", err)
	}
}

// TestBloomPlanSmallest checks Plan's "returns the smallest geometry ... that
// holds capacity items with a false-positive rate of at most errorRate":
// EstimateFPR at capacity is within the rate, and one block fewer at the
// same k is not.
func TestBloomPlanSmallest(t *testing.T) {
	for _, n := range []uint64{1, 10, 1000, 100000} {
		for _, r := range []float64{0.5, 0.01, 1e-4, 1e-9} {
			g, err := bloom.Plan(n, r)
			must(t, err)
			if fpr := bloom.EstimateFPR(g, n); fpr > r {
				t.Errorf("Plan(%d, %g) = %+v: EstimateFPR %g > rate", n, r, g, fpr)
			}
			if g.Blocks > 1 {
				s := g
				s.Blocks--
				if fpr := bloom.EstimateFPR(s, n); fpr <= r {
					t.Errorf("Plan(%d, %g) = %+v: %d blocks already give %g <= rate", n, r, g, s.Blocks, fpr)
				}
			}
			c, err := bloom.PlanCounting(n, r)
			must(t, err)
			if fpr := bloom.EstimateCountingFPR(c, n); fpr > r {
				t.Errorf("PlanCounting(%d, %g) = %+v: EstimateCountingFPR %g > rate", n, r, c, fpr)
			}
		}
	}
}

// TestBloomPlanBitsPerKey checks the package doc's "At 1% a filter of 1e5
// keys takes 9.92 bits a key (a counting one 43.4) against 9.90 (43.0)
// before".
func TestBloomPlanBitsPerKey(t *testing.T) {
	check := func(name string, p func(uint64, float64) (bloom.Geometry, error), want float64) {
		g, err := p(100000, 0.01)
		must(t, err)
		got := float64(g.Bits()) / 1e5
		if math.Abs(got-want) > 0.051 {
			t.Errorf("%s(1e5, 0.01): %.3f bits a key, doc says %.2f", name, got, want)
		}
	}
	check("Plan", bloom.Plan, 9.92)
	check("PlanCounting", bloom.PlanCounting, 43.4)
	check("PlanClassic", bloom.PlanClassic, 9.90)
	check("PlanCountingClassic", bloom.PlanCountingClassic, 43.0)
}

// TestBloomNewValidation checks New's "words, which must hold exactly
// g.Words() words" and Geometry's ranges "1 <= Blocks <= MaxBlocks",
// "1 <= K <= MaxK", all ErrInvalid ("a geometry out of range, a word slice of
// the wrong length").
func TestBloomNewValidation(t *testing.T) {
	good := bloom.Geometry{Blocks: 2, K: 3}
	for _, g := range []bloom.Geometry{{Blocks: 0, K: 3}, {Blocks: 2, K: 0}, {Blocks: 2, K: 33}, {Blocks: bloom.MaxBlocks + 1, K: 3}} {
		if err := g.Validate(); !errors.Is(err, bloom.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v", g, err)
		}
		var err error
		noPanic(t, "New", func() { _, err = bloom.New(g, nil) })
		wantIs(t, sprintf("New(%+v)", g), err, bloom.ErrInvalid)
		noPanic(t, "NewCounting", func() { _, err = bloom.NewCounting(g, nil) })
		wantIs(t, sprintf("NewCounting(%+v)", g), err, bloom.ErrInvalid)
	}
	for _, n := range []int{0, 15, 17} {
		var err error
		noPanic(t, "New", func() { _, err = bloom.New(good, make([]uint64, n)) })
		wantIs(t, sprintf("New with %d words", n), err, bloom.ErrInvalid)
		noPanic(t, "NewCounting", func() { _, err = bloom.NewCounting(good, make([]uint64, n)) })
		wantIs(t, sprintf("NewCounting with %d words", n), err, bloom.ErrInvalid)
	}
	if g := (bloom.Geometry{Blocks: 3, K: 1}); g.Words() != 24 || g.Bits() != 1536 {
		t.Errorf("Words/Bits = %d/%d", g.Words(), g.Bits())
	}
}

// TestBloomDerivationRange checks mmapbits' "a Bloom or counting layer's
// [Derivation] is at most 1 (bloom.DeriveMul)" against bloom's own
// Geometry.Validate ("Validate reports whether g is in range"): a geometry
// with Derivation 2 names no derivation of the package doc.
func TestBloomDerivationRange(t *testing.T) {
	g := bloom.Geometry{Blocks: 4, K: 3, Derivation: 2}
	err := g.Validate()
	var f *bloom.Filter
	noPanic(t, "New", func() { f, _ = bloom.New(g, nil) })
	if err == nil {
		t.Errorf("Validate accepts Derivation 2 (String %q), which the doc defines no derivation for", g.Derivation.String())
		if f != nil {
			noPanic(t, "Add", func() { f.Add([]byte("x")) })
		}
	}
}

// TestBloomFilterBasics checks Add's "reports whether any bit changed",
// Has's "false means definitely not", Count ("the number of adds that changed
// the filter"), SetCount, FillRatio and EstimateFPR = EstimateFPR(g, Count).
func TestBloomFilterBasics(t *testing.T) {
	g, err := bloom.Plan(2000, 0.01)
	must(t, err)
	f, err := bloom.New(g, nil)
	must(t, err)
	if f.FillRatio() != 0 || f.Count() != 0 {
		t.Fatalf("empty filter fill %v count %d", f.FillRatio(), f.Count())
	}
	added := 0
	for i := range 2000 {
		if f.Add(keyN("b", i)) {
			added++
		}
	}
	if uint64(added) != f.Count() {
		t.Errorf("Count %d, adds that changed the filter %d", f.Count(), added)
	}
	for i := range 2000 {
		if !f.Has(keyN("b", i)) || !f.HasHash(bloom.Hash(keyN("b", i))) {
			t.Fatalf("false negative for key %d", i)
		}
		if f.Add(keyN("b", i)) {
			t.Fatalf("re-add of key %d reported new", i)
		}
	}
	if f.EstimateFPR() != bloom.EstimateFPR(g, f.Count()) {
		t.Errorf("Filter.EstimateFPR %g != EstimateFPR(g, Count) %g", f.EstimateFPR(), bloom.EstimateFPR(g, f.Count()))
	}
	ones := 0
	for _, w := range f.Words() {
		for ; w != 0; w &= w - 1 {
			ones++
		}
	}
	if want := float64(ones) / float64(g.Bits()); f.FillRatio() != want {
		t.Errorf("FillRatio %v, set bits say %v", f.FillRatio(), want)
	}
	f.SetCount(7)
	if f.Count() != 7 {
		t.Errorf("SetCount(7): Count %d", f.Count())
	}
	fp := 0
	for i := range 20000 {
		if f.Has(keyN("absent", i)) {
			fp++
		}
	}
	if r := float64(fp) / 20000; r > 0.02 {
		t.Errorf("FPR %g at capacity, planned 0.01", r)
	}
}

// TestBloomHasManyOut checks HasMany's "The answers go to out[:len(keys)],
// which is allocated only if cap(out) < len(keys), and that slice is
// returned", for Filter, Scalable and Counting, and the Hash forms.
func TestBloomHasManyOut(t *testing.T) {
	g, _ := bloom.Plan(100, 0.01)
	f, _ := bloom.New(g, nil)
	c, _ := bloom.NewCounting(bloom.Geometry{Blocks: 4, K: 4, Derivation: bloom.DeriveMul}, nil)
	s, err := bloom.NewScalable(bloom.Config{Capacity: 10, ErrorRate: 0.01}, nil)
	must(t, err)
	var keys [][]byte
	var hs []uint64
	for i := range 40 {
		k := keyN("m", i)
		keys = append(keys, k)
		hs = append(hs, bloom.Hash(k))
		if i%2 == 0 {
			f.Add(k)
			c.Add(k)
			if _, err := s.Add(k); err != nil {
				t.Fatal(err)
			}
		}
	}
	type many struct {
		name string
		m    func([][]byte, []bool) []bool
		mh   func([]uint64, []bool) []bool
		has  func([]byte) bool
	}
	for _, m := range []many{{"Filter", f.HasMany, f.HasManyHash, f.Has}, {"Counting", c.HasMany, c.HasManyHash, c.Has}, {"Scalable", s.HasMany, s.HasManyHash, s.Has}} {
		buf := make([]bool, 3, 100)
		out := m.m(keys, buf)
		if len(out) != len(keys) || &out[0] != &buf[:1][0] {
			t.Errorf("%s.HasMany: len %d, reused buffer %v", m.name, len(out), &out[0] == &buf[:1][0])
		}
		outh := m.mh(hs, nil)
		for i := range keys {
			if out[i] != m.has(keys[i]) || outh[i] != out[i] {
				t.Errorf("%s: HasMany[%d]=%v HasManyHash=%v Has=%v", m.name, i, out[i], outh[i], m.has(keys[i]))
			}
		}
		if got := m.m(nil, nil); len(got) != 0 {
			t.Errorf("%s.HasMany(nil) len %d", m.name, len(got))
		}
		small := make([]bool, 2)
		if got := m.m(keys, small); len(got) != len(keys) {
			t.Errorf("%s.HasMany with short out: len %d", m.name, len(got))
		}
	}
}

// TestBloomCountingLayout checks the "Counting filter" section: counter c of
// a block in word c/16 at bits 4*(c%16); Add increments K counters (a
// repeated position once per occurrence) up to 15; Delete "only if no counter
// would go below zero, so Add followed by Delete restores the words exactly";
// Count is the minimum; Items counts adds minus successful deletes.
func TestBloomCountingLayout(t *testing.T) {
	g := bloom.Geometry{Blocks: 3, K: 12, Salt: 99, Derivation: bloom.DeriveMul}
	c, err := bloom.NewCounting(g, nil)
	must(t, err)
	for i := range 20 {
		c.Add(keyN("pre", i))
	}
	before := append([]uint64(nil), c.Words()...)
	key := []byte("the-key")
	h := bloom.Hash(key)
	b, pos := g.LocateCounters(h, nil)
	want := map[uint16]uint64{}
	for _, p := range pos {
		want[p]++
	}
	c.Add(key)
	w := c.Words()
	for p, n := range want {
		word := w[8*b+uint64(p)/16]
		old := before[8*b+uint64(p)/16]
		got := (word >> (4 * (p % 16))) & 15
		was := (old >> (4 * (p % 16))) & 15
		if got != min(was+n, 15) {
			t.Errorf("counter %d: %d -> %d after one add with %d occurrences", p, was, got, n)
		}
	}
	if c.Items() != 21 {
		t.Errorf("Items %d, want 21", c.Items())
	}
	if !c.Delete(key) {
		t.Fatal("Delete of an added key returned false")
	}
	for i := range before {
		if w[i] != before[i] {
			t.Fatalf("word %d: %#x after Add+Delete, %#x before", i, w[i], before[i])
		}
	}
	if c.Items() != 20 {
		t.Errorf("Items %d after delete, want 20", c.Items())
	}
	// A key never added whose counters include a zero: Delete refuses.
	empty, _ := bloom.NewCounting(g, nil)
	if empty.Delete(key) {
		t.Error("Delete on an empty filter returned true")
	}
	for _, v := range empty.Words() {
		if v != 0 {
			t.Fatal("refused Delete changed a word")
		}
	}
	if empty.Items() != 0 {
		t.Errorf("Items %d after refused delete", empty.Items())
	}
	// Saturation: 20 adds of one key; Count is at most 15 and stays after deletes.
	for range 20 {
		empty.Add(key)
	}
	if n := empty.Count(key); n != 15 {
		t.Errorf("Count after 20 adds = %d, want MaxCounter 15", n)
	}
	for range 20 {
		empty.Delete(key)
	}
	if !empty.Has(key) || empty.Count(key) != 15 {
		t.Errorf("saturated key after deletes: Has %v Count %d, doc: stays forever", empty.Has(key), empty.Count(key))
	}
	if bloom.NonzeroCounters(0x0F00_0000_0000_00F1) != 3 {
		t.Errorf("NonzeroCounters = %d, want 3", bloom.NonzeroCounters(0x0F00_0000_0000_00F1))
	}
	var nz int
	for _, v := range empty.Words() {
		nz += bloom.NonzeroCounters(v)
	}
	if want := float64(nz) / float64(g.Blocks*128); empty.FillRatio() != want {
		t.Errorf("Counting FillRatio %v want %v", empty.FillRatio(), want)
	}
}

// TestBloomCountingItemsNotBelowZero checks DeleteFrom's "On success it
// decrements Items (not below 0)".
func TestBloomCountingItemsNotBelowZero(t *testing.T) {
	g := bloom.Geometry{Blocks: 1, K: 2, Derivation: bloom.DeriveMul}
	c, _ := bloom.NewCounting(g, nil)
	c.Add([]byte("a"))
	c.SetItems(0)
	if !c.Delete([]byte("a")) {
		t.Fatal("delete failed")
	}
	if c.Items() != 0 {
		t.Errorf("Items after delete from 0 = %d, want 0", c.Items())
	}
}

// TestBloomCountingMerge checks MergeInto's "dst's counters become those of
// adding to dst every key added to c ... each sum saturating at MaxCounter"
// and "Neither Items moves".
func TestBloomCountingMerge(t *testing.T) {
	g := bloom.Geometry{Blocks: 2, K: 5, Derivation: bloom.DeriveMul}
	a, _ := bloom.NewCounting(g, nil)
	b, _ := bloom.NewCounting(g, nil)
	ref, _ := bloom.NewCounting(g, nil)
	for i := range 60 {
		a.Add(keyN("a", i))
		ref.Add(keyN("a", i))
		b.Add(keyN("b", i))
		ref.Add(keyN("b", i))
	}
	ia, ib := a.Items(), b.Items()
	b.MergeInto(a, 0, g.Words())
	for i := range ref.Words() {
		if a.Words()[i] != ref.Words()[i] {
			t.Fatalf("word %d after merge %#x, adds give %#x", i, a.Words()[i], ref.Words()[i])
		}
	}
	if a.Items() != ia || b.Items() != ib {
		t.Errorf("Items moved: %d %d", a.Items(), b.Items())
	}
}

// TestBloomOrInto checks OrInto ("ORs the filter's words from index lo to hi
// into dst's ... It moves neither count") and its documented panic "unless
// lo <= hi <= len(f.Words()) and dst has as many words".
func TestBloomOrInto(t *testing.T) {
	g, _ := bloom.Plan(500, 0.01)
	a, _ := bloom.New(g, nil)
	b, _ := bloom.New(g, nil)
	for i := range 300 {
		a.Add(keyN("a", i))
		b.Add(keyN("b", i))
	}
	ca, cb := a.Count(), b.Count()
	n := uint64(len(a.Words()))
	a.OrInto(b, 0, n)
	for i := range 300 {
		if !b.Has(keyN("a", i)) || !b.Has(keyN("b", i)) {
			t.Fatalf("after OrInto dst misses key %d", i)
		}
	}
	if a.Count() != ca || b.Count() != cb {
		t.Error("OrInto moved a count")
	}
	if !panics(func() { a.OrInto(b, 2, 1) }) || !panics(func() { a.OrInto(b, 0, n+1) }) {
		t.Error("OrInto out of range did not panic as documented")
	}
}

// TestBloomScalable checks NewScalable/Config: "Capacity ... >= 1.
// Required", "ErrorRate ... in (0, 1)", "Expansion ... in [1, MaxExpansion].
// 0 means DefaultExpansion (2)"; a NonScaling filter "refuses adds with
// ErrFull once it holds Capacity items"; a scaling one adds layers whose
// geometry is LayerParams's; the Allocator is called "exactly g.Words()
// long" per layer, and its error "is returned as is".
func TestBloomScalable(t *testing.T) {
	for _, cfg := range []bloom.Config{{Capacity: 0, ErrorRate: 0.01}, {Capacity: 1, ErrorRate: 0}, {Capacity: 1, ErrorRate: 1},
		{Capacity: 1, ErrorRate: math.NaN()}, {Capacity: 1, ErrorRate: 0.01, Expansion: bloom.MaxExpansion + 1}} {
		var err error
		noPanic(t, "NewScalable", func() { _, err = bloom.NewScalable(cfg, nil) })
		wantIs(t, sprintf("NewScalable(%+v)", cfg), err, bloom.ErrInvalid)
	}
	s, err := bloom.NewScalable(bloom.Config{Capacity: 10, ErrorRate: 0.01}, nil)
	must(t, err)
	if s.Config().Expansion != bloom.DefaultExpansion {
		t.Errorf("Config().Expansion = %d, want default 2", s.Config().Expansion)
	}
	ns, err := bloom.NewScalable(bloom.Config{Capacity: 100, ErrorRate: 0.01, NonScaling: true}, nil)
	must(t, err)
	var full error
	i := 0
	for ; i < 10000; i++ {
		if _, full = ns.Add(keyN("ns", i)); full != nil {
			break
		}
	}
	wantIs(t, "NonScaling add past capacity", full, bloom.ErrFull)
	if ns.Count() != 100 {
		t.Errorf("NonScaling full at Count %d, want Capacity 100", ns.Count())
	}
	if len(ns.Layers()) != 1 {
		t.Errorf("NonScaling has %d layers", len(ns.Layers()))
	}
	var calls []int
	alloc := func(layer int, g bloom.Geometry) ([]uint64, error) {
		calls = append(calls, layer)
		_, _, want, err := bloom.LayerParams(bloom.Config{Capacity: 10, ErrorRate: 0.01, Expansion: 3}, layer)
		if err != nil || want != g {
			t.Errorf("allocator layer %d geometry %+v, LayerParams %+v (%v)", layer, g, want, err)
		}
		if layer == 3 {
			return nil, errAlloc
		}
		return make([]uint64, g.Words()), nil
	}
	sc, err := bloom.NewScalable(bloom.Config{Capacity: 10, ErrorRate: 0.01, Expansion: 3}, alloc)
	must(t, err)
	var last error
	for i := 0; i < 1000; i++ {
		if _, last = sc.Add(keyN("sc", i)); last != nil {
			break
		}
	}
	if !errors.Is(last, errAlloc) {
		t.Errorf("allocator failure returned as %v, want it (as is)", last)
	}
	if len(calls) != 4 || len(sc.Layers()) != 3 {
		t.Errorf("allocator calls %v, layers %d", calls, len(sc.Layers()))
	}
	for li, l := range sc.Layers() {
		if l.Geometry().Salt != bloom.LayerSalt(li) {
			t.Errorf("layer %d salt %#x, want LayerSalt", li, l.Geometry().Salt)
		}
	}
	for j := 0; j < 10+30+90; j++ {
		if !sc.Has(keyN("sc", j)) {
			t.Fatalf("scalable lost key %d", j)
		}
	}
	var sum uint64
	prod := 1.0
	for _, l := range sc.Layers() {
		sum += l.Count()
		prod *= 1 - l.EstimateFPR()
	}
	if sc.Count() != sum {
		t.Errorf("Count %d, sum of layers %d", sc.Count(), sum)
	}
	if math.Abs(sc.EstimateFPR()-(1-prod)) > 1e-12 {
		t.Errorf("EstimateFPR %g, 1-prod %g", sc.EstimateFPR(), 1-prod)
	}
}

var errAlloc = errors.New("allocator says no")

// TestBloomScalableBadAllocator checks Allocator's "returns the zeroed words
// of a new layer of geometry g, exactly g.Words() long": an allocator that
// returns the wrong length must get an error, not a panic ("no input may
// panic").
func TestBloomScalableBadAllocator(t *testing.T) {
	alloc := func(layer int, g bloom.Geometry) ([]uint64, error) { return make([]uint64, g.Words()-1), nil }
	var err error
	noPanic(t, "NewScalable", func() { _, err = bloom.NewScalable(bloom.Config{Capacity: 10, ErrorRate: 0.01}, alloc) })
	wantIs(t, "NewScalable with a short allocator", err, bloom.ErrInvalid)
	nilAlloc := func(layer int, g bloom.Geometry) ([]uint64, error) { return nil, nil }
	noPanic(t, "NewScalable", func() { _, err = bloom.NewScalable(bloom.Config{Capacity: 10, ErrorRate: 0.01}, nilAlloc) })
	if err == nil {
		t.Log("allocator returning nil, nil accepted (doc: nil Allocator allocates; nil words unspecified)")
	}
}

// TestBloomLayerParams checks "capacity Capacity * Expansion^i, error rate
// ErrorRate * (1-r) * r^i with r = TighteningRatio (the full ErrorRate for a
// NonScaling filter)" and "Errors wrap ErrInvalid: a bad cfg, i < 0, i > 0
// for a NonScaling filter, a layer whose capacity overflows".
func TestBloomLayerParams(t *testing.T) {
	cfg := bloom.Config{Capacity: 100, ErrorRate: 0.01, Expansion: 4}
	for i := range 5 {
		c, r, g, err := bloom.LayerParams(cfg, i)
		must(t, err)
		if c != 100*uint64(math.Pow(4, float64(i))) {
			t.Errorf("layer %d capacity %d", i, c)
		}
		if want := 0.01 * 0.5 * math.Pow(0.5, float64(i)); math.Abs(r-want) > want*1e-12 {
			t.Errorf("layer %d rate %g want %g", i, r, want)
		}
		pg, _ := bloom.Plan(c, r)
		pg.Salt = bloom.LayerSalt(i)
		if g != pg {
			t.Errorf("layer %d geometry %+v, Plan gives %+v", i, g, pg)
		}
	}
	_, r, _, err := bloom.LayerParams(bloom.Config{Capacity: 100, ErrorRate: 0.01, NonScaling: true}, 0)
	if err != nil || r != 0.01 {
		t.Errorf("NonScaling layer 0 rate %g err %v", r, err)
	}
	for _, c := range []struct {
		cfg bloom.Config
		i   int
	}{{cfg, -1}, {bloom.Config{Capacity: 100, ErrorRate: 0.01, NonScaling: true}, 1}, {bloom.Config{Capacity: 1 << 62, ErrorRate: 0.01, Expansion: 64}, 3}, {bloom.Config{}, 0}} {
		var err error
		noPanic(t, "LayerParams", func() { _, _, _, err = bloom.LayerParams(c.cfg, c.i) })
		wantIs(t, sprintf("LayerParams(%+v, %d)", c.cfg, c.i), err, bloom.ErrInvalid)
	}
}

// TestBloomResumeScalable checks "Each layer's salt must be LayerSalt(i)":
// a layer with another salt is refused, and resumed layers keep their keys.
func TestBloomResumeScalable(t *testing.T) {
	cfg := bloom.Config{Capacity: 50, ErrorRate: 0.01}
	s, _ := bloom.NewScalable(cfg, nil)
	for i := range 200 {
		if _, err := s.Add(keyN("r", i)); err != nil {
			t.Fatal(err)
		}
	}
	layers := s.Layers()
	r, err := bloom.ResumeScalable(cfg, layers, nil)
	must(t, err)
	if r.Count() != s.Count() {
		t.Errorf("resumed Count %d, want %d", r.Count(), s.Count())
	}
	for i := range 200 {
		if !r.Has(keyN("r", i)) {
			t.Fatalf("resumed filter lost key %d", i)
		}
	}
	bad, _ := bloom.New(bloom.Geometry{Blocks: layers[0].Geometry().Blocks, K: layers[0].Geometry().K, Salt: 12345, Derivation: bloom.DeriveMul}, nil)
	noPanic(t, "ResumeScalable", func() { _, err = bloom.ResumeScalable(cfg, []*bloom.Filter{bad}, nil) })
	if err == nil {
		t.Error("ResumeScalable accepted a layer whose salt is not LayerSalt(0)")
	}
	noPanic(t, "ResumeScalable nil layer", func() { _, err = bloom.ResumeScalable(cfg, []*bloom.Filter{nil}, nil) })
	if err == nil {
		t.Error("ResumeScalable accepted a nil layer")
	}
}

// TestBloomFronts checks NewFront ("answers off.Load() where the key is
// absent from f (off may be nil: false)"), NewOverlayFront ("answers more(h)
// || off.Load()"), SlowFront and Filter().
func TestBloomFronts(t *testing.T) {
	g, _ := bloom.Plan(100, 0.001)
	f, _ := bloom.New(g, nil)
	f.Add([]byte("in"))
	absent := []byte("surely-absent-key")
	if f.Has(absent) {
		t.Skip("false positive")
	}
	var off atomic.Bool
	fr := bloom.NewFront(f, nil)
	if !fr.Has([]byte("in")) || fr.Has(absent) || fr.Filter() != f {
		t.Error("NewFront(f, nil) answers differ from f")
	}
	fr = bloom.NewFront(f, &off)
	if fr.Has(absent) {
		t.Error("off false: absent key answered maybe")
	}
	off.Store(true)
	if !fr.Has(absent) || !fr.HasHash(bloom.Hash(absent)) {
		t.Error("off true: absent key not answered maybe")
	}
	off.Store(false)
	var asked []uint64
	ov := bloom.NewOverlayFront(f, &off, func(h uint64) bool { asked = append(asked, h); return h == bloom.Hash(absent) })
	if !ov.Has(absent) || !ov.Has([]byte("in")) {
		t.Error("overlay front answers")
	}
	if len(asked) != 1 {
		t.Errorf("more asked %d times, doc: only for the keys the words miss", len(asked))
	}
	sf := bloom.SlowFront(func([]byte) bool { return true }, func(uint64) bool { return false })
	if !sf.Has(nil) || sf.HasHash(0) || sf.Filter() != nil {
		t.Error("SlowFront")
	}
	c, _ := bloom.NewCounting(bloom.Geometry{Blocks: 4, K: 4, Derivation: bloom.DeriveMul}, nil)
	cf := bloom.NewCountingFront(c, nil)
	if cf.Has(absent) || cf.Counting() != c {
		t.Error("NewCountingFront(nil off)")
	}
	cf = bloom.NewCountingFront(c, &off)
	off.Store(true)
	if !cf.Has(absent) {
		t.Error("CountingFront off true")
	}
}

// TestBloomScalableAllocError checks Scalable.Add's "an allocation
// failure is returned wrapped with the layer's number (errors.Is and
// errors.As see the Allocator's error)".
func TestBloomScalableAllocError(t *testing.T) {
	alloc := func(layer int, g bloom.Geometry) ([]uint64, error) {
		if layer == 1 {
			return nil, errAlloc
		}
		return make([]uint64, g.Words()), nil
	}
	s, err := bloom.NewScalable(bloom.Config{Capacity: 5, ErrorRate: 0.01}, alloc)
	must(t, err)
	var last error
	for i := 0; i < 100 && last == nil; i++ {
		_, last = s.Add(keyN("x", i))
	}
	if !errors.Is(last, errAlloc) || !strings.Contains(last.Error(), "layer 1") {
		t.Errorf("Add returned %q (%T), want the allocation failure wrapped with its layer", last, last)
	}
}
