package bitmap

import (
	"fmt"
	"math/bits"
	"sync/atomic"
)

// MaxBits bounds a bitmap's size (2^40 bits = 128 GiB).
const MaxBits = 1 << 40

// Bitmap is a fixed-size bit array over a []uint64 it does not own.
type Bitmap struct {
	n     uint64 // number of bits; 1 <= n <= MaxBits
	words []uint64
	count atomic.Uint64 // set bits
}

// tailMask returns the bits of a bitmap of n bits' last word that are
// in the bitmap.
func tailMask(n uint64) uint64 {
	if n%64 == 0 {
		return ^uint64(0)
	}
	return 1<<(n%64) - 1
}

// Words returns the number of uint64 words that hold n bits.
func Words(n uint64) uint64 { return (n + 63) / 64 }

// New returns a bitmap of n bits over words, which must hold at least
// Words(n) words; nil words allocates. Count starts at 0 for nil words and
// is otherwise unknown until SetCount or Recount: reopening a large bitmap
// must not read every page. nil words are n/8 bytes of the Go heap: a
// process without that much memory dies of it (the runtime's out of
// memory is fatal, as for any allocation), MaxBits being 128 GiB.
func New(n uint64, words []uint64) (*Bitmap, error) {
	if n == 0 || n > MaxBits {
		return nil, fmt.Errorf("bitmap: %w: bits must be in 1..%d, got %d", ErrInvalid, uint64(MaxBits), n)
	}
	need := Words(n)
	if words == nil {
		words = make([]uint64, need)
	}
	if uint64(len(words)) < need {
		return nil, fmt.Errorf("bitmap: %w: %d bits need %d words, got %d", ErrInvalid, n, need, len(words))
	}
	return &Bitmap{n: n, words: words[:need]}, nil
}

// Bits returns the size of the bitmap in bits.
func (b *Bitmap) Bits() uint64 { return b.n }

// Words returns the words holding the bits.
func (b *Bitmap) Words() []uint64 { return b.words }

func (b *Bitmap) check(op string, off uint64) error {
	if off >= b.n {
		return fmt.Errorf("bitmap: %s: %w: offset %d out of range 0..%d", op, ErrInvalid, off, b.n-1)
	}
	return nil
}

// Set sets bit off and reports whether it was clear before.
func (b *Bitmap) Set(off uint64) (bool, error) {
	if err := b.check("set", off); err != nil {
		return false, err
	}
	m := uint64(1) << (off % 64)
	if atomic.OrUint64(&b.words[off/64], m)&m != 0 {
		return false, nil
	}
	b.count.Add(1)
	return true, nil
}

// Clear clears bit off and reports whether it was set before.
func (b *Bitmap) Clear(off uint64) (bool, error) {
	if err := b.check("clear", off); err != nil {
		return false, err
	}
	m := uint64(1) << (off % 64)
	if atomic.AndUint64(&b.words[off/64], ^m)&m == 0 {
		return false, nil
	}
	b.addCount(-1)
	return true, nil
}

// addCount adds d to the count, modulo 2^64: concurrent Sets and Clears
// each change the word first and the count after, so a Clear's decrement
// can come before the Set's increment it undoes, and only modular sums
// stay exact (Count hides a value below 0, see there).
func (b *Bitmap) addCount(d int64) { b.count.Add(uint64(d)) }

// Get reports whether bit off is set; offsets out of range are clear.
func (b *Bitmap) Get(off uint64) bool {
	if off >= b.n {
		return false
	}
	return atomic.LoadUint64(&b.words[off/64])&(1<<(off%64)) != 0
}

// Count returns the number of set bits: exact once the changes running
// beside it have returned. The count is kept modulo 2^64, and Count
// reads it within [0, Bits()]: a Clear's decrement may come before the
// increment of the Set it undoes, or the reverse, and SetCount may have
// restored a count too low, so a value below 0 reads as 0 (never as
// 2^64-1) and one above Bits() as Bits().
func (b *Bitmap) Count() uint64 {
	switch c := b.count.Load(); {
	case c <= b.n:
		return c
	case c >= 1<<63: // below 0
		return 0
	default:
		return b.n
	}
}

// SetCount sets the value Count reports (within [0, Bits()], see Count);
// the store restores it from its catalog after a reopen.
func (b *Bitmap) SetCount(n uint64) { b.count.Store(n) }

// Recount counts the set bits by reading every word, stores the result as
// the new Count and returns it.
func (b *Bitmap) Recount() uint64 {
	n, _ := b.CountRange(0, b.n)
	b.count.Store(n)
	return n
}

// CountRange returns the number of set bits at offsets in [from, to).
func (b *Bitmap) CountRange(from, to uint64) (uint64, error) {
	if from > to || to > b.n {
		return 0, fmt.Errorf("bitmap: count range: %w: [%d, %d) is not within [0, %d)", ErrInvalid, from, to, b.n)
	}
	if from == to {
		return 0, nil
	}
	first, last := from/64, (to-1)/64
	lo := ^uint64(0) << (from % 64)
	hi := ^uint64(0) >> (63 - (to-1)%64)
	if first == last {
		return uint64(bits.OnesCount64(atomic.LoadUint64(&b.words[first]) & lo & hi)), nil
	}
	n := bits.OnesCount64(atomic.LoadUint64(&b.words[first]) & lo)
	for i := first + 1; i < last; i++ {
		n += bits.OnesCount64(atomic.LoadUint64(&b.words[i]))
	}
	n += bits.OnesCount64(atomic.LoadUint64(&b.words[last]) & hi)
	return uint64(n), nil
}

// And clears every bit of b that is clear in o. Both must have the same
// size.
func (b *Bitmap) And(o *Bitmap) error {
	return b.combine("and", o, atomic.AndUint64, func(old, w uint64) uint64 { return old & w })
}

// Or sets every bit of b that is set in o. Both must have the same size.
func (b *Bitmap) Or(o *Bitmap) error {
	return b.combine("or", o, atomic.OrUint64, func(old, w uint64) uint64 { return old | w })
}

func (b *Bitmap) combine(op string, o *Bitmap, apply func(*uint64, uint64) uint64, result func(old, w uint64) uint64) error {
	if o == nil || o.n != b.n {
		size := uint64(0)
		if o != nil {
			size = o.n
		}
		return fmt.Errorf("bitmap: %s: %w: sizes differ (%d and %d bits)", op, ErrInvalid, b.n, size)
	}
	for i := range b.words {
		m := ^uint64(0)
		if i == len(b.words)-1 {
			// Words given to New may hold bits past Bits(): none of
			// o's may reach b, and none of b's is counted.
			m = tailMask(b.n)
		}
		w := atomic.LoadUint64(&o.words[i]) & m
		if op == "and" {
			w |= ^m // leave b's bits past Bits() as they are
		}
		old := apply(&b.words[i], w)
		d := bits.OnesCount64(result(old, w)&m) - bits.OnesCount64(old&m)
		b.addCount(int64(d))
	}
	return nil
}
