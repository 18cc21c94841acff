package fuzz

import (
	"errors"
	"testing"

	"github.com/filterstore/filterstore/bitmap"
)

// refBitmap is the reference bitmap: one bool per bit.
type refBitmap struct {
	bits  []bool
	count uint64
}

func (r *refBitmap) set(off uint64, v bool) bool {
	if off >= uint64(len(r.bits)) || r.bits[off] == v {
		return false
	}
	r.bits[off] = v
	if v {
		r.count++
	} else {
		r.count--
	}
	return true
}

func (r *refBitmap) countRange(from, to uint64) uint64 {
	var n uint64
	for _, b := range r.bits[from:to] {
		if b {
			n++
		}
	}
	return n
}

// bitmapSentinel fills the words past a bitmap's end in its backing slice:
// no operation may touch them.
const bitmapSentinel = 0xfeed_f00d_dead_beef

// FuzzBitmapOps runs Set/Clear/Get/Count/CountRange/And/Or/Recount on two
// bitmaps of 1..1024 bits (usually of equal size, sometimes not) over
// backing slices longer than they need. Properties: every answer and the
// final words equal a []bool model; out-of-range offsets and ranges and
// mismatched sizes fail with ErrInvalid and change nothing; bits past the
// end of the last word stay zero and words past it are never touched; Count
// stays exact through And/Or (Recount agrees).
func FuzzBitmapOps(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := newInput(data)
		n := 1 + uint64(in.u16()%1024)
		n2 := n
		if in.u8()&7 == 0 {
			n2 = 1 + uint64(in.u16()%1024)
		}
		extra := uint64(in.intn(3))
		mk := func(n uint64) (*bitmap.Bitmap, []uint64, *refBitmap) {
			words := make([]uint64, bitmap.Words(n)+extra)
			for i := bitmap.Words(n); i < uint64(len(words)); i++ {
				words[i] = bitmapSentinel
			}
			b, err := bitmap.New(n, words)
			if err != nil {
				t.Fatalf("New(%d, %d words): %v", n, len(words), err)
			}
			if uint64(len(b.Words())) != bitmap.Words(n) || b.Bits() != n {
				t.Fatalf("New(%d): %d bits in %d words", n, b.Bits(), len(b.Words()))
			}
			return b, words, &refBitmap{bits: make([]bool, n)}
		}
		a, aw, ra := mk(n)
		o, ow, ro := mk(n2)
		pickOff := func(n uint64) uint64 { return uint64(in.u16()) % (n + 70) }
		invalid := func(ops int, what string, err error) {
			t.Helper()
			if !errors.Is(err, bitmap.ErrInvalid) {
				t.Fatalf("op %d: %s: %v, want ErrInvalid", ops, what, err)
			}
		}
		for ops := 0; in.more() && ops < maxOps; ops++ {
			switch op := in.intn(10); op {
			case 0, 1, 2, 3:
				b, r := a, ra
				if op >= 2 {
					b, r = o, ro
				}
				off := pickOff(b.Bits())
				set := op%2 == 0
				var got bool
				var err error
				if set {
					got, err = b.Set(off)
				} else {
					got, err = b.Clear(off)
				}
				if off >= b.Bits() {
					invalid(ops, "Set/Clear out of range", err)
					break
				}
				if err != nil {
					t.Fatalf("op %d: Set/Clear(%d) of %d bits: %v", ops, off, b.Bits(), err)
				}
				if want := r.set(off, set); got != want {
					t.Fatalf("op %d: Set/Clear(%d, %v) = %v, model %v", ops, off, set, got, want)
				}
			case 4:
				off := pickOff(n)
				if got, want := a.Get(off), off < n && ra.bits[off]; got != want {
					t.Fatalf("op %d: Get(%d) = %v, model %v", ops, off, got, want)
				}
			case 5:
				from, to := uint64(in.u16())%(n+3), uint64(in.u16())%(n+3)
				got, err := a.CountRange(from, to)
				if from > to || to > n {
					invalid(ops, "CountRange out of range", err)
					break
				}
				if want := ra.countRange(from, to); err != nil || got != want {
					t.Fatalf("op %d: CountRange(%d, %d) = %d, %v; model %d", ops, from, to, got, err, want)
				}
			case 6, 7:
				and := op == 6
				src, rsrc := o, ro
				if in.u8()&3 == 0 {
					src, rsrc = a, ra // with itself
				}
				var err error
				if and {
					err = a.And(src)
				} else {
					err = a.Or(src)
				}
				if src.Bits() != n {
					invalid(ops, "And/Or of different sizes", err)
					break
				}
				if err != nil {
					t.Fatalf("op %d: And/Or: %v", ops, err)
				}
				for i := range ra.bits {
					v := ra.bits[i]
					if and {
						v = v && rsrc.bits[i]
					} else {
						v = v || rsrc.bits[i]
					}
					ra.set(uint64(i), v)
				}
			case 8:
				if got := a.Recount(); got != ra.count {
					t.Fatalf("op %d: Recount() = %d, model %d", ops, got, ra.count)
				}
			case 9:
				if err := a.And(nil); !errors.Is(err, bitmap.ErrInvalid) {
					t.Fatalf("op %d: And(nil) = %v, want ErrInvalid", ops, err)
				}
			}
			for _, c := range []struct {
				b *bitmap.Bitmap
				r *refBitmap
			}{{a, ra}, {o, ro}} {
				if c.b.Count() != c.r.count {
					t.Fatalf("op %d: Count() = %d, model %d", ops, c.b.Count(), c.r.count)
				}
				ws := c.b.Words()
				if tail := c.b.Bits() % 64; tail != 0 && ws[len(ws)-1]>>tail != 0 {
					t.Fatalf("op %d: bits past the end of a %d-bit bitmap are set: %#x", ops, c.b.Bits(), ws[len(ws)-1])
				}
			}
		}
		for _, c := range []struct {
			b     *bitmap.Bitmap
			words []uint64
			r     *refBitmap
		}{{a, aw, ra}, {o, ow, ro}} {
			for i, v := range c.r.bits {
				if got := c.words[i/64]>>(i%64)&1 == 1; got != v {
					t.Fatalf("bit %d is %v, model %v", i, got, v)
				}
				if c.b.Get(uint64(i)) != v {
					t.Fatalf("Get(%d) = %v, model %v", i, !v, v)
				}
			}
			for i := bitmap.Words(c.b.Bits()); i < uint64(len(c.words)); i++ {
				if c.words[i] != bitmapSentinel {
					t.Fatalf("word %d past the end of a %d-bit bitmap was written: %#x", i, c.b.Bits(), c.words[i])
				}
			}
			if got, err := c.b.CountRange(0, c.b.Bits()); err != nil || got != c.r.count {
				t.Fatalf("CountRange(0, %d) = %d, %v; model %d", c.b.Bits(), got, err, c.r.count)
			}
		}
	})
}
