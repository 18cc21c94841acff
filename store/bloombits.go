package store

import (
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
)

// bloomBits is a set of Bloom bits noted but not (or not surely) in a
// filter's words: the bits a batch's planned adds will set (Batch), the
// bits the adds logged after the checkpoint set (a read-only store's
// overlay). It maps a block of a layer, wkey{layer, block}, to the bits
// noted in its words.
type bloomBits map[wkey][bloom.BlockWords]uint64

// add notes the bits of h in layer i, of geometry g.
func (m bloomBits) add(i int, g bloom.Geometry, h uint64) {
	var buf [bloom.MaxK]uint16
	block, pos := g.Locate(h, buf[:0])
	k := wkey{i, block}
	blk := m[k]
	for _, q := range pos {
		blk[q/64] |= 1 << (q % 64)
	}
	m[k] = blk
}

// has reports whether every bit of h is set in layer i, l, with the bits
// m notes there ORed in.
func (m bloomBits) has(l *bloom.Filter, i int, h uint64) bool {
	var buf [bloom.MaxK]uint16
	block, pos := l.Geometry().Locate(h, buf[:0])
	noted := m[wkey{i, block}]
	return blockHas(l, block, pos, &noted)
}

// blockHas reports whether every bit at pos of block of l is set in its
// live words or in noted.
func blockHas(l *bloom.Filter, block uint64, pos []uint16, noted *[bloom.BlockWords]uint64) bool {
	words := l.Words()[block*bloom.BlockWords : (block+1)*bloom.BlockWords]
	for _, q := range pos {
		w, bit := q/64, uint64(1)<<(q%64)
		if noted[w]&bit == 0 && atomic.LoadUint64(&words[w])&bit == 0 {
			return false
		}
	}
	return true
}
