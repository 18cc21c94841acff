package store

import (
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
)

// LoadParallel is Load from several sources at once: each source runs on
// a goroutine of its own, which hashes the keys it yields into batches,
// and every batch is added as a Load adds its batches. An engine that
// holds its keys in several files (SSTs, shards) reads them all at once
// rather than one after another through one iterator, which bounds a
// Load on many cores (a source's goroutine spends 10-20 ns on every key
// it hands over).
//
// Everything Load promises holds for the keys of all the sources
// together: the filter gets every key of every source, or is left
// incomplete (ErrIncomplete) if any source fails or panics, a key cannot
// be added, or the store closes. The first failure stops the other
// sources at their next key; LoadParallel returns once every source has
// stopped, with the first error (a source's names its index), or panics
// on the calling goroutine with the first source's panic. Keys of
// different sources reach the filter in no set order, so a Bloom
// filter's item count (keys that set a new bit) and a cuckoo
// filter's layout may differ from run to run. A source must not call
// LoadParallel's filter, as for Load; sources may run while others wait.
// Each source holds at most two batches of hashes (8 bytes a key; 4096
// keys a batch for a Bloom or counting filter, 262144 for a cuckoo one),
// made as it yields keys. A source that ends its goroutine
// (runtime.Goexit) fails the Load as an error would.
//
// No source, or a nil one, is ErrInvalid. With one source it is Load.
func (f *Bloom) LoadParallel(sources ...iter.Seq2[[]byte, error]) error {
	return f.loadSources(sources)
}

// LoadParallel is Load from several sources at once; see
// (*Bloom).LoadParallel.
func (f *Counting) LoadParallel(sources ...iter.Seq2[[]byte, error]) error {
	return f.loadSources(sources)
}

// LoadParallel is Load from several sources at once; see
// (*Bloom).LoadParallel.
func (f *Cuckoo) LoadParallel(sources ...iter.Seq2[[]byte, error]) error {
	return f.loadSources(sources)
}

// fillFrom runs every source on a goroutine of its own, hashing the keys
// into batches of size hashes, and calls flush on the calling goroutine
// for each full (or last) batch. The first source failure or panic, or
// flush error, stops every source at its next key; fillFrom returns once
// every source has returned, with the first error, and panics (on the
// calling goroutine) with a source's panic if that came first.
func (b *filterBase) fillFrom(sources []iter.Seq2[[]byte, error], size int, flush func(*keyBatch) error) error {
	type full struct {
		lb   *keyBatch
		free chan *keyBatch
	}
	var (
		stop  atomic.Bool
		mu    sync.Mutex
		first error // the first failure, a batchPanic for a panic
	)
	fail := func(e error) {
		mu.Lock()
		if first == nil {
			first = e
		}
		mu.Unlock()
		stop.Store(true)
	}
	fulls := make(chan full, len(sources))
	var wg sync.WaitGroup
	for i, src := range sources {
		free := make(chan *keyBatch, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0            // keys this source yielded
			returned := false // the goroutine ends by a return, not a panic or runtime.Goexit
			defer func() {
				if v := recover(); v != nil {
					fail(batchPanic{v})
				} else if !returned {
					// runtime.Goexit in the source (t.FailNow, say): it
					// neither failed nor panicked, but its other keys
					// never come (an adversarial review: the Load
					// returned nil, with keys missing).
					fail(fmt.Errorf("store: load %q: source %d ended its goroutine (runtime.Goexit) after %d keys", b.name(), i, n))
				}
			}()
			// A source's two batches are made as they are first needed:
			// one that yields few keys (or none) takes little memory.
			made := 0
			next := func() *keyBatch {
				if made < 2 {
					select {
					case lb := <-free:
						return lb
					default:
					}
					made++
					return &keyBatch{hs: make([]uint64, 0, min(size, 1024<<made)), hashed: true}
				}
				return <-free
			}
			var lb *keyBatch
			for k, serr := range src {
				if stop.Load() {
					returned = true
					return
				}
				if serr != nil {
					fail(fmt.Errorf("store: load %q: source %d failed after %d keys: %w", b.name(), i, n, serr))
					returned = true
					return
				}
				n++
				if lb == nil {
					lb = next()
				}
				lb.hs = append(lb.hs, Hash(k))
				if len(lb.hs) == size {
					fulls <- full{lb, free}
					lb = nil
				}
			}
			returned = true
			if lb != nil && len(lb.hs) > 0 && !stop.Load() {
				fulls <- full{lb, free}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(fulls)
	}()
	// Every batch is taken and handed back, also after a failure or a
	// panic of flush, so that no source waits for ever.
	defer func() {
		if v := recover(); v != nil {
			stop.Store(true)
			for f := range fulls {
				f.free <- f.lb
			}
			panic(v)
		}
	}()
	for f := range fulls {
		if !stop.Load() {
			if ferr := flush(f.lb); ferr != nil {
				fail(ferr)
			}
		}
		f.lb.reset()
		f.free <- f.lb
	}
	if p, ok := first.(batchPanic); ok {
		panic(p.v)
	}
	return first
}
