package blackbox2_test

import (
	"errors"
	"testing"

	"github.com/filterstore/filterstore/bloom"
)

// TestBloomBuilderMatchesLoop checks Builder's "the words and the count of
// new adds are those of a loop of AddHash over the keys", for Add and AddKeys,
// owned or not, and Close's "returns Wait's count; 0 if the Builder was
// closed already" and "Add or AddKeys after Close panics".
func TestBloomBuilderMatchesLoop(t *testing.T) {
	g, _ := bloom.Plan(3000, 0.01)
	var hs []uint64
	for i := range 3000 {
		hs = append(hs, bloom.Hash(keyN("bd", i)))
	}
	ref, _ := bloom.New(g, nil)
	var want uint64
	for _, h := range hs {
		if ref.AddHash(h) {
			want++
		}
	}
	for _, owned := range []bool{false, true} {
		for _, lanes := range []int{0, 1, 3} {
			f, _ := bloom.New(g, nil)
			b := bloom.NewBuilder(f, lanes, owned, nil, nil)
			if b.Lanes() < 1 {
				t.Errorf("Lanes() = %d", b.Lanes())
			}
			b.Add(hs[:1000])
			ks := &bloom.Keys{}
			for i := 1000; i < 3000; i++ {
				ks.Append(keyN("bd", i))
			}
			ks = b.AddKeys(ks, ks.Len())
			if ks == nil || ks.Len() != 0 {
				t.Errorf("AddKeys returned %v, want an empty batch", ks)
			}
			got := b.Wait()
			if got != want {
				t.Errorf("owned=%v lanes=%d: Wait %d, loop %d", owned, lanes, got, want)
			}
			for i, w := range f.Words() {
				if w != ref.Words()[i] {
					t.Fatalf("owned=%v lanes=%d: word %d differs from the AddHash loop", owned, lanes, i)
				}
			}
			if f.Count() != 0 {
				t.Errorf("Builder moved Count to %d (doc: Count does not move)", f.Count())
			}
			if n := b.Close(); n != 0 {
				t.Errorf("Close after Wait returned %d, want 0 (nothing queued since)", n)
			}
			if n := b.Close(); n != 0 {
				t.Errorf("second Close returned %d", n)
			}
			if !panics(func() { b.Add(hs[:1]) }) {
				t.Error("Add after Close did not panic")
			}
		}
	}
	f, _ := bloom.New(g, nil)
	b := bloom.NewBuilder(f, 2, false, nil, nil)
	b.Add(hs)
	if n := b.Close(); n != want {
		t.Errorf("Close without Wait returned %d, want Wait's count %d", n, want)
	}
}

// TestBloomBuilderLanesBounded checks NewBuilder's "at most one lane per block
// and MaxBuilderLanes".
func TestBloomBuilderLanesBounded(t *testing.T) {
	f, _ := bloom.New(bloom.Geometry{Blocks: 2, K: 3, Derivation: bloom.DeriveMul}, nil)
	b := bloom.NewBuilder(f, 16, false, nil, nil)
	defer b.Close()
	if b.Lanes() > 2 {
		t.Errorf("Lanes %d on a 2-block filter", b.Lanes())
	}
	big, _ := bloom.New(bloom.Geometry{Blocks: 1000, K: 3, Derivation: bloom.DeriveMul}, nil)
	b2 := bloom.NewBuilder(big, 1000, false, nil, nil)
	defer b2.Close()
	if b2.Lanes() > bloom.MaxBuilderLanes {
		t.Errorf("Lanes %d > MaxBuilderLanes", b2.Lanes())
	}
}

// TestBloomBuilderAddKeysBadBatch checks AddKeys's "A batch that does not
// hold n keys (n past len(ks.Ends), or Ends not rising within Buf ...) panics
// here, on the caller's goroutine".
func TestBloomBuilderAddKeysBadBatch(t *testing.T) {
	f, _ := bloom.New(bloom.Geometry{Blocks: 8, K: 3, Derivation: bloom.DeriveMul}, nil)
	b := bloom.NewBuilder(f, 2, false, nil, nil)
	defer b.Close()
	ks := &bloom.Keys{Buf: []byte("abc"), Ends: []int{1, 3}}
	if !panics(func() { b.AddKeys(ks, 3) }) {
		t.Error("n past len(Ends) did not panic")
	}
	if !panics(func() { b.AddKeys(&bloom.Keys{Buf: []byte("abc"), Ends: []int{2, 1}}, 2) }) {
		t.Error("falling Ends did not panic")
	}
	if !panics(func() { b.AddKeys(&bloom.Keys{Buf: []byte("abc"), Ends: []int{5}}, 1) }) {
		t.Error("Ends past Buf did not panic")
	}
	b.Wait()
}

// TestBloomBuilderSeenPanic checks Wait's "If a lane's adds panicked (... a
// panic of seen), Wait panics once every lane is done, on the caller's
// goroutine ... with any other value as an error that carries it (Unwrap,
// for an error value) ... and the Builder may be used again".
func TestBloomBuilderSeenPanic(t *testing.T) {
	sentinel := errors.New("seen blew up")
	f, _ := bloom.New(bloom.Geometry{Blocks: 64, K: 3, Derivation: bloom.DeriveMul}, nil)
	boom := true
	b := bloom.NewBuilder(f, 2, true, nil, func(h uint64) bool {
		if boom {
			panic(sentinel)
		}
		return false
	})
	defer b.Close()
	b.Add([]uint64{1, 2, 3})
	var got any
	func() {
		defer func() { got = recover() }()
		b.Wait()
	}()
	err, ok := got.(error)
	if !ok || !errors.Is(err, sentinel) {
		t.Fatalf("Wait panicked with %v (%T), want an error wrapping the panic value", got, got)
	}
	boom = false
	b.Add([]uint64{bloom.Hash([]byte("z"))})
	if n := b.Wait(); n != 1 || !f.Has([]byte("z")) {
		t.Errorf("Builder reused after a panic: Wait %d, Has %v", n, f.Has([]byte("z")))
	}
}

// TestBloomCountingBuilder checks NewCountingBuilder's "the words are those of
// a loop of AddHash over the keys" and "Items does not move: Wait returns the
// keys added".
func TestBloomCountingBuilder(t *testing.T) {
	g, _ := bloom.PlanCounting(2000, 0.01)
	ref, _ := bloom.NewCounting(g, nil)
	var hs []uint64
	for i := range 2000 {
		h := bloom.Hash(keyN("cb", i%1500))
		hs = append(hs, h)
		ref.AddHash(h)
	}
	for _, owned := range []bool{false, true} {
		c, _ := bloom.NewCounting(g, nil)
		b := bloom.NewCountingBuilder(c, 3, owned)
		b.Add(hs)
		n := b.Close()
		if n != 2000 {
			t.Errorf("owned=%v: Wait/Close returned %d, want 2000 keys added", owned, n)
		}
		if c.Items() != 0 {
			t.Errorf("owned=%v: Items moved to %d", owned, c.Items())
		}
		for i, w := range c.Words() {
			if w != ref.Words()[i] {
				t.Fatalf("owned=%v: word %d differs from the AddHash loop", owned, i)
			}
		}
	}
	c, _ := bloom.NewCounting(g, nil)
	c.AddHashes(hs)
	if c.Items() != ref.Items() {
		t.Errorf("AddHashes Items %d, loop %d", c.Items(), ref.Items())
	}
	for i, w := range c.Words() {
		if w != ref.Words()[i] {
			t.Fatalf("AddHashes word %d differs", i)
		}
	}
}

// TestBloomAddNewHashes checks AddNewHashes: "added[i] reports whether key i
// changed the filter", a skipped key "is left out", and "limit bounds Count:
// AddNewHashes stops before the first key that it would add while Count()
// >= limit, and returns that key's index".
func TestBloomAddNewHashes(t *testing.T) {
	g, _ := bloom.Plan(1000, 0.001)
	f, _ := bloom.New(g, nil)
	var hs []uint64
	for i := range 100 {
		hs = append(hs, bloom.Hash(keyN("n", i)))
	}
	hs[50] = hs[10] // a duplicate: not new the second time
	skip := make([]bool, 100)
	skip[3] = true
	added := make([]bool, 100)
	blocks := make([]uint64, 100)
	n := f.AddNewHashes(hs, skip, added, blocks, 1000)
	if n != 100 {
		t.Fatalf("returned %d, want 100", n)
	}
	if added[3] || f.HasHash(hs[3]) && !added[3] && false {
		t.Error("skipped key added")
	}
	if added[50] {
		t.Error("duplicate reported added")
	}
	for i, h := range hs {
		if i != 3 && i != 50 && added[i] && blocks[i] != f.BlockOf(h) {
			t.Errorf("blocks[%d] = %d, BlockOf %d", i, blocks[i], f.BlockOf(h))
		}
	}
	f2, _ := bloom.New(g, nil)
	n = f2.AddNewHashes(hs, nil, added, blocks, 20)
	if f2.Count() != 20 || n != 20 {
		t.Errorf("limit 20: returned %d, Count %d", n, f2.Count())
	}
	if f2.HasHash(hs[20]) && f2.HasHash(hs[21]) && f2.HasHash(hs[22]) {
		t.Error("keys past the limit look added")
	}
}

// TestBloomAddHashesOwnedRange checks AddHashesOwned's "adds every hash of hs
// whose block lies in [lo, hi)" and the count of new adds, with base: "A hash
// is new when base, if not nil, and the filter together lack one of its bits".
func TestBloomAddHashesOwnedRange(t *testing.T) {
	g := bloom.Geometry{Blocks: 16, K: 4, Derivation: bloom.DeriveMul}
	base, _ := bloom.New(g, nil)
	f, _ := bloom.New(g, nil)
	var hs []uint64
	for i := range 200 {
		hs = append(hs, bloom.Hash(keyN("o", i)))
	}
	base.AddHash(hs[0])
	n := f.AddHashesOwned(hs, 0, 8, base, nil)
	var want uint64
	for i, h := range hs {
		in := f.BlockOf(h) < 8
		if in != f.HasHash(h) && !(f.HasHash(h) && !in) {
			t.Fatalf("hash %d (block %d): in range %v, present %v", i, f.BlockOf(h), in, f.HasHash(h))
		}
		_ = want
	}
	if n == 0 || n > 200 {
		t.Errorf("added %d", n)
	}
	if f.Count() != 0 {
		t.Error("AddHashesOwned moved Count")
	}
	// The base key, if its block is in range, is not new.
	f3, _ := bloom.New(g, nil)
	if f3.AddHashesOwned(hs[:1], 0, 16, base, nil) != 0 {
		t.Error("a hash base holds counted as new")
	}
	f4, _ := bloom.New(g, nil)
	if f4.AddHashesOwned(hs[:1], 0, 16, nil, func(uint64) bool { return true }) != 0 || f4.HasHash(hs[0]) {
		t.Error("seen=true hash was added")
	}
}
