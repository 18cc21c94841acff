package blackbox2_test

import (
	"errors"
	"testing"

	"github.com/filterstore/filterstore/bitmap"
)

// TestBitmapBasics checks New's "words, which must hold at least Words(n)
// words; nil words allocates", ErrInvalid for "an offset or range outside the
// bitmap, a zero size, a word slice of the wrong length", Set/Clear's
// returned flags, Get's "offsets out of range are clear", CountRange's
// "[from, to)", and the layout "Bit off lives in word off/64 at bit position
// off%64".
func TestBitmapBasics(t *testing.T) {
	var err error
	for _, n := range []uint64{0, bitmap.MaxBits + 1} {
		noPanic(t, "New", func() { _, err = bitmap.New(n, nil) })
		wantIs(t, sprintf("New(%d)", n), err, bitmap.ErrInvalid)
	}
	noPanic(t, "New short", func() { _, err = bitmap.New(130, make([]uint64, 2)) })
	wantIs(t, "New with too few words", err, bitmap.ErrInvalid)
	if _, err := bitmap.New(130, make([]uint64, 4)); err != nil {
		t.Errorf("New with more words than needed: %v (doc: at least Words(n))", err)
	}
	if bitmap.Words(0) != 0 || bitmap.Words(1) != 1 || bitmap.Words(64) != 1 || bitmap.Words(65) != 2 {
		t.Error("Words(n)")
	}
	b, err := bitmap.New(130, nil)
	must(t, err)
	if b.Bits() != 130 || len(b.Words()) != 3 {
		t.Errorf("Bits %d words %d", b.Bits(), len(b.Words()))
	}
	for _, off := range []uint64{0, 63, 64, 129} {
		ch, err := b.Set(off)
		if !ch || err != nil {
			t.Errorf("Set(%d) = %v %v", off, ch, err)
		}
		if ch, _ := b.Set(off); ch {
			t.Errorf("second Set(%d) reported change", off)
		}
		if b.Words()[off/64]&(1<<(off%64)) == 0 {
			t.Errorf("bit %d not at word %d bit %d", off, off/64, off%64)
		}
	}
	if b.Count() != 4 {
		t.Errorf("Count %d", b.Count())
	}
	for _, off := range []uint64{130, 1 << 50} {
		if b.Get(off) {
			t.Errorf("Get(%d) out of range true", off)
		}
		if _, err := b.Set(off); !errors.Is(err, bitmap.ErrInvalid) {
			t.Errorf("Set(%d) = %v", off, err)
		}
		if _, err := b.Clear(off); !errors.Is(err, bitmap.ErrInvalid) {
			t.Errorf("Clear(%d) = %v", off, err)
		}
	}
	if n, err := b.CountRange(0, 130); n != 4 || err != nil {
		t.Errorf("CountRange(0,130) %d %v", n, err)
	}
	if n, err := b.CountRange(63, 64); n != 1 || err != nil {
		t.Errorf("CountRange(63,64) %d %v", n, err)
	}
	if n, err := b.CountRange(64, 64); n != 0 || err != nil {
		t.Errorf("CountRange(64,64) %d %v", n, err)
	}
	for _, r := range [][2]uint64{{0, 131}, {5, 4}, {131, 132}} {
		var err error
		noPanic(t, "CountRange", func() { _, err = b.CountRange(r[0], r[1]) })
		wantIs(t, sprintf("CountRange(%d,%d)", r[0], r[1]), err, bitmap.ErrInvalid)
	}
	if ch, err := b.Clear(64); !ch || err != nil || b.Count() != 3 {
		t.Errorf("Clear(64) = %v %v count %d", ch, err, b.Count())
	}
	if ch, _ := b.Clear(64); ch {
		t.Error("second Clear reported change")
	}
}

// TestBitmapCountClamp checks Count's "a value below 0 reads as 0 (never as
// 2^64-1) and one above Bits() as Bits()", SetCount's "(within [0, Bits()])",
// and Recount.
func TestBitmapCountClamp(t *testing.T) {
	b, _ := bitmap.New(100, nil)
	b.Set(1)
	b.SetCount(0)
	b.Clear(1)
	if b.Count() != 0 {
		t.Errorf("Count below zero reads %d", b.Count())
	}
	b.SetCount(1000)
	if b.Count() != 100 {
		t.Errorf("SetCount(1000) reads %d, want Bits() 100", b.Count())
	}
	b.Set(5)
	b.Set(6)
	if b.Recount() != 2 || b.Count() != 2 {
		t.Errorf("Recount %d", b.Count())
	}
	w := make([]uint64, 2)
	w[0] = 0xF
	b2, _ := bitmap.New(100, w)
	if b2.Recount() != 4 {
		t.Error("Recount over given words")
	}
}

// TestBitmapAndOr checks And/Or ("Both must have the same size", else
// ErrInvalid) and that Count stays exact afterwards ("Count stays exact under
// concurrency"; Count "returns the number of set bits").
func TestBitmapAndOr(t *testing.T) {
	a, _ := bitmap.New(200, nil)
	b, _ := bitmap.New(200, nil)
	c, _ := bitmap.New(201, nil)
	for i := uint64(0); i < 200; i += 3 {
		a.Set(i)
	}
	for i := uint64(0); i < 200; i += 5 {
		b.Set(i)
	}
	var err error
	noPanic(t, "Or", func() { err = a.Or(c) })
	wantIs(t, "Or of different sizes", err, bitmap.ErrInvalid)
	noPanic(t, "And", func() { err = a.And(c) })
	wantIs(t, "And of different sizes", err, bitmap.ErrInvalid)
	must(t, a.Or(b))
	want := uint64(0)
	for i := uint64(0); i < 200; i++ {
		if i%3 == 0 || i%5 == 0 {
			want++
			if !a.Get(i) {
				t.Fatalf("Or lost %d", i)
			}
		} else if a.Get(i) {
			t.Fatalf("Or set %d", i)
		}
	}
	if a.Count() != want {
		t.Errorf("Count after Or = %d, set bits %d", a.Count(), want)
	}
	must(t, a.And(b))
	if a.Count() != b.Count() {
		t.Errorf("Count after And = %d, set bits %d", a.Count(), b.Count())
	}
}

// TestBitmapTailBitsZero checks the package doc's "Bits at offsets >= Bits()
// in the last word are always zero" for a bitmap over given words whose tail
// is dirty: Or must not carry them in, Recount must not count them.
func TestBitmapTailBitsZero(t *testing.T) {
	w := []uint64{^uint64(0), ^uint64(0)}
	b, err := bitmap.New(70, w)
	if err != nil {
		return // refusing dirty words is fine too
	}
	if n := b.Recount(); n > 70 {
		t.Errorf("Recount %d > Bits 70: tail bits counted", n)
	}
	if n, _ := b.CountRange(0, 70); n != 70 {
		t.Errorf("CountRange %d", n)
	}
	a, _ := bitmap.New(70, nil)
	must(t, a.Or(b))
	if a.Words()[1]>>6 != 0 {
		t.Errorf("Or copied bits beyond Bits(): last word %#x", a.Words()[1])
	}
	if a.Count() > 70 || a.Recount() != 70 {
		t.Errorf("after Or: Count %d Recount %d", a.Count(), a.Recount())
	}
}
