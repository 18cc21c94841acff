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
// BenchmarkAdd (-benchtime 4000000x) had it at 0.56-0.59x Add's time per
// key on a 16-core Xeon (36 and 47 ns at 1e6 and 1e7 keys) and 0.40-0.83x
// on the 2-vCPU development VM (three runs), before its positions were
// unrolled (below). Add's atomic ORs are locked instructions, which no
// later load may pass, so a loop of Adds waits out each add's cache miss
// in turn. AddOwned counts like Add.
func (f *Filter) AddOwned(key []byte) bool {
	// AddHashOwned's body, with the key hashed here, as Has does with
	// HasHash's: one call level less. Against AddHashOwned(Hash(key)),
	// bench's compare at 1e7 (fs-bloom-owned against blobloom, 3
	// rounds, four alternated runs of each build on the 2-vCPU VM) had
	// this form's builds at 0.80-1.01x blobloom's (three of four at
	// 0.98x or less), that one's at 1.01-1.03x.
	h := Hash(key)
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	blk := f.block(block)
	k := f.g.K
	if k < 3 || k > bitPosPerDraw {
		return f.addOwnedAnyK(blk, draw, state, k)
	}
	d := draw
	changed := setOwned(blk, d, 0) | setOwned(blk, d, 1) | setOwned(blk, d, 2)
	if k > 3 {
		changed |= setOwned(blk, d, 3)
	}
	if k > 4 {
		changed |= setOwned(blk, d, 4)
	}
	if k > 5 {
		changed |= setOwned(blk, d, 5)
	}
	if k > 6 {
		changed |= setOwned(blk, d, 6)
	}
	if changed != 0 {
		owned.Inc(&f.count)
		return true
	}
	return false
}

// AddHashOwned is AddOwned for a key whose Hash is h. (AddHashesOwned, a
// bulk load's, adds the keys of a range of blocks and counts none.)
func (f *Filter) AddHashOwned(h uint64) bool {
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	blk := f.block(block)
	k := f.g.K
	if k < 3 || k > bitPosPerDraw {
		return f.addOwnedAnyK(blk, draw, state, k)
	}
	// Every position in the first draw (k = 6 at 1%), unrolled as Has
	// is, with constant shifts: each set with a load, a bit set and a
	// store to its word, set already or not, and no branch on the
	// filter's contents, so that the processor runs ahead into the next
	// adds and overlaps their cache misses. changed collects the bits
	// that flipped: the key is new when one did. Fewer instructions per
	// add let more adds overlap. On the 2-vCPU VM at 1e7 keys
	// (BenchmarkAdd/owned, three alternated runs each), a loop over the
	// positions, shifting the draw by 9 bits each turn and ORing a mask
	// of unset bits, took 1.25-1.29x the time of this form's first
	// version (30.9-31.4 ns against 24.3-25.2 ns a key), which ANDed
	// each position's old bit (a shift by a variable count) and sliced
	// the block with bounds checks; this one took 0.95-0.99x of that
	// (22.6-23.6 ns against 23.9-24.1). A mask array written to all
	// eight words had taken 1.28-1.55x the loop's time.
	d := draw
	changed := setOwned(blk, d, 0) | setOwned(blk, d, 1) | setOwned(blk, d, 2)
	if k > 3 {
		changed |= setOwned(blk, d, 3)
	}
	if k > 4 {
		changed |= setOwned(blk, d, 4)
	}
	if k > 5 {
		changed |= setOwned(blk, d, 5)
	}
	if k > 6 {
		changed |= setOwned(blk, d, 6)
	}
	if changed != 0 {
		owned.Inc(&f.count)
		return true
	}
	return false
}

// addOwnedAnyK is AddHashOwned's add for k < 3 or k > bitPosPerDraw.
func (f *Filter) addOwnedAnyK(blk *[BlockWords]uint64, draw, state uint64, k uint32) bool {
	var changed bool
	if k < 3 {
		changed = addFirstOwned(blk, draw, k)
	} else {
		changed = orBitsOwned(blk, draw, state, k)
	}
	if changed {
		owned.Inc(&f.count)
	}
	return changed
}

// setOwned sets, with a plain load and store, the bit of blk at position
// j of draw d, and returns the bits of its word that changed: the
// position's bit if it was clear, else 0.
func setOwned(blk *[BlockWords]uint64, d uint64, j uint) uint64 {
	w := &blk[d>>(j*bitPosBits+6)&(BlockWords-1)]
	old := *w
	v := old | 1<<(d>>(j*bitPosBits)&63)
	*w = v
	return old ^ v
}

// addFirstOwned sets the k < 3 positions of draw in blk with plain
// writes and reports whether any was unset.
func addFirstOwned(blk *[BlockWords]uint64, draw uint64, k uint32) bool {
	var unset uint64
	for ; k > 0; k-- {
		w := &blk[draw>>6&(BlockWords-1)]
		bit := uint64(1) << (draw & 63)
		old := *w
		unset |= bit &^ old
		*w = old | bit
		draw >>= bitPosBits
	}
	return unset != 0
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
