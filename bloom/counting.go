package bloom

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Words is word memory that a non-monotonic mutation reads and writes; the
// store implements it to capture after-images for the WAL and to defer
// applying them. Store must write the value atomically.
//
// Indexes are word indexes into the filter, below Geometry.Words(). A
// mutation loads each word it changes before storing it, and stores each
// changed word once, after all its loads: the stored values are the
// after-images of the mutation.
type Words interface {
	Load(i uint64) uint64
	Store(i, v uint64)
}

// atomicWords is the Words of a slice, accessed with atomic loads and stores.
type atomicWords []uint64

func (w atomicWords) Load(i uint64) uint64 { return atomic.LoadUint64(&w[i]) }
func (w atomicWords) Store(i, v uint64)    { atomic.StoreUint64(&w[i], v) }

// Counting is a blocked counting Bloom filter: each key increments K 4-bit
// saturating counters inside one 512-bit block of 128 counters, so keys can
// be deleted.
//
// A counter that reaches MaxCounter (15) saturates: it is never incremented
// or decremented again, because its true value is no longer known.
// Decrementing it could give false negatives; the cost is that keys whose
// counters all saturated stay present after their deletion.
//
// All methods are safe for concurrent use. Lookups take no lock and read the
// words with atomic loads; mutations are serialized by a mutex and write
// whole words atomically, so a reader sees each counter either before or
// after a mutation.
type Counting struct {
	g     Geometry
	words []uint64   // len(words) == g.Words()
	own   Words      // atomicWords(words), boxed once: a lookup allocates nothing
	mu    sync.Mutex // serializes mutations
	items atomic.Uint64
}

// NewCounting returns a counting filter of geometry g (see PlanCounting)
// over words, which must hold exactly g.Words() words, or, if words is nil,
// over newly allocated zeroed words. Its Items starts at 0 (see SetItems).
func NewCounting(g Geometry, words []uint64) (*Counting, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if words == nil {
		var err error
		if words, err = heapWords(g); err != nil {
			return nil, err
		}
	} else if uint64(len(words)) != g.Words() {
		return nil, fmt.Errorf("bloom: %w: words must hold %d words for %d blocks, got %d",
			ErrInvalid, g.Words(), g.Blocks, len(words))
	}
	return &Counting{g: g, words: words, own: atomicWords(words)}, nil
}

// Geometry returns the filter's geometry.
func (c *Counting) Geometry() Geometry { return c.g }

// Words returns the words the filter works on (not a copy).
func (c *Counting) Words() []uint64 { return c.words }

// Items returns the number of adds minus the number of successful deletes.
func (c *Counting) Items() uint64 { return c.items.Load() }

// SetItems sets the value Items reports; the store restores it after
// reopening a filter.
func (c *Counting) SetItems(n uint64) { c.items.Store(n) }

// EstimateFPR returns EstimateCountingFPR(c.Geometry(), c.Items()).
func (c *Counting) EstimateFPR() float64 { return EstimateCountingFPR(c.g, c.Items()) }

// FillRatio returns the fraction of counters that are not zero. It reads
// every word: O(size of the filter).
func (c *Counting) FillRatio() float64 {
	var nonzero uint64
	for i := range c.words {
		nonzero += uint64(NonzeroCounters(atomic.LoadUint64(&c.words[i])))
	}
	return float64(nonzero) / float64(c.g.Blocks*CountersPerBlock)
}

// NonzeroCounters returns how many of the 16 4-bit counters of data word v
// are not zero: the fill numerator of one word of a counting filter.
func NonzeroCounters(v uint64) int {
	const lo = 0x1111111111111111
	v |= v >> 2
	v |= v >> 1
	return bits.OnesCount64(v & lo)
}

// Add increments the counters of key.
func (c *Counting) Add(key []byte) { c.AddHash(Hash(key)) }

// AddHash increments the counters of the key whose Hash is h.
func (c *Counting) AddHash(h uint64) { c.AddTo(c.own, h) }

// Delete decrements the counters of key and reports whether it did. If some
// counter shows key cannot be present, Delete changes nothing and returns
// false. Deleting a key that was never added (a false positive) corrupts
// the filter for other keys, as in every counting Bloom filter.
func (c *Counting) Delete(key []byte) bool { return c.DeleteHash(Hash(key)) }

// DeleteHash is Delete for a key whose Hash is h.
func (c *Counting) DeleteHash(h uint64) bool { return c.DeleteFrom(c.own, h) }

// AddTo is AddHash with every read and write of the filter's words done
// through w (the filter's own words are not touched unless w writes them).
// It increments each of the K counters once per occurrence among the K
// positions, never beyond MaxCounter, and increments Items. w must not
// call back into c.
func (c *Counting) AddTo(w Words, h uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(w, h)
}

// addLocked is AddTo with c.mu held.
func (c *Counting) addLocked(w Words, h uint64) {
	c.addWords(w, h)
	c.items.Add(1)
}

// addWords increments the counters of h through w, as addLocked does,
// without counting the item.
func (c *Counting) addWords(w Words, h uint64) {
	var pos [MaxK]uint8
	block := c.positions(h, &pos)
	base := block * BlockWords
	var vals [BlockWords]uint64
	var loaded, dirty uint8
	for _, p := range pos[:c.g.K] {
		wi, sh := p/CountersPerWord, uint(p%CountersPerWord)*CounterBits
		if loaded&(1<<wi) == 0 {
			vals[wi] = w.Load(base + uint64(wi))
			loaded |= 1 << wi
		}
		if vals[wi]>>sh&MaxCounter != MaxCounter {
			vals[wi] += 1 << sh
			dirty |= 1 << wi
		}
	}
	c.store(w, base, &vals, dirty)
}

// DeleteFrom is DeleteHash with every read and write of the filter's words
// done through w. It decrements each of the K counters once per occurrence
// among the K positions, skipping saturated counters, only if no counter
// would go below zero; otherwise it writes nothing and returns false. On
// success it decrements Items (not below 0). w must not call back into c.
func (c *Counting) DeleteFrom(w Words, h uint64) bool {
	var pos [MaxK]uint8
	block := c.positions(h, &pos)
	base := block * BlockWords
	var vals [BlockWords]uint64
	var loaded, dirty uint8
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range pos[:c.g.K] {
		wi, sh := p/CountersPerWord, uint(p%CountersPerWord)*CounterBits
		if loaded&(1<<wi) == 0 {
			vals[wi] = w.Load(base + uint64(wi))
			loaded |= 1 << wi
		}
		switch vals[wi] >> sh & MaxCounter {
		case 0:
			return false
		case MaxCounter:
			// Saturated: the true count is unknown; keep it.
		default:
			vals[wi] -= 1 << sh
			dirty |= 1 << wi
		}
	}
	c.store(w, base, &vals, dirty)
	for {
		n := c.items.Load()
		if n == 0 || c.items.CompareAndSwap(n, n-1) {
			break
		}
	}
	return true
}

// store writes the dirty words of vals, the block at word base, through w.
func (c *Counting) store(w Words, base uint64, vals *[BlockWords]uint64, dirty uint8) {
	for wi := range uint64(BlockWords) {
		if dirty&(1<<wi) != 0 {
			w.Store(base+wi, vals[wi])
		}
	}
}

// Has reports whether key may be in the filter: false means definitely not.
func (c *Counting) Has(key []byte) bool { return c.HasHash(Hash(key)) }

// HasHash is Has for a key whose Hash is h.
func (c *Counting) HasHash(h uint64) bool {
	block, draw, state := locateMul(h, c.g.Salt, c.g.Blocks)
	if c.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, c.g.Salt, c.g.Blocks)
	}
	// As Filter.HasHash: the block by pointer arithmetic (block <
	// Blocks, len(c.words) == c.g.Words()), and for k = 3..9 (every
	// position in the first draw) the first two counters decide with one
	// early exit, the rest are tested without branches, inline.
	blk := (*[BlockWords]uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(c.words)), block*BlockWords*8))
	k := c.g.K
	if k < 3 || k > ctrPosPerDraw {
		return hasCounters(blk, draw, state, k)
	}
	d := draw
	if counterZero(blk, d, 0)|counterZero(blk, d, 1) != 0 {
		return false
	}
	zero := counterZero(blk, d, 2)
	if k > 3 {
		zero |= counterZero(blk, d, 3)
	}
	if k > 4 {
		zero |= counterZero(blk, d, 4)
	}
	if k > 5 {
		zero |= counterZero(blk, d, 5)
	}
	if k > 6 {
		zero |= counterZero(blk, d, 6)
	}
	if k > 7 {
		zero |= counterZero(blk, d, 7)
	}
	if k > 8 {
		zero |= counterZero(blk, d, 8)
	}
	return zero == 0
}

// hasCounters reports whether every one of the k counters of the position
// stream (draw, state) in blk is nonzero, exiting at the first zero.
func hasCounters(blk *[BlockWords]uint64, draw, state uint64, k uint32) bool {
	for j, left := uint32(0), uint32(ctrPosPerDraw); j < k; j++ {
		if left == 0 {
			state, draw = nextDraw(state)
			left = ctrPosPerDraw
		}
		left--
		p := draw & ctrPosMask
		draw >>= ctrPosBits
		if atomic.LoadUint64(&blk[p/CountersPerWord])>>(p%CountersPerWord*CounterBits)&MaxCounter == 0 {
			return false
		}
	}
	return true
}

// Count returns the minimum of key's counters: an upper bound on the number
// of times key was added and not deleted (exact unless other keys share all
// its counters), at most MaxCounter.
func (c *Counting) Count(key []byte) uint64 { return c.CountHash(Hash(key)) }

// CountHash is Count for a key whose Hash is h.
func (c *Counting) CountHash(h uint64) uint64 { return c.CountFrom(c.own, h) }

// CountFrom is CountHash with the words read through w, so that the store
// can answer from memory that includes changes not yet applied.
func (c *Counting) CountFrom(w Words, h uint64) uint64 {
	var pos [MaxK]uint8
	block := c.positions(h, &pos)
	base := block * BlockWords
	m := uint64(MaxCounter)
	for _, p := range pos[:c.g.K] {
		v := w.Load(base+uint64(p/CountersPerWord)) >> (uint(p%CountersPerWord) * CounterBits) & MaxCounter
		if v < m {
			if m = v; m == 0 {
				break
			}
		}
	}
	return m
}

// BlockOf returns the index of the block that holds h's counters (its
// words are Words()[BlockOf(h)*BlockWords:][:BlockWords]).
func (c *Counting) BlockOf(h uint64) uint64 {
	block, _, _ := locateMul(h, c.g.Salt, c.g.Blocks)
	if c.g.Derivation != DeriveMul {
		block, _, _ = locateMix(h, c.g.Salt, c.g.Blocks)
	}
	return block
}

// positions returns the block of hash h and writes its K counter positions
// (0..127) to pos.
func (c *Counting) positions(h uint64, pos *[MaxK]uint8) uint64 {
	block, draw, state := locateMul(h, c.g.Salt, c.g.Blocks)
	if c.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, c.g.Salt, c.g.Blocks)
	}
	for j, left := uint32(0), uint32(ctrPosPerDraw); j < c.g.K; j++ {
		if left == 0 {
			state, draw = nextDraw(state)
			left = ctrPosPerDraw
		}
		left--
		pos[j] = uint8(draw & ctrPosMask)
		draw >>= ctrPosBits
	}
	return block
}
