package store

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"time"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// loadBatch is how many keys Load applies per hold of the filter's locks,
// so checkpoints and other filters' writers interleave with a long load.
const loadBatch = 4096

// Load adds every key of keys without logging them: far faster than Add
// for building a filter, durable at the checkpoint that ends the call.
//
// keys yields each key with a nil error, or a non-nil error when the
// source fails (a scan of the engine's data stopped early): Load then stops
// and returns it. A Load either adds every key or leaves the filter
// incomplete: the catalog marks the filter as loading first, and if the
// source fails, a key cannot be added (ErrFull), the store is closed or a
// crash interrupts it, the filter stays marked: its lookups answer
// "maybe", its changes fail with ErrIncomplete, and only Drop (then
// re-create) recovers it.
//
// Other changes to the same filter wait until the Load ends: Load writes
// the mapped words directly, and a logged change planned meanwhile would be
// applied later as a stale after-image over loaded words. Lookups do not
// wait; they see each key no later than Load's return (a Bloom Load may
// hold keys back, see below). Changes to other filters, and checkpoints,
// go on between batches of 4096 keys.
//
// A Bloom filter's Load hashes and sets bits on every core
// (bloom.Builder): the calling goroutine only copies the keys the source
// yields into batches; GOMAXPROCS goroutines hash the batches and send
// each hash to one of GOMAXPROCS lanes, each owning one range of the
// layer's blocks, so no cache line is written by two CPUs, no key is
// hashed twice, and every lane adds its keys in the source's order (the
// item count is that of Add in a loop). Once a Load has
// given an empty layer a key for every 128 of its words (a layer that
// held items: one per 4 words), and the layer is at most a quarter of the
// machine's memory, the layer is built in private anonymous memory (huge
// pages where the kernel gives them) with plain writes, while the source
// is read, and ORed into the mapped layer when the layer fills or the
// Load ends: lookups then see that layer's loaded keys only from then on
// (before Load returns), not as each batch is added. Until then, keys for
// an empty layer are held in memory (8 bytes each, hashed on the calling
// goroutine); keys for a layer that held items are added to the mapping
// batch by batch, as keys too many for a private build are. The private
// copy and the held keys are the memory a Load costs beyond the filter.
//
// A counting filter's Load adds on every core the same way
// (bloom.NewCountingBuilder), into the mapping, batch by batch. A cuckoo
// filter's adds on the calling goroutine, the buckets of the keys ahead
// prefetched: a key's two buckets may lie anywhere in the table, and an
// insert may move fingerprints between any of them.
func (f *Bloom) Load(keys iter.Seq2[[]byte, error]) error {
	st := &bloomLoad{layer: -1}
	return f.b.bulk(keys, func(h uint64) error {
		_, _, err := f.addLocked(h)
		return err
	}, func(lb *keyBatch) int { return f.loadParallel(st, lb) }, true, func(ok bool) { f.endBuild(st, ok) })
}

// loadMinPerWorker is the fewest keys worth a goroutine when adding to the
// mapped layer.
const loadMinPerWorker = 512

// loadBuildMaxWords is the largest layer, in words, that a Load builds in
// private memory (a quarter of the machine's memory): the copy lives until
// the Load ends or the layer fills. A variable for tests.
var loadBuildMaxWords = physicalMemory() / 4 / 8

// loadHugePages asks for transparent huge pages for a private build (a
// variable for benchmarks).
var loadHugePages = true

// loadBuildEmpty and loadBuildHolding are the words per key at which a
// Load starts a private build of a layer that was empty when the Load
// reached it, and of one that held items: below that, allocating and
// ORing in the whole layer costs more than adding the keys in place.
const (
	loadBuildEmpty   = 128
	loadBuildHolding = 4
)

// bloomLoad is the state of one Bloom Load across its batches. Called
// with the filter's mutex held, as loadParallel and endBuild are.
type bloomLoad struct {
	layer int    // the layer keys were counted for, -1 before the first batch
	keys  uint64 // keys given to loadParallel for that layer
	fresh bool   // the layer was empty when the Load reached it, and no key is in it yet
	built bool   // a build of the layer ended: the rest go to the mapped layer

	held []uint64 // keys for a fresh layer, before its build starts

	build   *bloom.Filter  // private words of the layer being built, or nil
	free    func() error   // frees build's words
	builder *bloom.Builder // adds to build
	async   bool           // builder reads nothing but build: it may run while the filter is unlocked
	pending uint64         // keys given to builder and not yet counted

	mapped      *bloom.Builder // adds to the mapped layer mappedLayer, or nil
	mappedLayer int
}

// loadParallel adds the longest prefix of hs that fits in the current
// layer without growing it, on GOMAXPROCS goroutines, and returns its
// length (0: too few keys for several goroutines and no build under way,
// or a full layer; the caller adds the rest one by one). Each key adds at
// most one item, so a prefix no longer than the layer's room never needs
// a new layer. Pages are not marked stale one by one: bulk marks them
// all. A key's block decides its lane, so a key given twice is added
// twice by the same one, and counted once, as one by one.
func (f *Bloom) loadParallel(st *bloomLoad, lb *keyBatch) int {
	layers := *f.layers.Load()
	n := len(layers) - 1
	last, older := layers[n], layers[:n]
	if st.layer != n {
		st.layer, st.keys, st.fresh, st.built = n, 0, last.Count() == 0, false
	}
	size := lb.len()
	st.keys += uint64(size)
	// An upper bound of the layer's count: every key held or queued may
	// be new. Only when it leaves too little room is it made exact.
	capacity := f.b.meta.Layers[n].Capacity
	count := func() uint64 {
		c := last.Count() + st.pending + uint64(len(st.held))
		if st.build != nil {
			c += st.build.Count()
		}
		return c
	}
	if count()+uint64(size) > capacity {
		f.settle(st)
	}
	k := int(min(uint64(size), capacity-min(count(), capacity)))
	seen := inAny(older)
	if words := last.Geometry().Words(); st.build == nil && !st.built && words <= loadBuildMaxWords {
		per := uint64(loadBuildHolding)
		if st.fresh {
			per = loadBuildEmpty
		}
		if st.keys >= words/per {
			f.startBuild(st, last, seen)
		} else if st.fresh {
			st.held = append(st.held, lb.hashes()[:k]...)
			if k < size {
				// The rest are added one by one, which reads the
				// mapped layer.
				f.settle(st)
			}
			return k
		}
	}
	if st.build != nil {
		if k < size || lb.hashed {
			// The rest are added one by one: hash them here.
			st.builder.Add(lb.hashes()[:k])
		} else {
			lb.keys = st.builder.AddKeys(lb.keys, k) // hashed by the builder
		}
		st.pending += uint64(k)
		if !st.async {
			// The lanes read mapped layers: they must be done before
			// the filter is unlocked (a Close could unmap them).
			st.build.AddCount(st.builder.Wait())
			st.pending = 0
		}
		if k < size {
			// The rest are added one by one, which reads the mapped layer.
			f.endBuild(st, true)
		}
		return k
	}
	if min(runtime.GOMAXPROCS(0), k/loadMinPerWorker) < 2 {
		return 0
	}
	f.addMapped(st, last, seen, lb.hashes()[:k])
	return k
}

// inAny returns a function that reports whether any of layers may hold
// a hash, newest first, or nil if there are none.
func inAny(layers []*bloom.Filter) func(h uint64) bool {
	if len(layers) == 0 {
		return nil
	}
	return func(h uint64) bool {
		for i := len(layers) - 1; i >= 0; i-- {
			if layers[i].HasHash(h) {
				return true
			}
		}
		return false
	}
}

// startBuild begins a private build of layer last, feeding it the keys
// held for it.
func (f *Bloom) startBuild(st *bloomLoad, last *bloom.Filter, seen func(uint64) bool) {
	g := last.Geometry()
	words, free, err := mmapbits.AnonWords(g.Words(), loadHugePages)
	if err != nil {
		words, free = nil, func() error { return nil } // the heap, then
	}
	st.build, _ = bloom.New(g, words) // g is a valid layer's, words its size
	st.free = free
	base := last
	if st.fresh {
		base = nil // nothing to read in the mapped layer
	}
	st.async = base == nil && seen == nil
	st.builder = bloom.NewBuilder(st.build, 0, true, base, seen)
	if len(st.held) > 0 {
		st.builder.Add(st.held)
		st.pending += uint64(len(st.held))
		st.held = nil
	}
}

// addMapped adds hs to the mapped layer last on GOMAXPROCS lanes and
// waits for them.
func (f *Bloom) addMapped(st *bloomLoad, last *bloom.Filter, seen func(uint64) bool, hs []uint64) {
	if st.mapped != nil && st.mappedLayer != st.layer {
		st.mapped.Close()
		st.mapped = nil
	}
	if st.mapped == nil {
		st.mapped, st.mappedLayer = bloom.NewBuilder(last, 0, false, nil, seen), st.layer
	}
	st.mapped.Add(hs)
	last.AddCount(st.mapped.Wait())
	if len(hs) > 0 {
		st.fresh = false
	}
}

// settle makes the current layer's count exact: it waits for the keys
// queued for a build, and adds the keys held for a fresh layer to the
// mapped layer.
func (f *Bloom) settle(st *bloomLoad) {
	if st.builder != nil && st.pending > 0 {
		st.build.AddCount(st.builder.Wait())
		st.pending = 0
	}
	if len(st.held) > 0 {
		layers := *f.layers.Load()
		held := st.held
		st.held = nil
		f.addMapped(st, layers[st.layer], inAny(layers[:st.layer]), held)
	}
}

// endBuild makes every key given to loadParallel reach the mapped layer,
// if ok: it ORs the layer built in private memory, if any, into the
// mapped layer on GOMAXPROCS goroutines and adds its count, and adds the
// keys held for a fresh layer. Either way it stops the lanes and frees
// the private words. Called with b.mu held.
func (f *Bloom) endBuild(st *bloomLoad, ok bool) {
	if ok {
		f.settle(st)
	}
	st.held = nil
	if st.mapped != nil {
		st.mapped.Close()
		st.mapped = nil
	}
	built, builder, free := st.build, st.builder, st.free
	st.build, st.builder, st.free, st.pending = nil, nil, nil, 0
	if builder != nil {
		builder.Close() // its lanes write built: stop them before it is freed
	}
	if built == nil {
		return
	}
	st.built, st.fresh = true, false
	defer free()
	if !ok {
		return
	}
	layer := (*f.layers.Load())[st.layer]
	words := built.Geometry().Words()
	workers := max(1, min(uint64(runtime.GOMAXPROCS(0)), words/(1<<15)))
	parallel(int(workers), func(w int) {
		// Ranges of whole pages, so that no page is written by two CPUs.
		lo := words * uint64(w) / workers &^ 511
		hi := words * uint64(w+1) / workers &^ 511
		if uint64(w+1) == workers {
			hi = words
		}
		built.OrInto(layer, lo, hi)
	})
	layer.AddCount(built.Count())
	f.b.regions[st.layer].Touch(0, words)
}

// parallel runs fn(0) .. fn(workers-1) on workers goroutines (fn(0) on
// the caller's) and waits for them.
func parallel(workers int, fn func(w int)) {
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w)
		}()
	}
	fn(0)
	wg.Wait()
}

// Load adds every key without logging; see (*Bloom).Load.
func (f *Cuckoo) Load(keys iter.Seq2[[]byte, error]) error {
	// Each batch goes to the newest layer's InsertHashes, which
	// prefetches the buckets of the keys ahead (cuckoo's
	// BenchmarkInsertHashes). From the key it stops at (the layer is
	// full), keys go one at a time through add, which tries that key in
	// the layer once more and then grows the chain. Both use
	// cuckoo.MaxIterations, as the cuckoo Load always has, not the
	// filter's configured MaxIterations.
	par := func(lb *keyBatch) int {
		layers := *f.layers.Load()
		n, _ := layers[len(layers)-1].InsertHashes(lb.hashes())
		return n
	}
	return f.b.bulk(keys, func(h uint64) error {
		layers := *f.layers.Load()
		n := len(layers) - 1
		if err := layers[n].InsertHash(h); err == nil || f.cfg.Expansion == 0 {
			return err
		}
		t, err := f.insertLocked(h, f.b.tx) // grows a layer, plans into it
		if err != nil {
			return err
		}
		return f.b.writeWords(t.layer, t.writes)
	}, par, false, nil)
}

// Load adds every key without logging; see (*Bloom).Load.
func (f *Counting) Load(keys iter.Seq2[[]byte, error]) error {
	// Each batch, as far as a non-scaling filter has room for it, is
	// added on every core (bloom.NewCountingBuilder: hashers, and lanes
	// that own block ranges, so the counters are those of Add in a loop)
	// or, on one CPU or for a short batch, by AddHashes on this
	// goroutine, prefetching the blocks of the keys ahead; a key past
	// the room goes through add, which refuses it.
	var bld *bloom.Builder
	par := func(lb *keyBatch) int {
		k := lb.len()
		if f.b.meta.NonScaling {
			room := f.b.meta.Capacity - min(f.c.Items(), f.b.meta.Capacity)
			k = int(min(uint64(k), room))
		}
		if bld == nil && min(runtime.GOMAXPROCS(0), k/loadMinPerWorker) >= 2 {
			bld = bloom.NewCountingBuilder(f.c, 0)
		}
		switch {
		case k == 0:
		case bld == nil:
			f.c.AddHashes(lb.hashes()[:k])
		case k < lb.len() || lb.hashed:
			bld.Add(lb.hashes()[:k])
		default:
			lb.keys = bld.AddKeys(lb.keys, k) // hashed by the builder
		}
		if bld != nil {
			// The lanes write mapped words: they must be done before the
			// filter is unlocked (a Close could unmap them).
			f.c.SetItems(f.c.Items() + bld.Wait())
		}
		return k
	}
	return f.b.bulk(keys, func(h uint64) error {
		if f.b.meta.NonScaling && f.c.Items() >= f.b.meta.Capacity {
			return fmt.Errorf("store: counting filter %q holds its capacity of %d: %w", f.b.name(), f.b.meta.Capacity, ErrFull)
		}
		f.c.AddHash(h)
		return nil
	}, par, true, func(bool) {
		if bld != nil {
			bld.Close()
			bld = nil
		}
	})
}

// Keys adapts a plain sequence of keys, which cannot fail, to Load.
func Keys(keys iter.Seq[[]byte]) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for k := range keys {
			if !yield(k, nil) {
				return
			}
		}
	}
}

// keyBatch is a batch of a Load's keys: the keys themselves (for a
// Bloom Load, whose builder hashes them on its own goroutines: bulk's
// rawKeys) or only their hashes, computed as they arrive.
type keyBatch struct {
	keys   *bloom.Keys // nil if only hashes are kept
	hs     []uint64    // the keys' hashes, once hashed
	hashed bool
}

func (lb *keyBatch) len() int {
	if lb.keys != nil && !lb.hashed {
		return lb.keys.Len()
	}
	return len(lb.hs)
}

// hashes returns the hashes of the batch's keys, hashing them on the
// caller's goroutine if they are not yet.
func (lb *keyBatch) hashes() []uint64 {
	if !lb.hashed {
		lb.hs = lb.hs[:0]
		for i := range lb.keys.Len() {
			lb.hs = append(lb.hs, Hash(lb.keys.At(i)))
		}
		lb.hashed = true
	}
	return lb.hs
}

// reset empties the batch.
func (lb *keyBatch) reset() {
	lb.hs = lb.hs[:0]
	if lb.keys != nil {
		lb.keys.Reset()
		lb.hashed = false
	}
}

// bulk runs add for every key's hash with the catalog marked "loading"
// around the whole run, then checkpoints. par, if not nil, may add a
// prefix of each batch first (a Bloom Load's on several goroutines, a
// cuckoo or counting Load's prefetched); it returns how many keys it
// added. With
// rawKeys, batches keep the keys for par to hash (a Bloom Load's hasher
// goroutines); otherwise keys are hashed as they arrive. Either way the
// source runs, and batches fill, with no lock held, so the source may be
// slow, or use the store itself (other filters, Info, List); each batch
// is then added with the commit gate (shared) and the filter's mutex
// held. Other mutations of the filter wait on b.loading meanwhile.
// However the run ends — the source fails or panics, a key cannot be
// added, the store closes — the filter is marked incomplete unless every
// key was added and checkpointed.
func (b *filterBase) bulk(keys iter.Seq2[[]byte, error], add func(h uint64) error, par func(lb *keyBatch) int, rawKeys bool, end func(ok bool)) (err error) {
	if keys == nil {
		return fmt.Errorf("store: load %q: %w: keys is nil", b.name(), ErrInvalid)
	}
	if err := b.start(); err != nil {
		return err
	}
	complete := false
	start := time.Now()
	defer func() {
		b.mu.Lock()
		if end != nil {
			end(false) // drops what a failed run built
		}
		if !complete {
			// Keys are missing: lookups must not say "absent" for them.
			b.incomplete.Store(true)
			b.off.Store(true)
		}
		close(b.loading)
		b.loading = nil
		b.mu.Unlock()
	}()
	n := 0
	batch := &keyBatch{hs: make([]uint64, 0, loadBatch)}
	if par != nil && rawKeys {
		// par hashes the keys elsewhere: keep them.
		batch.keys = &bloom.Keys{Buf: make([]byte, 0, 16*loadBatch), Ends: make([]int, 0, loadBatch)}
	} else {
		batch.hashed = true
	}
	// locked runs fn with the commit gate (shared) and the filter's mutex
	// held, if the filter can still be changed.
	locked := func(fn func() error) error {
		b.s.gate.RLock()
		defer b.s.gate.RUnlock()
		if err := b.check(); err != nil {
			return err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.dirty.Store(true)
		return fn()
	}
	addBatch := func() error {
		done, size := 0, batch.len()
		if par != nil {
			// par may take the keys it adds (and leave an empty batch);
			// it hashes the rest here first.
			done = par(batch)
			n += done
		}
		if done == size {
			batch.reset()
			return nil
		}
		for _, h := range batch.hashes()[done:] {
			if err := add(h); err != nil {
				return err
			}
			n++
		}
		batch.reset()
		return nil
	}
	flush := func() error { return locked(addBatch) }
	m := 0 // keys in batch
	for k, serr := range keys {
		if serr != nil {
			err = fmt.Errorf("store: load %q: the key source failed after %d keys: %w", b.name(), n+m, serr)
			break
		}
		// The one part of a Bloom Load that runs on the source's
		// goroutine: keep it to a copy.
		if kb := batch.keys; kb != nil {
			kb.Append(k)
		} else {
			batch.hs = append(batch.hs, Hash(k))
		}
		if m++; m == loadBatch {
			if err = flush(); err != nil {
				break
			}
			m = 0
		}
	}
	if err == nil && m > 0 {
		err = flush()
	}
	added := time.Since(start)
	if err == nil && end != nil {
		err = locked(func() error { end(true); return nil })
	}
	if err == nil {
		b.s.opts.Logger.Debug("load: keys added, checkpointing", "filter", b.name(), "keys", n,
			"added", added, "ended", time.Since(start)-added)
	}
	// Cuckoo and counting loads write words without saying which: every
	// page's checksum is stale (the closing checkpoint recomputes them).
	b.mu.Lock()
	for _, r := range b.regions {
		r.Touch(0, r.NumWords())
	}
	b.mu.Unlock()
	if err == nil {
		// The checkpoint records the filter as complete once its files are
		// synced; if it fails, the catalog still says "loading".
		b.mu.Lock()
		b.loadDone = true
		b.mu.Unlock()
		err = b.s.Checkpoint()
		complete = err == nil
	}
	if err != nil && !errors.Is(err, ErrIncomplete) {
		err = fmt.Errorf("%w (the filter is left incomplete: %w)", err, ErrIncomplete)
	}
	return err
}

// start begins a Load: with the filter locked it makes every pending
// logged change reach the map (their after-images were planned before the
// load and must not land over loaded words later), marks the filter as
// loading in the catalog, and sets b.loading.
func (b *filterBase) start() error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.end()
	defer b.mu.Unlock()
	if err := b.s.log.Sync(); err != nil {
		return b.s.fail(err)
	}
	if err := b.applyThrough(b.s.log.LastLSN()); err != nil {
		return b.s.fail(err)
	}
	b.loading, b.loadDone = make(chan struct{}), false
	m := b.snapshotMeta(b.meta.SyncedLSN)
	// The counts stay those of the last checkpoint, as addLayer's do.
	m.Layers = append([]format.LayerMeta(nil), b.meta.Layers...)
	if err := b.s.cat.PutFilters(0, map[string]*format.FilterMeta{b.name(): m}); err != nil {
		close(b.loading)
		b.loading = nil
		return b.s.catalogFailed(err)
	}
	b.meta = m
	return nil
}

// markIncomplete makes the filter incomplete, as an interrupted Load
// leaves it, in memory and, before it returns, in the catalog: an
// external op that could not apply (an add that did not fit, any op on a
// broken filter) is skipped, and once the record that skipped it is
// durable the engine may drop it, so the mark must not wait for the next
// checkpoint (a crash before it would bring the filter back whole but for
// the skipped op).
func (b *filterBase) markIncomplete() error {
	s := b.s
	s.gate.RLock()
	defer s.gate.RUnlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.incomplete.Store(true)
	b.off.Store(true)
	if b.dropped.Load() {
		return nil
	}
	// The meta as the last checkpoint left it (a broken filter has no
	// counts to read), but loading.
	m := *b.meta
	m.Layers = append([]format.LayerMeta(nil), b.meta.Layers...)
	m.State = format.StateLoading
	if err := s.cat.PutFilters(0, map[string]*format.FilterMeta{b.name(): &m}); err != nil {
		return s.catalogFailed(err)
	}
	b.meta = &m
	return nil
}
