package cuckoo

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/filterstore/filterstore/internal/prefetch"
)

// node is one bucket of the breadth-first displacement search. The
// fingerprint in slot `slot` of the parent's bucket would move into bucket.
type node struct {
	bucket uint64
	parent int32 // index in the queue; -1 for the roots i1 and i2
	slot   int32 // slot of the parent bucket whose fingerprint moves here
}

var queuePool = sync.Pool{New: func() any { q := make([]node, 0, 2*MaxIterations); return &q }}

// rand returns a fresh pseudo-random word for one insert (splitmix64 over an
// atomic counter seeded with the salt: cheap, race-free, reproducible for a
// given sequence of operations).
func (f *Filter) rand() uint64 { return mix(f.rng.Add(fpConst)) }

// InsertTo adds h, reading and writing buckets through w. If bucket i1 or
// i2 has an empty slot the fingerprint goes there (one store). Otherwise a
// path of displacements to a free slot is searched breadth-first, without
// writing, examining at most maxIter buckets (0 means MaxIterations; at
// most MaxIterationsLimit, or the call fails with ErrInvalid); the
// moves are then applied from the end of the path backwards, one word store
// each, so every stored fingerprint stays in one of its buckets throughout.
// If no path is found it returns an error wrapping ErrFull and changes
// nothing. Each call re-reads words through w, so w may overlay pending
// changes. Callers serialize mutations; if w is not the filter's own memory,
// apply the captured words with Apply.
func (f *Filter) InsertTo(w Words, h uint64, maxIter int) error {
	if w == nil {
		return fmt.Errorf("cuckoo: %w: w must not be nil", ErrInvalid)
	}
	if maxIter < 0 || maxIter > MaxIterationsLimit {
		return fmt.Errorf("cuckoo: %w: maxIter must be in 0..%d (0 = %d), got %d", ErrInvalid, MaxIterationsLimit, MaxIterations, maxIter)
	}
	if maxIter == 0 {
		maxIter = MaxIterations
	}
	i1, fp := f.g.primary(h)
	var i2 uint64
	if ow, ok := w.(ownWords); ok {
		// The filter's own words: no interface call, and i2 only when i1
		// is full.
		if ow.putEmpty(f, i1, fp) {
			f.count.Add(1)
			return nil
		}
		i2 = f.alt(i1, fp)
		if ow.putEmpty(f, i2, fp) {
			f.count.Add(1)
			return nil
		}
	} else {
		if f.putEmpty(w, i1, fp) {
			f.count.Add(1)
			return nil
		}
		i2 = f.alt(i1, fp)
		if f.putEmpty(w, i2, fp) {
			f.count.Add(1)
			return nil
		}
	}

	if err := f.displace(w, i1, i2, fp, maxIter); err != nil {
		return err
	}
	f.count.Add(1)
	return nil
}

// displace inserts fp, whose buckets i1 and i2 are both full, by a path
// of displacements (findPath, then applyPath), or returns an error
// wrapping ErrFull and changes nothing. It does not count the insert.
func (f *Filter) displace(w Words, i1, i2, fp uint64, maxIter int) error {
	qp := queuePool.Get().(*[]node)
	q, last, free, ok := f.findPath(w, i1, i2, maxIter, (*qp)[:0], f.rand())
	defer func() { *qp = q[:0]; queuePool.Put(qp) }()
	if !ok {
		return fmt.Errorf("cuckoo: %w: no free slot within %d examined buckets", ErrFull, maxIter)
	}
	f.applyPath(w, q, last, free, fp)
	return nil
}

// findPath searches breadth-first, reading through w and writing
// nothing, for a path of displacements from bucket i1 or i2 (both full)
// to a bucket with an empty slot, examining at most maxIter buckets. It
// appends the search's nodes to q and returns them with the path's last
// node (its bucket has slot free empty; follow the parents to the root)
// and ok set, or with ok unset if there is no such path.
// The order in which it tries a bucket's slots is drawn from r: InsertTo
// passes the filter's generator's next word, Build's goroutines their
// own.
func (f *Filter) findPath(w Words, i1, i2 uint64, maxIter int, q []node, r uint64) (_ []node, last node, free int, ok bool) {
	q = append(q, node{bucket: i1, parent: -1})
	if i2 != i1 {
		q = append(q, node{bucket: i2, parent: -1})
	}
	b := f.g.BucketSize
	examined := len(q)
	var alts [MaxBucketSize]uint64
	fetch := f.g.Buckets >= fetchMovesBuckets
	for head := 0; head < len(q) && examined < maxIter; head++ {
		n := q[head]
		v := w.Load(n.bucket)
		if fetch {
			// The buckets this one's fingerprints would move to are read
			// next: start fetching them all before reading the first, so
			// that their cache misses overlap (read one by one, they
			// were most of a bulk insert's time into a nearly full
			// table).
			f.destinations(n.bucket, v, &alts)
		}
		r = r*6364136223846793005 + 1442695040888963407 // LCG step per node
		start := int(fastRange(r, uint64(b)))
		for k := 0; k < b && examined < maxIter; k++ {
			j := (start + k) % b
			victim := f.slot(v, j)
			if victim == 0 { // cannot happen for a full bucket; be defensive
				continue
			}
			alt := alts[j]
			if !fetch {
				alt = f.alt(n.bucket, victim)
			}
			if onPath(q, head, alt) {
				continue
			}
			examined++
			child := node{bucket: alt, parent: int32(head), slot: int32(j)}
			if free := f.emptySlot(w.Load(alt)); free >= 0 {
				return q, child, free, true
			}
			q = append(q, child)
		}
	}
	return q, node{}, 0, false
}

// fetchMovesBuckets is the fewest buckets (8 MiB) for which the
// displacement search fetches every destination of a bucket's
// fingerprints before it reads the first: in a smaller table they are
// mostly in the caches, and computing them all costs more than it saves
// (BenchmarkInsertHashes at 1e6). A variable for BenchmarkFetchMoves.
var fetchMovesBuckets uint64 = 1 << 20

// destinations sets alts[j] to the bucket the fingerprint in slot j of bucket
// i, whose word is v, would move to, and starts fetching those buckets.
func (f *Filter) destinations(i, v uint64, alts *[MaxBucketSize]uint64) {
	var ps [MaxBucketSize]unsafe.Pointer
	b := f.g.BucketSize
	for j := range b {
		alts[j] = f.alt(i, f.slot(v, j))
		ps[j] = unsafe.Pointer(&f.words[alts[j]])
	}
	prefetch.Lines(ps[:b])
}

// putEmpty stores fp in the lowest empty slot of bucket i, if any.
func (f *Filter) putEmpty(w Words, i, fp uint64) bool {
	v := w.Load(i)
	z := f.lowestEmpty(v)
	if z == 0 {
		return false
	}
	w.Store(i, v|fp*z)
	return true
}

// putEmpty is Filter.putEmpty on the filter's own words.
func (w ownWords) putEmpty(f *Filter, i, fp uint64) bool {
	p := &w[i]
	v := atomic.LoadUint64(p)
	z := f.lowestEmpty(v)
	if z == 0 {
		return false
	}
	atomic.StoreUint64(p, v|fp*z)
	return true
}

// onPath reports whether bucket is on the path from q[idx] to its root.
func onPath(q []node, idx int, bucket uint64) bool {
	for i := int32(idx); i >= 0; i = q[i].parent {
		if q[i].bucket == bucket {
			return true
		}
	}
	return false
}

// applyPath performs the moves of the path ending at last (whose bucket has
// slot free empty), last first, and finally writes fp into the root,
// with the move-sequence counter odd meanwhile.
func (f *Filter) applyPath(w Words, q []node, last node, free int, fp uint64) {
	f.beginMoves() // odd: moves in progress
	f.moves.Add(f.movePath(w, q, last, free, fp))
	f.endMoves() // even: stable
}

// movePath is applyPath without the move-sequence counter and the count
// of moves, which it returns: for a filter nothing reads meanwhile.
func (f *Filter) movePath(w Words, q []node, last node, free int, fp uint64) (moves uint64) {
	dst, dstSlot := last.bucket, free
	cur := last
	for {
		par := q[cur.parent]
		moving := f.slot(w.Load(par.bucket), int(cur.slot))
		w.Store(dst, f.setSlot(w.Load(dst), dstSlot, moving))
		moves++
		dst, dstSlot = par.bucket, int(cur.slot)
		if par.parent < 0 {
			break
		}
		cur = par
	}
	w.Store(dst, f.setSlot(w.Load(dst), dstSlot, fp))
	return moves
}
