package bloom

import "github.com/filterstore/filterstore/internal/owned"

// AddOwned is Add for a filter that one goroutine owns while it runs: no
// other goroutine calls any method of the filter (AddOwned included) or
// touches its words (through Words, a chain's or scalable filter's
// layers, or another mapping of them) from the call's start to its end,
// and the filter passes between goroutines only through a synchronizing
// operation (a channel, a mutex, a WaitGroup). It sets bits with plain
// writes instead of atomic ORs, as blobloom's Filter does (its SyncFilter
// is the counterpart of Add): the add for a filter built on one goroutine
// before it is shared, such as a storage engine's filter for a table it
// is writing. Breaking the contract is a data race, which the race
// detector reports.
//
// Unlike Add, it writes each word that holds one of the key's bits even
// when the bits are set already: not for words mapped read-only, and on a
// shared file mapping it dirties the page of every add.
//
// Before its positions were unrolled (AddHashOwned), BenchmarkAdd
// (-benchtime 4000000x) had it at 0.56-0.59x Add's time per
// key on a 16-core Xeon (36 and 47 ns at 1e6 and 1e7 keys) and 0.40-0.83x
// on the 2-vCPU development VM (three runs). Add's atomic ORs are locked
// instructions, which no later load may pass, so a loop of Adds waits out
// each add's cache miss in turn. AddOwned counts like Add.
func (f *Filter) AddOwned(key []byte) bool { return f.AddHashOwned(Hash(key)) }

// AddHashOwned is AddOwned for a key whose Hash is h. (AddHashesOwned, a
// bulk load's, adds the keys of a range of blocks and counts none.)
func (f *Filter) AddHashOwned(h uint64) bool {
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	blk := (*[BlockWords]uint64)(f.words[block*BlockWords:])
	k := f.g.K
	if k > bitPosPerDraw {
		if orBitsOwned(blk, draw, state, k) {
			owned.Inc(&f.count)
			return true
		}
		return false
	}
	if k < 3 {
		return f.addFirstOwned(blk, draw, k)
	}
	// Every position in the first draw (k = 6 at 1%), unrolled as Has
	// is: each set with a load, a bit set and a store to its word, set
	// already or not, and no branch on the filter's contents, so that the
	// processor runs ahead into the next adds and overlaps their cache
	// misses. Each position's old bit is ANDed into acc: the key is new
	// when one was clear. A loop over the positions (shifting the draw
	// by 9 bits each turn and ORing a mask of unset bits) took 1.25-1.29x
	// this code's time at 1e7 keys on the 2-vCPU VM (BenchmarkAdd/owned,
	// three alternated runs: 30.9-31.4 ns against 24.3-25.2 ns per key);
	// a mask array written to all eight words, 1.28-1.55x the loop's.
	d := draw
	acc := setOwned(blk, d, 0) & setOwned(blk, d, 1) & setOwned(blk, d, 2)
	if k > 3 {
		acc &= setOwned(blk, d, 3)
	}
	if k > 4 {
		acc &= setOwned(blk, d, 4)
	}
	if k > 5 {
		acc &= setOwned(blk, d, 5)
	}
	if k > 6 {
		acc &= setOwned(blk, d, 6)
	}
	if acc&1 == 0 {
		owned.Inc(&f.count)
		return true
	}
	return false
}

// setOwned sets, with a plain load and store, the bit of blk at position
// j of draw d, and returns its old word shifted so that bit 0 holds the
// position's old bit (bitAt's shape).
func setOwned(blk *[BlockWords]uint64, d uint64, j uint) uint64 {
	w := &blk[d>>(j*bitPosBits+6)&(BlockWords-1)]
	old := *w
	s := d >> (j * bitPosBits) & 63
	*w = old | 1<<s
	return old >> s
}

// addFirstOwned is AddHashOwned's add for k < 3 positions, all in the
// first draw.
func (f *Filter) addFirstOwned(blk *[BlockWords]uint64, draw uint64, k uint32) bool {
	var unset uint64
	for ; k > 0; k-- {
		w := &blk[draw>>6&(BlockWords-1)]
		bit := uint64(1) << (draw & 63)
		old := *w
		unset |= bit &^ old
		*w = old | bit
		draw >>= bitPosBits
	}
	if unset != 0 {
		owned.Inc(&f.count)
		return true
	}
	return false
}

// orBitsOwned is orBits with plain writes, for k > bitPosPerDraw: it
// writes each word of blk that holds one of the k positions, set already
// or not, and reports whether any was unset.
func orBitsOwned(blk *[BlockWords]uint64, draw, state uint64, k uint32) bool {
	var masks [BlockWords]uint64
	drawMasks(draw, state, k, &masks)
	var unset uint64
	for w, m := range &masks {
		if m != 0 {
			old := blk[w]
			unset |= m &^ old
			blk[w] = old | m
		}
	}
	return unset != 0
}
