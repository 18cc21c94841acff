package store

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/format"
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
// wait; they see the keys as they are added. Changes to other filters,
// and checkpoints, go on between batches.
//
// A Bloom filter's Load sets bits on every core: each batch's keys that
// fit in the current layer are added by GOMAXPROCS goroutines at once,
// each owning a range of the layer's blocks, the rest one by one as Add
// would, growing the filter. Once a Load has given a layer enough keys to
// pay for it (a sixteenth as many keys as the layer has words if the
// layer was empty, a quarter otherwise) and the layer is at most
// loadBuildMaxWords words, its batches are built in private memory with
// plain writes, and ORed into the mapped layer when the layer fills or
// the Load ends: lookups then see that layer's loaded keys only from then
// on (before Load returns), not as each batch is added.
func (f *Bloom) Load(keys iter.Seq2[[]byte, error]) error {
	st := &bloomLoad{layer: -1}
	return f.b.bulk(keys, func(h uint64) error {
		_, _, err := f.addLocked(h)
		return err
	}, func(hs []uint64) int { return f.loadParallel(st, hs) }, func(ok bool) { f.endBuild(st, ok) })
}

// loadMinPerWorker is the fewest keys worth a goroutine of loadParallel.
const loadMinPerWorker = 512

// loadBuildMaxWords is the largest layer, in words (1 GiB), that a Load
// builds in private memory: the copy lives on the heap until the Load
// ends or the layer fills.
const loadBuildMaxWords = 1 << 27

// bloomLoad is the state of one Bloom Load across its batches.
type bloomLoad struct {
	layer int           // the layer keys were counted for, -1 before the first batch
	keys  uint64        // keys given to loadParallel for that layer
	build *bloom.Filter // private words of that layer being built, or nil
	fresh bool          // the layer held no item when the build began
}

// loadParallel adds the longest prefix of hs that fits in the current
// layer without growing it, on GOMAXPROCS goroutines, and returns its
// length (0: too few keys for several goroutines and no build under way,
// or a full layer; the caller adds the rest one by one). Each key adds at
// most one item, so a prefix no longer than the layer's room never needs
// a new layer. Pages are not marked stale one by one: bulk marks them
// all. A key's block decides its goroutine, so a key given twice is added
// twice by the same one, and counted once, as one by one. Called with
// b.mu held.
func (f *Bloom) loadParallel(st *bloomLoad, hs []uint64) int {
	layers := *f.layers.Load()
	n := len(layers) - 1
	last, older := layers[n], layers[:n]
	if st.layer != n {
		st.layer, st.keys = n, 0
	}
	st.keys += uint64(len(hs))
	if words := last.Geometry().Words(); st.build == nil && words <= loadBuildMaxWords {
		fresh := last.Count() == 0
		if need := words / 4; fresh && st.keys >= words/16 || st.keys >= need {
			g := last.Geometry()
			st.build, _ = bloom.New(g, nil) // g is a valid layer's
			st.fresh = fresh
		}
	}
	count := last.Count()
	if st.build != nil {
		count += st.build.Count()
	}
	room := int64(f.b.meta.Layers[n].Capacity) - int64(count)
	k := int(min(int64(len(hs)), max(room, 0)))
	workers := min(runtime.GOMAXPROCS(0), k/loadMinPerWorker)
	if st.build == nil && workers < 2 {
		return 0
	}
	workers = max(workers, 1)
	// Each goroutine adds the keys whose bits fall in its own range of
	// blocks: a cache line written by two CPUs in turn would bounce between
	// them (splitting the keys instead made each add about 1.5 times
	// dearer on two CPUs).
	prefix := hs[:k]
	var seen func(uint64) bool
	if len(older) > 0 {
		seen = func(h uint64) bool {
			for i := len(older) - 1; i >= 0; i-- {
				if older[i].HasHash(h) {
					return true
				}
			}
			return false
		}
	}
	into, base := st.build, last
	if st.fresh {
		base = nil // nothing to read in the mapped layer
	}
	blocks := last.Geometry().Blocks
	each := func(w int) uint64 {
		lo, hi := blocks*uint64(w)/uint64(workers), blocks*uint64(w+1)/uint64(workers)
		if into != nil {
			return into.AddHashesOwned(prefix, lo, hi, base, seen)
		}
		var added uint64
		for _, h := range prefix {
			if b := last.BlockOf(h); b < lo || b >= hi || seen != nil && seen(h) {
				continue
			}
			if ok, _ := last.AddHashUncounted(h); ok {
				added++
			}
		}
		return added
	}
	target := last
	if into != nil {
		target = into
	}
	parallel(workers, func(w int) {
		target.AddCount(each(w)) // once: a counter moved per add bounces between CPUs
	})
	if k < len(hs) {
		// The rest are added one by one, which reads the mapped layer.
		f.endBuild(st, true)
	}
	return k
}

// endBuild ORs the layer built in private memory, if any, into the mapped
// layer, on GOMAXPROCS goroutines, and adds its count, if ok; it drops it
// either way. Called with b.mu held.
func (f *Bloom) endBuild(st *bloomLoad, ok bool) {
	built := st.build
	st.build = nil
	if built == nil || !ok {
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
	}, nil, nil)
}

// Load adds every key without logging; see (*Bloom).Load.
func (f *Counting) Load(keys iter.Seq2[[]byte, error]) error {
	return f.b.bulk(keys, func(h uint64) error {
		if f.b.meta.NonScaling && f.c.Items() >= f.b.meta.Capacity {
			return fmt.Errorf("store: counting filter %q holds its capacity of %d: %w", f.b.name(), f.b.meta.Capacity, ErrFull)
		}
		f.c.AddHash(h)
		return nil
	}, nil, nil)
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

// bulk runs add for every key's hash with the catalog marked "loading"
// around the whole run, then checkpoints. par, if not nil, may add a
// prefix of each batch first, on several goroutines; it returns how many
// keys it added. Keys are hashed in batches of
// loadBatch with no lock held, so the source may be slow, or use the store
// itself (other filters, Info, List); each batch is then added with the
// commit gate (shared) and the filter's mutex held. Other mutations of the
// filter wait on b.loading meanwhile. However the run ends — the source
// fails or panics, a key cannot be added, the store closes — the filter
// is marked incomplete unless every key was added and checkpointed.
func (b *filterBase) bulk(keys iter.Seq2[[]byte, error], add func(h uint64) error, par func(hs []uint64) int, end func(ok bool)) (err error) {
	if keys == nil {
		return fmt.Errorf("store: load %q: %w: keys is nil", b.name(), ErrInvalid)
	}
	if err := b.start(); err != nil {
		return err
	}
	complete := false
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
	batch := make([]uint64, 0, loadBatch)
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
		done := 0
		if par != nil {
			done = par(batch)
			n += done
		}
		for _, h := range batch[done:] {
			if err := add(h); err != nil {
				return err
			}
			n++
		}
		batch = batch[:0]
		return nil
	}
	flush := func() error { return locked(addBatch) }
	for k, serr := range keys {
		if serr != nil {
			err = fmt.Errorf("store: load %q: the key source failed after %d keys: %w", b.name(), n+len(batch), serr)
			break
		}
		if batch = append(batch, Hash(k)); len(batch) == loadBatch {
			if err = flush(); err != nil {
				break
			}
		}
	}
	if err == nil && len(batch) > 0 {
		err = flush()
	}
	if err == nil && end != nil {
		err = locked(func() error { end(true); return nil })
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
