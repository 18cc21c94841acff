package cuckoo

import (
	"iter"
	"sync/atomic"
	"unsafe"

	"github.com/filterstore/filterstore/internal/prefetch"
)

// Batched lookups. A lookup on a filter larger than the caches waits for
// two cache misses, its two buckets; HasManyHash computes the buckets of a
// batch of lookups and prefetches both words of each (internal/prefetch)
// before it reads any, and prefetches the next batch before it reads the
// current one, so that many misses are in flight at once.

// batchSize is how many lookups a batch addresses and prefetches (two
// words each) before it reads them: 16 lines in flight, as the Bloom
// filter's batches. On the 2-vCPU AMD VM, store's BenchmarkHasMany at 1e8
// keys took 36-45 ns/key with 8, 43-49 with 4, 52-56 with 16 and 58-62
// with 12 (two alternated runs). InsertHashes prefetches as far ahead.
const batchSize = 8

// hashChunk is how many keys HasMany hashes onto the stack before it looks
// them up.
const hashChunk = 256

// HasMany reports HasHash(Hash(keys[i])) in out[i] for every key. The
// answers go to out[:len(keys)], which is allocated only if cap(out) <
// len(keys), and that slice is returned. On a filter larger than the
// caches it is several times faster per key than a loop over Has.
func (f *Filter) HasMany(keys [][]byte, out []bool) []bool {
	out = resize(out, len(keys))
	var hs [hashChunk]uint64
	for i := 0; i < len(keys); i += hashChunk {
		n := min(hashChunk, len(keys)-i)
		for j := range n {
			hs[j] = Hash(keys[i+j])
		}
		f.hasPipelined(hs[:n], out[i:i+n])
	}
	return out
}

// HasManyHash is HasMany for keys given by their hashes: out[i] is
// HasHash(hs[i]), with the same guarantees during concurrent moves.
func (f *Filter) HasManyHash(hs []uint64, out []bool) []bool {
	out = resize(out, len(hs))
	f.hasPipelined(hs, out[:len(hs)])
	return out
}

// batch is one batch of lookups: both bucket words of each and its
// fingerprint.
type batch struct {
	words [2 * batchSize]unsafe.Pointer // lookup j's buckets at 2j, 2j+1
	fps   [batchSize]uint64
	n     int // lookups in the batch
}

// address fills b for the first min(len(hs), batchSize) lookups of hs
// and prefetches their buckets.
func (f *Filter) address(hs []uint64, b *batch) {
	hs = hs[:min(len(hs), batchSize)]
	for j, h := range hs {
		var i1, fp, i2 uint64
		if f.g.Derivation != DeriveMix { // the common case, inline
			var z uint64
			i1, fp, z = f.g.mulParts(h)
			i2 = altIn(i1, z, f.g.Buckets, f.split)
		} else {
			i1, fp, i2 = f.g.locateMix(h)
		}
		b.words[2*j] = unsafe.Pointer(&f.words[i1])
		b.words[2*j+1] = unsafe.Pointer(&f.words[i2])
		b.fps[j] = fp
	}
	b.n = len(hs)
	prefetch.Lines(b.words[:2*len(hs)])
}

// batches yields the batches of hs in order, each with the offset of its
// first lookup in hs, and addresses (so prefetches) each batch before it
// yields the one before: the loop of HasManyHash and of Build's first
// phase.
func (f *Filter) batches(hs []uint64) iter.Seq2[int, *batch] {
	return func(yield func(int, *batch) bool) {
		var bs [2]batch
		f.address(hs, &bs[0])
		for i, cur := 0, 0; i < len(hs); i, cur = i+batchSize, cur^1 {
			if next := i + batchSize; next < len(hs) {
				f.address(hs[next:], &bs[cur^1])
			}
			if !yield(i, &bs[cur]) {
				return
			}
		}
	}
}

// hasPipelined answers the lookups of hs into out[:len(hs)], batch by
// batch, prefetching the buckets of batch i+1 before it reads batch i.
//
// Like HasHash, a batch reads the move-sequence counter before it reads
// any bucket; a miss stands only if the counter was even and has not moved
// once the whole batch is read, and each miss is retried alone otherwise.
func (f *Filter) hasPipelined(hs []uint64, out []bool) {
	out = out[:len(hs)]
	for i, b := range f.batches(hs) {
		n := b.n
		s := atomic.LoadUint64(f.seq)
		missed := false
		for j := range n {
			v1 := atomic.LoadUint64((*uint64)(b.words[2*j]))
			v2 := atomic.LoadUint64((*uint64)(b.words[2*j+1]))
			// Branch-free: both words are on their way already.
			ok := f.lanes(v1, b.fps[j])|f.lanes(v2, b.fps[j]) != 0
			out[i+j] = ok
			missed = missed || !ok
		}
		if !missed || f.stable(s) {
			continue
		}
		for j := range n {
			if !out[i+j] {
				var i1, fp, i2 uint64
				if f.g.Derivation != DeriveMix { // the common case, inline
					var z uint64
					i1, fp, z = f.g.mulParts(hs[i+j])
					i2 = altIn(i1, z, f.g.Buckets, f.split)
				} else {
					i1, fp, i2 = f.g.locateMix(hs[i+j])
				}
				out[i+j] = f.hasRetry(f.own, i1, fp, i2)
			}
		}
	}
}

// lanes returns the SWAR zero-lane bits of v ^ broadcast(fp): nonzero
// exactly when match(v, fp).
func (f *Filter) lanes(v, fp uint64) uint64 {
	x := v ^ fp*f.lo
	return (x - f.lo) &^ x & f.hi
}

// resize returns out[:n], allocating a new slice if out is too short.
func resize(out []bool, n int) []bool {
	if cap(out) < n {
		return make([]bool, n)
	}
	return out[:n]
}
