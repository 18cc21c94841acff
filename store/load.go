package store

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/workers"
	"github.com/filterstore/filterstore/mmapbits"
)

// loadBatch is how many keys Load applies per hold of the filter's locks,
// so checkpoints and other filters' writers interleave with a long load.
const loadBatch = 4096

// cuckooLoadBatch is loadBatch for a cuckoo Load, whose private build
// (cuckoo.Filter.Build) deals each batch's keys to goroutines it starts
// and joins three times per call: larger batches keep them busy and
// spread those costs. 256 Ki keys are a few milliseconds of work. On the
// 2-vCPU VM, at 1e7 keys (BenchmarkLoadCuckoo, three alternated runs of
// each build; per run, the mean of its 1-CPU Loads over that of its 2-CPU
// ones): 1.70-1.80x with batches of 64 Ki keys, 1.88-2.03x with 256 Ki.
const cuckooLoadBatch = 1 << 18

// Load adds every key of keys without logging them: far faster than Add
// for building a filter, durable at the checkpoint that ends the call.
// LoadParallel reads several sources at once.
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
// applied later as a stale after-image over loaded words. WriteTo of the
// filter waits too (it exports a filter whole or not at all). So the
// source must not change the filter it loads (Load it again, Add to it),
// nor export it with WriteTo, nor Rename it over another filter (which
// waits to see how the Load ends): it would wait for the Load that waits
// for it. In external-log mode the same holds for ApplyExternal of a record
// that changes the filter, and, since records apply in seq order, for
// every record encoded after such a one: the source must not wait on an
// ApplyExternal at all while records for the filter may be pending (see
// ApplyExternal). Lookups do not
// wait; they see each key no later than Load's return (a Load may hold
// keys back or build in private memory, see below). Changes to other
// filters, and checkpoints, go on between batches of 4096 keys.
//
// A Bloom filter's Load hashes and sets bits on every core
// (bloom.Builder): with 5 CPUs or more (GOMAXPROCS), the calling goroutine
// only copies the keys the source yields into batches and GOMAXPROCS
// goroutines hash the batches; with fewer, the calling goroutine hashes
// each key as it arrives (see loadRawKeysMinProcs). Either way each hash
// goes to one of GOMAXPROCS lanes, each owning one range of the
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
// (bloom.NewCountingBuilder), and also builds in private memory: its
// counters are saturating sums, so the build's counters are added to the
// mapped ones when the Load ends (bloom.Counting.MergeInto), whether the
// filter was empty or not; before the build starts (one key per 128
// words for an empty filter, per 16 for one holding items), keys for an
// empty filter are held, and keys for one holding items are added to the
// mapping batch by batch.
//
// A cuckoo filter's Load inserts on the calling goroutine, the buckets of
// the keys ahead prefetched: a key's two buckets may lie anywhere in the
// table, and an insert may move fingerprints between any of them. Only a
// layer with no items is built in private memory (keys held until then,
// as for a Bloom layer), since the build is copied over the mapped layer
// bucket by bucket (cuckoo.Filter.CopyInto): a lookup racing a copy over
// a layer that held items could miss a fingerprint the build had moved.
// Keys for a layer that held items are inserted in place. The copy is
// made when the layer fills or the Load ends. When the newest layer fills
// (built or not), the Load grows the chain by an empty layer, built the
// same way, without trying the key that did not fit in older layers, as
// Add does (deletes may have left room there).
//
// No Load dirties the pages of a layer it builds privately key by key:
// at a billion keys, keys added in place dirty random pages faster than
// the kernel writes them back, and each page is written back many times
// (measured: a counting Load of 1e9 keys into a 5.4 GB file wrote 646 GB
// in 18 minutes without finishing). If no private memory can be had (the
// commit limit is reached), a Load adds in place.
//
// A publish of 64 MiB or more asks the kernel to start writing back each
// 2 MiB of the layer as soon as it is written (publishPages), so that the
// disk writes the layer while the rest is published and the closing
// checkpoint's sync waits for little: a write that fails is reported by
// that sync all the same (mmapbits.Writebacker). On the 2-vCPU VM, a counting Load of 1e8
// keys on 2 CPUs took 3.00-3.05 s against 3.17-3.18 s without it (its
// checkpoint 73-85 ms against 302-310; the publish 20-60 ms longer), and
// 2.81-2.99 s against 3.12-3.37 in another alternation; a Bloom Load of
// 1e7 or 1e8 keys moved within the noise.
func (f *Bloom) Load(keys iter.Seq2[[]byte, error]) error {
	return f.loadSources([]iter.Seq2[[]byte, error]{keys})
}

func (f *Bloom) loadSources(sources []iter.Seq2[[]byte, error]) error {
	st := &bloomLoad{layer: -1}
	return f.base().bulk(sources, func(h uint64) error {
		_, _, err := f.addLocked(h)
		return err
	}, func(lb *keyBatch) (int, error) { return f.loadParallel(st, lb), nil },
		bulkOpts{rawKeys: loadRawKeys(), size: loadBatch},
		func(ok bool) error { f.endBuild(st, ok); return nil })
}

// loadRawKeysMinProcs is the fewest CPUs (GOMAXPROCS) at which a Bloom or
// counting Load hands its batches' keys to the builder's goroutines to
// hash (and a cuckoo Load hashes a batch on every CPU once it is full).
// Below it the source's goroutine hashes each key as it arrives and the
// batch goes to the builder as hashes: on 2 CPUs, copying every key
// (Keys.Append) and reading it again on another CPU cost more than the
// hashing it moved. On the 2-vCPU VM, BenchmarkLoad at 1e7 keys, three
// alternated runs of each build with -test.cpu 1,2,1,2, keys handed over
// against hashed on the source: 48.8-51.5 against 42.0-44.0 ns/key on
// one CPU, 28.9-34.2 against 23.2-28.2 on two. On many CPUs the source's
// goroutine is the serial part, so there the keys go to the builder as
// before (the 16-core figures in docs/PERFORMANCE.md were taken that way). The
// threshold itself is a guess: 3 and 4 CPUs were not measured, nor was
// it measured on a machine with more. A variable so that benchmarks can
// move it (-load.rawmin).
var loadRawKeysMinProcs = 5

// loadRawKeys reports whether a Bloom or counting Load's batches keep the
// keys for the builder to hash (see loadRawKeysMinProcs).
func loadRawKeys() bool { return runtime.GOMAXPROCS(0) >= loadRawKeysMinProcs }

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

// anonWords allocates a private build's words (a variable for tests). If
// it fails (the address space or the commit limit is exhausted), a Load
// adds in place instead: the Go heap would fail the same allocation, and
// there fatally.
var anonWords = mmapbits.AnonWords

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
// held for it. If no private memory can be had, it marks the layer's build
// done and adds the held keys to the mapped layer: the rest go there too.
func (f *Bloom) startBuild(st *bloomLoad, last *bloom.Filter, seen func(uint64) bool) {
	g := last.Geometry()
	words, free, err := anonWords(g.Words(), loadHugePages)
	if err != nil {
		st.built = true
		f.settle(st)
		return
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
	publishPages(words, f.b.regions[st.layer], func(lo, hi uint64) { built.OrInto(layer, lo, hi) })
	layer.AddCount(built.Count())
	f.b.regions[st.layer].Touch(0, words)
}

// publishPages runs fn over words 0..words of a private build in
// ranges of whole pages (so that no page of the mapping is written by two
// CPUs), on up to GOMAXPROCS goroutines, one per 32768 words or more, and
// waits for them: how every Load publishes a build into region r, the
// layer's. Each goroutine takes its range in parts of publishChunk words
// and, after each, asks r to start writing that part back
// (mmapbits.Writebacker) if the build has publishWritebackMin words or
// more, so that the disk writes it while the goroutines publish the rest
// and the Load's closing checkpoint, whose sync waits for every page,
// finds little left to write.
func publishPages(words uint64, r mmapbits.Region, fn func(lo, hi uint64)) {
	var wb mmapbits.Writebacker
	if words >= publishWritebackMin {
		wb, _ = r.(mmapbits.Writebacker)
	}
	procs := max(1, min(uint64(runtime.GOMAXPROCS(0)), words/(1<<15)))
	workers.Run(int(procs), func(w int) {
		lo := words * uint64(w) / procs &^ 511
		hi := words * uint64(w+1) / procs &^ 511
		if uint64(w+1) == procs {
			hi = words
		}
		for from := lo; from < hi; from += publishChunk {
			to := min(from+publishChunk, hi)
			fn(from, to)
			if wb != nil {
				wb.StartWriteback(from, to)
			}
		}
	})
}

// publishChunk is how many words (2 MiB, a multiple of a page's) a
// publishing goroutine writes before it asks for them to be written back.
const publishChunk = 1 << 18

// publishWritebackMin is the fewest words (64 MiB) for which a publish
// starts the write back early. For a smaller layer the publish is over
// before the disk could do much: a Bloom Load of 1e7 keys (12 MB) spent
// about 14 ms more publishing (each 2 MiB request took about 1.2 ms to
// submit) and saved about 7 ms of its checkpoint (-load.log, three Loads
// each way, in runs minutes apart on the 2-vCPU VM).
const publishWritebackMin = 1 << 23

// Load adds every key without logging; see (*Bloom).Load.
func (f *Cuckoo) Load(keys iter.Seq2[[]byte, error]) error {
	return f.loadSources([]iter.Seq2[[]byte, error]{keys})
}

func (f *Cuckoo) loadSources(sources []iter.Seq2[[]byte, error]) error {
	// A key that a batch's InsertHashes stops at (the layer is full) and
	// the keys after it go one at a time through add, which tries that
	// key in the layer once more and then grows the chain. Both use
	// cuckoo.MaxIterations, as the cuckoo Load always has, not the
	// filter's configured MaxIterations.
	st := &cuckooLoad{layer: -1}
	add := func(h uint64) error {
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
	}
	// With several cores, a batch is added while the source fills the
	// next; with loadRawKeys (5 CPUs or more) its keys are hashed then,
	// on all of them (keyBatch.hashes), else as they arrive (on the
	// 2-vCPU VM, BenchmarkLoadCuckoo at 1e7 on 2 CPUs, four alternated
	// runs of each build, six figures each: 50.9-70.0 ns/key with the
	// keys handed over, 43.9-53.6 hashed as they arrive).
	multi := runtime.GOMAXPROCS(0) > 1
	err := f.base().bulk(sources, add, func(lb *keyBatch) (int, error) { return f.loadParallel(st, lb, add) },
		bulkOpts{rawKeys: multi && loadRawKeys(), size: cuckooLoadBatch, pipe: multi},
		func(ok bool) error { return f.endBuild(st, ok, add) })
	if cuckooLoadBuilds != nil {
		cuckooLoadBuilds(st.builds)
	}
	return err
}

// cuckooLoad is the state of one cuckoo Load across its batches. Called
// with the filter's mutex held, as loadParallel and endBuild are.
type cuckooLoad struct {
	layer int      // the newest layer when the last batch came, -1 before the first
	keys  uint64   // keys given to loadParallel for that layer
	fresh bool     // the layer had no items when the Load reached it, and no key is in it yet
	held  []uint64 // keys for a fresh layer, before its build starts

	build  *cuckoo.Filter // the private words of the layer being built, or nil
	free   func() error   // frees build's words
	builds int            // builds published
}

// cuckooLoadBuilds, if not nil, is told how many layers each cuckoo Load
// built in private memory (for tests).
var cuckooLoadBuilds func(n int)

// loadParallel inserts a prefix of lb's keys, which it may reorder, and
// returns its length (the caller adds the rest one by one, growing the
// chain). Into a layer that held items they go in place (InsertHashes,
// prefetching the buckets of the keys ahead), as far as they fit. A
// layer that had no items when the Load reached it (or that the Load
// grew), and is at most a quarter of the machine's memory, is built in
// private anonymous memory (huge pages where the kernel gives them) once
// the Load has given it a key for every loadBuildEmpty of its words, its
// keys held in memory until then: no page of the layer's file is dirtied
// key by key, which at scale makes the kernel write the same pages back
// again and again. Keys go into the build on every core
// (cuckoo.Filter.Build). The build is copied into the mapped layer when
// the Load ends, or when it fills: the chain then grows by an empty
// layer, built the same way, which takes the rest of the batch. Lookups
// see a build's keys once it is copied (before Load returns).
func (f *Cuckoo) loadParallel(st *cuckooLoad, lb *keyBatch, add func(h uint64) error) (int, error) {
	hs := lb.hashes()
	for done := 0; ; {
		layers := *f.layers.Load()
		n := len(layers) - 1
		last := layers[n]
		if st.layer != n {
			st.layer, st.keys, st.fresh = n, 0, last.Count() == 0
		}
		rest := hs[done:]
		st.keys += uint64(len(rest))
		if words := last.Geometry().Words(); st.fresh && st.build == nil && words <= loadBuildMaxWords {
			if st.keys < words/loadBuildEmpty {
				st.held = append(st.held, rest...)
				return len(hs), nil
			}
			unfit, err := f.startBuild(st, last)
			if err != nil {
				return done, err
			}
			if len(unfit) > 0 {
				// Held keys that did not fit (one key held more times
				// than its two buckets have slots: the layer is
				// published), or all of them (no private memory): they
				// go one by one, and so does the rest of this batch.
				for _, h := range unfit {
					if err := add(h); err != nil {
						return done, err
					}
				}
				return done, nil
			}
		}
		var k int
		var err error
		if st.build != nil {
			// Private: on every core, the keys reordered.
			k, err = st.build.Build(rest, runtime.GOMAXPROCS(0))
		} else if k, err = last.InsertHashes(rest); k > 0 {
			st.fresh = false
		}
		if done += k; done == len(hs) {
			return done, nil
		}
		// The layer is full: publish it, if it was built, and grow the
		// chain by an empty layer for the rest. If the filter may not
		// grow, the rest go one by one, and the first fails as an Add
		// would.
		if st.build != nil {
			if err := f.publish(st, last); err != nil {
				return done, err
			}
		}
		// hs[done] is the key that found no free slot (Build and
		// InsertHashes leave it first among the rest).
		if _, err := f.grow(err, f.b.tx(len(layers)-1), hs[done]); err != nil {
			return done, nil
		}
	}
}

// startBuild begins a private build of layer last, inserting the keys
// held for it. If they do not all fit, it publishes the build and
// returns the keys from the first that did not. If no private memory can
// be had, it builds nothing, marks the layer as not fresh and returns
// every held key, for the caller to add in place.
func (f *Cuckoo) startBuild(st *cuckooLoad, last *cuckoo.Filter) (rest []uint64, err error) {
	held := st.held
	st.held = nil
	g := last.Geometry()
	words, free, err := anonWords(g.Words(), loadHugePages)
	if err != nil {
		st.fresh = false
		return held, nil
	}
	st.build, _ = cuckoo.New(g, words) // g is a valid layer's, words its size
	st.free = free
	if k, _ := st.build.Build(held, runtime.GOMAXPROCS(0)); k < len(held) {
		return held[k:], f.publish(st, last)
	}
	return nil, nil
}

// publish copies the private build into the mapped layer last (which
// has no items, by its count) on GOMAXPROCS goroutines, counts its items,
// and frees it. The layer's later keys go in place. A bucket of last that
// holds a fingerprint after all (its count was wrong: a catalog older
// than the layer file) is not overwritten: the build's fingerprints of
// that bucket are inserted beside them (cuckoo.MergeBucket), and if they
// do not fit, publish fails with an error wrapping ErrFull and the Load
// with it, the layer's own fingerprints kept.
func (f *Cuckoo) publish(st *cuckooLoad, last *cuckoo.Filter) error {
	build, free := st.build, st.free
	st.build, st.free, st.fresh = nil, nil, false
	st.builds++
	defer free()
	words := build.Geometry().Words()
	var mu sync.Mutex
	var busy []uint64
	publishPages(words, f.b.regions[st.layer], func(lo, hi uint64) {
		if b := build.CopyInto(last, lo, hi); len(b) > 0 {
			mu.Lock()
			busy = append(busy, b...)
			mu.Unlock()
		}
	})
	defer f.b.regions[st.layer].Touch(0, words)
	if len(busy) == 0 {
		last.SetCount(last.Count() + build.Count())
		return nil
	}
	f.b.s.opts.Logger.Warn("load: a layer its count said was empty holds fingerprints (is the catalog older than the layer file?); merging the build into it",
		"filter", f.b.name(), "layer", st.layer, "busy buckets", len(busy))
	// The count was wrong: the layer's count becomes the fingerprints it
	// holds, counted once the merge is done or has stopped (a scan of the
	// layer, in this rare case only).
	defer func() {
		g := last.Geometry()
		last.SetCount(usedSlots(f.b.tx(st.layer), g, g.Buckets))
	}()
	for _, i := range busy {
		if _, err := build.MergeBucket(last, i); err != nil {
			return fmt.Errorf("store: cuckoo filter %q: layer %d, which its count said was empty, held fingerprints, and the load's do not fit beside them: %w",
				f.b.name(), st.layer, err)
		}
	}
	return nil
}

// endBuild makes every key given to loadParallel reach the mapped
// layers, if ok: it publishes the layer being built, if any, and adds
// the keys held for a fresh layer (a Load too short to build it), in
// place and, past what fits, one by one through add. Either way it frees
// the private words.
func (f *Cuckoo) endBuild(st *cuckooLoad, ok bool, add func(h uint64) error) error {
	held := st.held
	st.held = nil
	if st.build != nil {
		if !ok {
			free := st.free
			st.build, st.free = nil, nil
			return free()
		}
		if err := f.publish(st, (*f.layers.Load())[st.layer]); err != nil {
			return err
		}
	}
	if !ok || len(held) == 0 {
		return nil
	}
	layers := *f.layers.Load()
	k, _ := layers[len(layers)-1].InsertHashes(held)
	for _, h := range held[k:] {
		if err := add(h); err != nil {
			return err
		}
	}
	return nil
}

// Load adds every key without logging; see (*Bloom).Load.
func (f *Counting) Load(keys iter.Seq2[[]byte, error]) error {
	return f.loadSources([]iter.Seq2[[]byte, error]{keys})
}

func (f *Counting) loadSources(sources []iter.Seq2[[]byte, error]) error {
	st := &countingLoad{}
	return f.base().bulk(sources, func(h uint64) error {
		if f.b.meta.NonScaling && f.c.Items()+st.queued() >= f.b.meta.Capacity {
			return fmt.Errorf("store: counting filter %q holds its capacity of %d: %w", f.b.name(), f.b.meta.Capacity, ErrFull)
		}
		f.c.AddHash(h)
		return nil
	}, func(lb *keyBatch) (int, error) { return f.loadParallel(st, lb), nil },
		bulkOpts{rawKeys: loadRawKeys(), size: loadBatch},
		func(ok bool) error { f.endBuild(st, ok); return nil })
}

// loadBuildCounting is the words per key at which a counting Load starts
// a private build of a filter that held items (one that was empty starts
// at loadBuildEmpty): below it, allocating and merging the whole filter
// costs more than adding the keys in place.
const loadBuildCounting = 16

// countingLoad is the state of one counting Load across its batches.
// Called with the filter's mutex held, as loadParallel and endBuild are.
type countingLoad struct {
	started bool
	fresh   bool     // the filter held no items when the Load began
	keys    uint64   // keys given to loadParallel
	held    []uint64 // keys for a fresh filter, before its build starts

	build   *bloom.Counting // private counters being built, or nil
	free    func() error    // frees build's words
	pending uint64          // keys given to build's builder, not yet merged
	built   bool            // a build was started: the Load does not start another

	// builder adds to build with plain stores, while the filter is
	// unlocked too, or, with no build, to the mapped counters, waited
	// for batch by batch.
	builder *bloom.Builder
}

// queued returns the keys given to the Load and not yet counted in the
// filter's Items.
func (st *countingLoad) queued() uint64 { return st.pending + uint64(len(st.held)) }

// loadParallel adds a prefix of lb: as far as a non-scaling filter has
// room, the whole batch. Once the Load has given a filter a key for every
// loadBuildCounting of its words (loadBuildEmpty if it was empty), and
// the filter is at most a quarter of the machine's memory, keys go to a
// private build in anonymous memory, counted with plain stores on every
// core while the source is read, and merged into the mapped counters when
// the Load ends (endBuild). Before that, keys for an empty filter are held
// in memory (a short Load adds them in place when it ends, without
// allocating a build), and keys for one that held items go to the mapped
// counters batch by batch, on every core (or, on one CPU or for a short
// batch, through AddHashes on this goroutine, prefetching the blocks of
// the keys ahead). Counters are saturating sums, so adding some keys in
// place and merging the others leaves the words of AddHash in a loop over
// all of them.
func (f *Counting) loadParallel(st *countingLoad, lb *keyBatch) int {
	if !st.started {
		st.started, st.fresh = true, f.c.Items() == 0
	}
	k := lb.len()
	if f.b.meta.NonScaling {
		room := f.b.meta.Capacity - min(f.c.Items()+st.queued(), f.b.meta.Capacity)
		k = int(min(uint64(k), room))
	}
	st.keys += uint64(k)
	if words := f.c.Geometry().Words(); !st.built && words <= loadBuildMaxWords {
		per := uint64(loadBuildCounting)
		if st.fresh {
			per = loadBuildEmpty
		}
		if st.keys >= words/per {
			f.startBuild(st)
		} else if st.fresh {
			st.held = append(st.held, lb.hashes()[:k]...)
			return k
		}
	}
	if k == 0 {
		return 0
	}
	if st.builder == nil {
		if min(runtime.GOMAXPROCS(0), k/loadMinPerWorker) < 2 {
			f.c.AddHashes(lb.hashes()[:k])
			return k
		}
		st.builder = bloom.NewCountingBuilder(f.c, 0, false)
	}
	switch {
	case k < lb.len() || lb.hashed:
		st.builder.Add(lb.hashes()[:k])
	default:
		lb.keys = st.builder.AddKeys(lb.keys, k) // hashed by the builder
	}
	if st.build != nil {
		// The lanes write only the private counters: they go on after
		// the filter is unlocked, while the source is read.
		st.pending += uint64(k)
		return k
	}
	// The lanes write mapped words: they must be done before the filter
	// is unlocked (a Close could unmap them).
	f.c.SetItems(f.c.Items() + st.builder.Wait())
	return k
}

// startBuild begins a counting Load's private build, feeding it the keys
// held for it. If no private memory can be had, it adds the held keys in
// place instead, where the rest go too.
func (f *Counting) startBuild(st *countingLoad) {
	st.built = true
	g := f.c.Geometry()
	words, free, err := anonWords(g.Words(), loadHugePages)
	if err != nil {
		if len(st.held) > 0 {
			f.c.AddHashes(st.held)
			st.held = nil
		}
		return
	}
	if st.builder != nil {
		st.builder.Close() // waited for after its last batch
	}
	st.build, _ = bloom.NewCounting(g, words) // g is the filter's, words its size
	st.free = free
	st.builder = bloom.NewCountingBuilder(st.build, 0, true)
	if len(st.held) > 0 {
		st.builder.Add(st.held)
		st.pending += uint64(len(st.held))
		st.held = nil
	}
}

// endBuild stops the Load's lanes and, if ok, adds the keys held for a
// fresh filter in place, and merges the private build, if any, into the
// mapped counters on GOMAXPROCS goroutines and counts its keys. Either
// way it frees the private words.
func (f *Counting) endBuild(st *countingLoad, ok bool) {
	held, build, builder, free, pending := st.held, st.build, st.builder, st.free, st.pending
	st.held, st.build, st.builder, st.free, st.pending = nil, nil, nil, nil, 0
	if builder != nil {
		builder.Close() // its lanes may write build: stop them before it is freed
	}
	if ok && len(held) > 0 {
		f.c.AddHashes(held)
	}
	if build == nil {
		return
	}
	defer free()
	if !ok {
		return
	}
	words := build.Geometry().Words()
	publishPages(words, f.b.regions[0], func(lo, hi uint64) { build.MergeInto(f.c, lo, hi) })
	f.c.SetItems(f.c.Items() + pending)
}

// Keys adapts a plain sequence of keys, which cannot fail, to Load.
func Keys(keys iter.Seq[[]byte]) iter.Seq2[[]byte, error] {
	if keys == nil {
		return nil // Load refuses it, changing nothing
	}
	return func(yield func([]byte, error) bool) {
		for k := range keys {
			if !yield(k, nil) {
				return
			}
		}
	}
}

// keyBatch is a batch of a Load's keys: the keys themselves (bulk's
// rawKeys, on 5 CPUs or more: a Bloom or counting Load's builder hashes
// them on its own goroutines, a cuckoo Load a full batch on every CPU) or
// only their hashes, computed as they arrive.
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

// hashes returns the hashes of the batch's keys, hashing them if they
// are not yet: on up to GOMAXPROCS goroutines, which claim loadHashShare
// keys at a time (one goroutine, the caller's, for a batch of fewer).
func (lb *keyBatch) hashes() []uint64 {
	if !lb.hashed {
		n := lb.keys.Len()
		lb.hs = slices.Grow(lb.hs[:0], n)[:n]
		// Chunks claimed in turn: a goroutine that shares its CPU with
		// the key source (a pipelined Load) takes fewer.
		workers.Chunks(runtime.GOMAXPROCS(0), n, loadHashShare, func(_, _, lo, hi int) {
			for i := lo; i < hi; i++ {
				lb.hs[i] = Hash(lb.keys.At(i))
			}
		})
		lb.hashed = true
	}
	return lb.hs
}

// loadHashShare is how many keys of a batch a hashing goroutine claims
// at a time.
const loadHashShare = 8192

// reset empties the batch.
func (lb *keyBatch) reset() {
	lb.hs = lb.hs[:0]
	if lb.keys != nil {
		lb.keys.Reset()
		lb.hashed = false
	}
}

// batchPanic carries a panic of a pipelined Load's batch goroutine to the
// goroutine that waits for the batch, which panics with v.
type batchPanic struct{ v any }

func (p batchPanic) Error() string { return fmt.Sprintf("store: load: a batch panicked: %v", p.v) }

// bulkOpts are how bulk batches a Load's keys.
type bulkOpts struct {
	rawKeys bool // batches keep the keys, for par to hash
	size    int  // keys per batch
	pipe    bool // a batch is added while the source fills the next
}

// bulk runs add for every key's hash with the catalog marked "loading"
// around the whole run, then checkpoints. par, if not nil, may add a
// prefix of each batch first (to a private build, or in place on several
// goroutines, or prefetched); it returns how many keys it added, or an
// error that ends the run. end, if not nil, runs once the source is
// drained with ok set (it makes every key given to par reach the mapped
// words, and its error ends the run), or, with ok unset, after a failed
// run (it drops what par built). Both run with the filter locked.
//
// A batch holds bo.size keys. With bo.rawKeys, batches keep the keys for
// par to hash (the hasher goroutines of a bloom.Builder, or
// keyBatch.hashes on every core); otherwise keys are hashed as they
// arrive. Either way the source runs, and batches fill, with no lock
// held, so the source may be slow, or use the store itself (other
// filters, Info, List); each batch is then added with the commit gate
// (shared) and the filter's mutex held: on the source's goroutine, or,
// with bo.pipe, on a goroutine of its own while the source fills the
// next batch (one batch at a time). Other mutations of the filter wait on
// b.loading meanwhile. However the run ends — the source fails or
// panics, a key cannot be added, the store closes — the filter is marked
// incomplete unless every key was added and checkpointed.
//
// With several sources (LoadParallel), fillFrom runs each on a goroutine
// of its own, hashing into batches of bo.size, and every batch is added
// on the calling goroutine as it comes.
func (b *filterBase) bulk(sources []iter.Seq2[[]byte, error], add func(h uint64) error, par func(lb *keyBatch) (int, error), bo bulkOpts, end func(ok bool) error) (err error) {
	switch {
	case len(sources) == 0:
		return fmt.Errorf("store: load %q: %w: no key source", b.name(), ErrInvalid)
	case len(sources) == 1 && sources[0] == nil:
		return fmt.Errorf("store: load %q: %w: keys is nil", b.name(), ErrInvalid)
	}
	for i, src := range sources {
		if src == nil {
			return fmt.Errorf("store: load %q: %w: key source %d is nil", b.name(), ErrInvalid, i)
		}
	}
	keys := sources[0]
	if err := b.start(); err != nil {
		return err
	}
	complete := false
	touched := false // every page's checksum marked stale, below
	start := time.Now()
	defer func() {
		b.mu.Lock()
		if end != nil {
			// Drops what a failed run built; its lanes' fault, if one is
			// still to be raised, fails the store (guardChange).
			_ = b.guardChange(func() error { return end(false) })
		}
		if !touched {
			// A panic (of the source, or one a batch raised) ends the
			// run before the marking below, with batches written: mark
			// them here, or the next checkpoint, Close's too, keeps the
			// old checksums and Check reports the written pages as
			// damage for good (an adversarial review: 524 pages of a
			// counting filter whose source panicked).
			for _, r := range b.regions {
				r.Touch(0, r.NumWords())
			}
			b.dirty.Store(true)
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
	n := 0 // keys added (on the goroutine adding batches)
	newBatch := func() *keyBatch {
		lb := &keyBatch{hs: make([]uint64, 0, bo.size)}
		if par != nil && bo.rawKeys {
			// par hashes the keys elsewhere: keep them.
			lb.keys = &bloom.Keys{Buf: make([]byte, 0, 16*bo.size), Ends: make([]int, 0, bo.size)}
		} else {
			lb.hashed = true
		}
		return lb
	}
	batch := newBatch()
	// locked runs fn with the commit gate (shared) and the filter's mutex
	// held, if the filter can still be changed, under the fault guard of
	// changes (on every goroutine fn's lanes run on: workers.Run): a
	// fault reading or writing the mapping fails the store and the Load.
	locked := func(fn func() error) error {
		b.s.gate.RLock()
		defer b.s.gate.RUnlock()
		if err := b.check(); err != nil {
			return err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.dirty.Store(true)
		return b.guardChange(fn)
	}
	addBatch := func(batch *keyBatch) error {
		done, size := 0, batch.len()
		if par != nil {
			// par may take the keys it adds (and leave an empty batch);
			// it hashes the rest here first.
			var err error
			done, err = par(batch)
			n += done
			if err != nil {
				return err
			}
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
	flush := func(batch *keyBatch) error { return locked(func() error { return addBatch(batch) }) }
	// With bo.pipe, a full batch is added on a goroutine of its own while
	// the source fills the other one; wait waits for it. It runs before
	// the cleanup above, even in a panic: that frees what par built.
	var inflight chan error
	spare := batch
	wait := func() error {
		if inflight == nil {
			return nil
		}
		err := <-inflight
		inflight = nil
		if p, ok := err.(batchPanic); ok {
			panic(p.v) // on the caller's goroutine, as an unpipelined Load's
		}
		return err
	}
	if h := b.s.hooks.bulkRawKeys; h != nil {
		h(bo.rawKeys)
	}
	if bo.pipe {
		spare = newBatch()
		defer func() { _ = wait() }()
	}
	send := func() error {
		if !bo.pipe {
			return flush(batch)
		}
		if err := wait(); err != nil { // spare is free once it returns
			return err
		}
		full, ch := batch, make(chan error, 1)
		inflight = ch
		go func() {
			defer func() {
				// A panic here would end the process: hand it to the
				// Load's caller instead (the mutexes are released).
				if v := recover(); v != nil {
					ch <- batchPanic{v}
				}
			}()
			if h := b.s.hooks.pipeFlush; h != nil {
				h()
			}
			ch <- flush(full)
		}()
		batch, spare = spare, full
		return nil
	}
	m, seen := 0, 0 // keys in batch, keys from the source
	if len(sources) > 1 {
		err = b.fillFrom(sources, bo.size, flush)
		keys = func(func([]byte, error) bool) {} // the loop below is done
	}
	for k, serr := range keys {
		if serr != nil {
			err = fmt.Errorf("store: load %q: the key source failed after %d keys: %w", b.name(), seen, serr)
			break
		}
		seen++
		// With rawKeys, the one part of the Load that runs on the
		// source's goroutine: keep it to a copy.
		if kb := batch.keys; kb != nil {
			kb.Append(k)
		} else {
			batch.hs = append(batch.hs, Hash(k))
		}
		if m++; m == bo.size {
			if err = send(); err != nil {
				break
			}
			m = 0
		}
	}
	if werr := wait(); err == nil {
		err = werr
	}
	if err == nil && m > 0 {
		err = flush(batch)
	}
	added := time.Since(start)
	if err == nil && end != nil {
		err = locked(func() error { return end(true) })
	}
	if err == nil {
		b.s.opts.Logger.Debug("load: keys added, checkpointing", "filter", b.name(), "keys", n,
			"added", added, "ended", time.Since(start)-added)
	}
	if h := b.s.hooks.loadEnded; h != nil {
		h()
	}
	// Cuckoo and counting loads write words without saying which: every
	// page's checksum is stale (the closing checkpoint recomputes them).
	// The filter is dirty again too: a checkpoint that ran since the last
	// batch (a periodic one) took the flag, and the closing checkpoint
	// computes sums only for a dirty filter (before, it then recorded the
	// filter complete with its checksum pages never written).
	b.mu.Lock()
	for _, r := range b.regions {
		r.Touch(0, r.NumWords())
	}
	b.dirty.Store(true)
	touched = true
	b.mu.Unlock()
	if err == nil {
		// The checkpoint records the filter as complete once its files are
		// synced; if it fails, the catalog still says "loading".
		b.mu.Lock()
		b.loadDone = true
		b.mu.Unlock()
		err = b.s.checkpoint(ckptLoad)
		complete = err == nil
	}
	if err != nil && !errors.Is(err, ErrIncomplete) {
		err = fmt.Errorf("%w (the filter is left incomplete: %w)", err, ErrIncomplete)
	}
	return err
}

// start begins a Load: with the filter locked it marks the filter as
// loading in the catalog, logs a load record and makes it durable, makes
// every pending logged change reach the map (their after-images were
// planned before the load and must not land over loaded words later),
// and sets b.loading.
//
// The load record is what lets Open tell a catalog from before the Load
// (one put back from a copy; the Load's closing checkpoint covers the
// record): replayed, it marks the filter incomplete, and once a later
// checkpoint has removed it (the Load's own leaves the segments:
// ckptLoad) the older catalog's filters need records the WAL no longer
// holds. It is durable before the Load changes a word, with the
// fdatasync the pending changes need anyway.
//
// The catalog is marked first: a commit that fails without writing
// anything (catalogUntouched: a lock held too long, no descriptor, a
// file size limit) fails only this call, and must then leave no load
// record behind, which a crash before the next checkpoint would replay
// into a filter incomplete though no Load changed a word of it. A crash
// between the commit and the record reopens the filter incomplete from
// the catalog, as any interrupted Load. A failure after the commit fails
// the store, and leaves the filter incomplete in memory too; so a log
// that failed before this Load (failedNow) fails it before the commit.
func (b *filterBase) start() error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.end()
	defer b.mu.Unlock()
	// A log that has failed (under SyncInterval, a background fdatasync
	// the store has not noticed yet) would refuse the record after the
	// commit: the store fails first, and the catalog stays as it is.
	if err := b.s.failedNow(); err != nil {
		return err
	}
	b.loading, b.loadDone = make(chan struct{}), false
	m := b.snapshotMeta(b.meta.SyncedLSN)
	// The counts stay those of the last checkpoint, as addLayer's do.
	m.Layers = append([]format.LayerMeta(nil), b.meta.Layers...)
	abort := func(err error) error {
		close(b.loading)
		b.loading = nil
		return err
	}
	if err := b.s.cat.PutFilters(0, map[string]*format.FilterMeta{b.name(): m}); err != nil {
		return abort(b.s.catalogFailed(err))
	}
	b.meta = m
	err := b.logLoad()
	if err == nil {
		if err = b.s.log.Sync(); err != nil {
			err = b.s.fail(err)
		}
	}
	if err == nil {
		if err = b.applyThrough(b.s.log.LastLSN()); err != nil {
			err = b.s.fail(err)
		}
	}
	if err != nil {
		// The store failed; the catalog says loading.
		b.incomplete.Store(true)
		b.off.Store(true)
		return abort(err)
	}
	return nil
}

// logLoad appends the filter's load record (see start and
// markIncomplete); a failed append fails the store. Called with b.mu
// held.
func (b *filterBase) logLoad() error {
	if _, err := b.s.log.Append(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpLoad, FilterID: b.id})); err != nil {
		return b.s.fail(err)
	}
	return nil
}

// markIncomplete makes the filter incomplete, as an interrupted Load
// leaves it, in memory, in the WAL (a load record) and, before it
// returns, in the catalog: an external op that could not apply (an add
// that did not fit, any op on a broken filter) is skipped, and once the
// record that skipped it is durable the engine may drop it, so the mark
// must not wait for the next checkpoint (a crash before it would bring
// the filter back whole but for the skipped op). The load record, logged
// before that record and so durable with it, keeps the mark when a
// catalog from before it is put back, as it does for a Load (see start).
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
	if err := b.logLoad(); err != nil {
		return err
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
