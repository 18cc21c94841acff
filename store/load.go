package store

import (
	"fmt"
	"iter"
)

// loadBatch is how many keys Load applies per hold of the filter's locks,
// so checkpoints and other writers interleave with a long load.
const loadBatch = 4096

// Load adds every key of keys without logging them: far faster than Add
// for building a filter, durable at the checkpoint that ends the call. The
// catalog marks the filter as loading first; if a crash interrupts the
// load, the filter reopens incomplete: lookups answer "maybe", mutations
// fail with ErrIncomplete, and only Drop (then re-create) recovers it.
func (f *Bloom) Load(keys iter.Seq[[]byte]) error {
	return f.b.bulk(keys, func(h uint64) error {
		_, _, err := f.addLocked(h)
		return err
	})
}

// Load adds every key without logging; see (*Bloom).Load.
func (f *Cuckoo) Load(keys iter.Seq[[]byte]) error {
	return f.b.bulk(keys, func(h uint64) error {
		layers := *f.layers.Load()
		n := len(layers) - 1
		if err := layers[n].InsertHash(h); err == nil || f.cfg.Expansion == 0 {
			return err
		}
		t, err := f.insertLocked(h) // grows a layer, plans into it
		if err != nil {
			return err
		}
		f.b.applyWrites(t.layer, t.writes)
		return nil
	})
}

// Load adds every key without logging; see (*Bloom).Load.
func (f *Counting) Load(keys iter.Seq[[]byte]) error {
	return f.b.bulk(keys, func(h uint64) error {
		if f.b.meta.NonScaling && f.c.Items() >= f.b.meta.Capacity {
			return fmt.Errorf("store: counting filter %q holds its capacity of %d: %w", f.b.name, f.b.meta.Capacity, ErrFull)
		}
		f.c.AddHash(h)
		return nil
	})
}

// bulk runs add for every key's hash, batch by batch, with the filter's
// mutex and the commit gate held per batch, the catalog marked "loading"
// around the whole run, then checkpoints.
func (b *filterBase) bulk(keys iter.Seq[[]byte], add func(h uint64) error) error {
	if keys == nil {
		return fmt.Errorf("store: load %q: %w: keys is nil", b.name, ErrInvalid)
	}
	if err := b.begin(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.loadRunning {
		b.mu.Unlock()
		b.end()
		return fmt.Errorf("store: load %q: %w: a Load is already running", b.name, ErrInvalid)
	}
	// Pending logged changes must reach the map before unlogged writes
	// land beside them, or applying them later would undo the load.
	err := b.s.log.Sync()
	if err == nil {
		b.applyThrough(b.s.log.LastLSN())
		b.loadRunning = true
		m := b.snapshotMeta()
		err = b.s.cat.putFilters(0, map[string]*filterMeta{b.name: m})
	}
	b.mu.Unlock()
	b.end()
	if err != nil {
		b.mu.Lock()
		b.loadRunning = false
		b.mu.Unlock()
		return err
	}

	// Locks are taken per batch of loadBatch keys, so checkpoints and
	// other writers interleave with a long load.
	var loadErr error
	held, n := false, 0
	release := func() {
		if held {
			b.dirty.Store(true)
			b.mu.Unlock()
			b.end()
			held = false
		}
	}
	for k := range keys {
		if !held {
			if loadErr = b.begin(); loadErr != nil {
				break
			}
			b.mu.Lock()
			held = true
		}
		if loadErr = add(Hash(k)); loadErr != nil {
			break
		}
		if n++; n%loadBatch == 0 {
			release()
		}
	}
	release()
	b.mu.Lock()
	b.loadRunning = false
	b.mu.Unlock()
	if err := b.s.Checkpoint(); err != nil {
		return err
	}
	return loadErr
}
