package bloom

import (
	"fmt"
	"math/bits"
	"runtime"
	"runtime/debug"
)

// builderDepth is how many parts of jobs may wait for one lane from one
// hasher before the hasher blocks.
const builderDepth = 4

// Builder adds keys to a filter (NewBuilder) or a counting filter
// (NewCountingBuilder) on several goroutines at once. Each lane
// goroutine owns one contiguous range of the filter's blocks; hasher
// goroutines hash the keys of the batches AddKeys gives them and send each
// hash to the lane that owns its block (Add splits hashes it is given on
// the caller's goroutine instead). No cache line is written by two CPUs,
// no key is hashed twice, and a key is located only by whoever routes it
// and by its lane, not by every lane. With AddKeys the caller's goroutine
// only copies keys into batches: a bulk load whose source yields keys one
// at a time spends little else on it.
// Add and AddKeys return before the keys are added; Wait waits for them.
//
// Every lane adds its keys in the order they were given, whichever
// hasher hashed them, so the words and the count of new adds are those
// of a loop of AddHash over the keys (whether a key is new depends on the
// keys before it in its block).
//
// A Builder is for bulk loads. With owned set, the lanes write the filter
// with plain stores (AddHashesOwned): nothing else may read or write its
// words until Wait returns, as for a private filter made by New(g, nil)
// that is ORed into a live one afterwards (OrInto). Otherwise they add with
// AddHashUncounted, which concurrent lookups may read meanwhile.
//
// A Builder's methods must be called from one goroutine at a time. Close
// stops its goroutines; a Builder that is not closed leaks them. Close
// again does nothing; Add or AddKeys after Close panics (the keys could
// not be added, and dropping them would make them read absent).
type Builder struct {
	g       Geometry
	f       *Filter   // the filter added to, or nil for a counting one
	c       *Counting // the counting filter added to (NewCountingBuilder)
	base    *Filter
	seen    func(h uint64) bool
	owned   bool
	div     laneDiv
	lanes   []*builderLane
	hashers []*builderHasher
	next    int           // the hasher of the next job
	free    chan []uint64 // emptied parts
	keys    chan *Keys    // emptied batches for AddKeys to return
	queued  bool          // a job was given since the last Wait
	closed  bool          // Close ran
}

// builderLane is one lane's blocks and its answers to Wait.
type builderLane struct {
	lo, hi uint64      // its blocks
	out    chan uint64 // the adds that were new since the last Wait
	// failed is the panic that stopped the lane's adds since the last
	// Wait (see run), nil if none: set by the lane before it answers on
	// out, read and cleared by Wait after it got the answer.
	failed any
}

// builderHasher is a goroutine that turns jobs into one part per lane:
// the hashes of the job's keys whose blocks the lane owns.
type builderHasher struct {
	in    chan builderJob
	parts []chan []uint64 // per lane; a nil part asks the lane for its count
}

// builderJob is the first n keys of ks to hash, or hashes already split
// into one part per lane, or (neither) a Wait.
type builderJob struct {
	ks    *Keys
	n     int
	parts [][]uint64
}

// Keys is a batch of keys in one buffer, as a bulk load gathers them from
// its source: key i is Buf[Ends[i-1]:Ends[i]] (from 0 for key 0).
type Keys struct {
	Buf  []byte
	Ends []int
}

// Append adds a copy of key.
func (k *Keys) Append(key []byte) {
	k.Buf = append(k.Buf, key...)
	k.Ends = append(k.Ends, len(k.Buf))
}

// check returns an error unless the first n keys of k are well formed:
// n <= len(Ends), and Ends[:n] rising, from 0, within Buf.
func (k *Keys) check(n int) error {
	if n > len(k.Ends) {
		return fmt.Errorf("bloom: Keys holds %d keys, not %d", len(k.Ends), n)
	}
	prev := 0
	for i, e := range k.Ends[:n] {
		if e < prev || e > len(k.Buf) {
			return fmt.Errorf("bloom: Keys.Ends[%d] = %d is outside %d..%d (Buf holds %d bytes)", i, e, prev, len(k.Buf), len(k.Buf))
		}
		prev = e
	}
	return nil
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.Ends) }

// At returns key i (not a copy).
func (k *Keys) At(i int) []byte {
	from := 0
	if i > 0 {
		from = k.Ends[i-1]
	}
	return k.Buf[from:k.Ends[i]]
}

// Reset empties the batch, keeping its memory.
func (k *Keys) Reset() {
	k.Buf, k.Ends = k.Buf[:0], k.Ends[:0]
}

// NewBuilder returns a Builder that adds to f on lanes goroutines, and
// hashes on as many (at least 1 each, at most one lane per block and
// MaxBuilderLanes; 0 means GOMAXPROCS). base and seen are as for AddHashesOwned: with base, a hash
// is new unless f and base hold all its bits (base is used only when
// owned is set); hashes for which seen, if not nil, reports true are
// skipped.
func NewBuilder(f *Filter, lanes int, owned bool, base *Filter, seen func(h uint64) bool) *Builder {
	b := &Builder{g: f.g, f: f, base: base, seen: seen, owned: owned}
	b.start(lanes)
	return b
}

// NewCountingBuilder returns a Builder that adds to the counting filter c
// on lanes goroutines (0 means GOMAXPROCS), as NewBuilder does to a
// Filter. Each lane increments the counters of its keys' blocks in the
// order the keys were given, so the words are those of a loop of AddHash
// over the keys; nothing else may change c until Wait returns. Without
// owned the lanes write with AddHash's atomic stores, and lookups may read
// c meanwhile; with owned they use plain loads and stores, and nothing
// else may read c's words either until Wait returns (a private build,
// merged into a live filter afterwards with MergeInto). Items does not
// move: Wait returns the keys added, for the caller to count (SetItems).
func NewCountingBuilder(c *Counting, lanes int, owned bool) *Builder {
	b := &Builder{g: c.g, c: c, owned: owned}
	b.start(lanes)
	return b
}

// MaxBuilderLanes bounds a Builder's lanes (and hashers): each hasher
// keeps a queue for each lane, so the Builder's memory grows with the
// square of its lanes (about 6 MiB at 128).
const MaxBuilderLanes = 128

// start starts the goroutines of lanes lanes (0: GOMAXPROCS; at most one
// per block, and MaxBuilderLanes) and as many hashers.
func (b *Builder) start(lanes int) {
	if lanes <= 0 {
		lanes = runtime.GOMAXPROCS(0)
	}
	blocks := b.g.Blocks
	lanes = int(min(uint64(lanes), blocks, MaxBuilderLanes))
	hashers := lanes
	per := (blocks + uint64(lanes) - 1) / uint64(lanes)
	b.div = newLaneDiv(per, blocks)
	b.free = make(chan []uint64, 2*lanes*hashers*builderDepth)
	b.keys = make(chan *Keys, 2*hashers+2)
	for i := range lanes {
		b.lanes = append(b.lanes, &builderLane{
			lo:  min(uint64(i)*per, blocks),
			hi:  min(uint64(i+1)*per, blocks),
			out: make(chan uint64),
		})
	}
	for range hashers {
		h := &builderHasher{in: make(chan builderJob, 2)}
		for range lanes {
			h.parts = append(h.parts, make(chan []uint64, builderDepth))
		}
		b.hashers = append(b.hashers, h)
		go b.hash(h)
	}
	for i, l := range b.lanes {
		go b.run(i, l)
	}
}

// Lanes returns how many goroutines add the keys.
func (b *Builder) Lanes() int { return len(b.lanes) }

// run is lane i's goroutine. It takes parts from the hashers in the order
// jobs were given to them, so it adds keys in the order they were given.
//
// A panic of its adds, where no recover of the caller's could reach it,
// does not end the process: a memory fault among them (the filter is a
// file's mapping, and the file was truncated under it or the disk cannot
// read a page back: SIGBUS, which the lane asks the runtime to turn into
// a panic), or a panic of seen. The lane keeps it (a fault's value as it
// is, any other with the lane's stack: lanePanic), adds nothing more
// until the next Wait (it still takes its parts, so the hashers go on),
// and Wait raises it on the caller's goroutine.
func (b *Builder) run(i int, l *builderLane) {
	debug.SetPanicOnFault(true) // a goroutine of its own: nothing to restore
	var added uint64
	for next := 0; ; next = (next + 1) % len(b.hashers) {
		part, ok := <-b.hashers[next].parts[i]
		if !ok {
			return
		}
		if part == nil {
			l.out <- added
			added = 0
			continue
		}
		if l.failed == nil {
			added += b.addPart(l, part)
		}
		b.recycle(part)
	}
}

// addPart adds the hashes of part on lane l and returns how many were
// new; a panic is kept in l.failed (see run).
func (b *Builder) addPart(l *builderLane, part []uint64) (added uint64) {
	defer func() {
		if v := recover(); v != nil {
			if _, fault := v.(interface{ Addr() uintptr }); fault {
				l.failed = v // as it is: the caller's fault guard knows it
			} else {
				l.failed = &lanePanic{v: v, stack: debug.Stack()}
			}
		}
	}()
	switch {
	case b.c != nil && b.owned:
		b.c.addOwned(part)
		added += uint64(len(part))
	case b.c != nil:
		b.c.addUncounted(part)
		added += uint64(len(part))
	case b.owned:
		added += b.f.AddHashesOwned(part, l.lo, l.hi, b.base, b.seen)
	default:
		for _, h := range part {
			if b.seen != nil && b.seen(h) {
				continue
			}
			if ok, _ := b.f.AddHashUncounted(h); ok {
				added++
			}
		}
	}
	return added
}

// lanePanic is what Wait raises for a panic of a lane's adds that is not
// a memory fault (a bug, or a panic of seen): its value, and the lane
// goroutine's stack where it happened, which the value raised again on
// another goroutine would lose.
type lanePanic struct {
	v     any
	stack []byte
}

func (p *lanePanic) Error() string {
	return fmt.Sprintf("%v\n\n[bloom.Builder lane goroutine, where it panicked]:\n%s", p.v, p.stack)
}

// Unwrap returns the value if it is an error.
func (p *lanePanic) Unwrap() error {
	err, _ := p.v.(error)
	return err
}

// hash is a hasher's goroutine.
func (b *Builder) hash(h *builderHasher) {
	defer func() {
		for _, p := range h.parts {
			close(p)
		}
	}()
	g := b.g
	for job := range h.in {
		switch {
		case job.ks != nil:
			parts := b.newParts()
			ks := job.ks
			from := 0
			for _, end := range ks.Ends[:job.n] {
				x := Hash(ks.Buf[from:end])
				from = end
				block, _, _ := locateMul(x, g.Salt, g.Blocks)
				if g.Derivation != DeriveMul {
					block, _, _ = locateMix(x, g.Salt, g.Blocks)
				}
				i := b.div.lane(block)
				parts[i] = append(parts[i], x)
			}
			ks.Reset()
			select {
			case b.keys <- ks:
			default:
			}
			for i, p := range parts {
				h.parts[i] <- p
			}
		case job.parts != nil:
			for i, p := range job.parts {
				h.parts[i] <- p
			}
		default:
			for _, p := range h.parts {
				p <- nil
			}
		}
	}
}

// newParts returns one empty part per lane.
func (b *Builder) newParts() [][]uint64 {
	parts := make([][]uint64, len(b.lanes))
	for i := range parts {
		select {
		case parts[i] = <-b.free:
		default:
			parts[i] = make([]uint64, 0, 1024)
		}
	}
	return parts
}

// recycle keeps an emptied part for newParts.
func (b *Builder) recycle(part []uint64) {
	select {
	case b.free <- part[:0]:
	default:
	}
}

// give hands job to the next hasher.
func (b *Builder) give(job builderJob) {
	if b.closed {
		panic("bloom: Builder used after Close")
	}
	b.hashers[b.next].in <- job
	b.next = (b.next + 1) % len(b.hashers)
}

// AddKeys queues the first n keys of ks, to be hashed (Hash) and added on
// the Builder's goroutines. It takes ks and returns an empty batch for
// the caller to fill next (ks itself, later, once hashed). A batch that
// does not hold n keys (n past len(ks.Ends), or Ends not rising within
// Buf, as Append leaves them) panics here, on the caller's goroutine,
// rather than on the Builder's, where no recover could reach it.
func (b *Builder) AddKeys(ks *Keys, n int) *Keys {
	if n <= 0 {
		ks.Reset()
		return ks
	}
	if err := ks.check(n); err != nil {
		panic(err)
	}
	bufCap, endsCap := cap(ks.Buf), cap(ks.Ends) // ks is the hasher's once given
	b.queued = true
	b.give(builderJob{ks: ks, n: n})
	select {
	case next := <-b.keys:
		return next
	default:
		return &Keys{Buf: make([]byte, 0, bufCap), Ends: make([]int, 0, endsCap)}
	}
}

// Add queues every hash of hs for the lane that owns its block. It may
// return before they are added, and blocks only while the lanes are
// behind; hs may be reused once it returns.
func (b *Builder) Add(hs []uint64) {
	if len(hs) == 0 {
		return
	}
	g := b.g
	parts := b.newParts()
	for _, h := range hs {
		block, _, _ := locateMul(h, g.Salt, g.Blocks)
		if g.Derivation != DeriveMul {
			block, _, _ = locateMix(h, g.Salt, g.Blocks)
		}
		i := b.div.lane(block)
		parts[i] = append(parts[i], h)
	}
	b.queued = true
	b.give(builderJob{parts: parts})
}

// Wait waits until every key queued by Add and AddKeys is added and
// returns how many of those adds were new since the last Wait (Count
// does not move: see AddCount). If a lane's adds panicked (see run:
// a memory fault of a mapped filter, or a panic of seen), Wait panics
// once every lane is done, on the caller's goroutine, where a recover can
// take it: with a fault's runtime.Error as it is, with any other value
// as an error that carries it (Unwrap, for an error value) and the lane's
// stack; some of the keys are then not added, and the Builder may be
// used again.
func (b *Builder) Wait() (added uint64) {
	if !b.queued {
		return 0
	}
	b.queued = false
	b.give(builderJob{})
	var failed any
	for _, l := range b.lanes {
		added += <-l.out
		if failed == nil {
			failed = l.failed
		}
		l.failed = nil
	}
	if failed != nil {
		panic(failed)
	}
	return added
}

// Close waits for the queued keys, as Wait, and stops the goroutines. It
// returns Wait's count; 0 if the Builder was closed already. If Wait
// panics (a lane's adds panicked), Close stops the goroutines and then
// panics with the same value.
func (b *Builder) Close() uint64 {
	if b.closed {
		return 0
	}
	defer func() {
		b.closed = true
		for _, h := range b.hashers {
			close(h.in)
		}
	}()
	return b.Wait()
}

// laneDiv divides a block index by the number of blocks per lane without
// a divide instruction where it can: for a dividend and divisor below
// 2^32, the high word of block times ceil(2^64/per) is exactly block/per
// (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
// 2019).
type laneDiv struct {
	per   uint64
	magic uint64 // ceil(2^64/per), or 0: divide
}

func newLaneDiv(per, blocks uint64) laneDiv {
	d := laneDiv{per: max(per, 1)}
	if blocks <= 1<<32 && d.per < 1<<32 && d.per > 1 {
		d.magic = ^uint64(0)/d.per + 1
	}
	return d
}

func (d laneDiv) lane(block uint64) uint64 {
	if d.magic != 0 {
		q, _ := bits.Mul64(block, d.magic)
		return q
	}
	return block / d.per
}
