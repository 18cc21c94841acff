package store

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/filterstore/filterstore/mmapbits"
)

// filterBase is what every filter handle shares: its catalog entry, its
// mapped layers, its writer mutex and its overlay.
type filterBase struct {
	s    *Store
	name string

	// mu serializes this filter's mutations, guards meta, regions and ov.
	mu      sync.Mutex
	meta    *filterMeta
	regions []mmapbits.Region

	ov         overlay
	dropped    atomic.Bool
	dirty      atomic.Bool // changed since the last checkpoint's msync
	incomplete atomic.Bool // a bulk Load was interrupted by a crash

	// lastLSN is the LSN of this filter's latest logged change. A call
	// that changes nothing (already present, nothing to delete) answers
	// from state that may include that change, so it waits for it to be
	// durable too. Guarded by mu.
	lastLSN uint64

	// loadRunning is set while a Load runs; checkpoints then record the
	// filter as loading. Guarded by mu.
	loadRunning bool

	// applyWrites stores after-images in a layer's map (kind-specific:
	// cuckoo brackets them for its lookups). Called with mu held.
	applyWrites func(layer int, writes []wordWrite)
	// items returns the current item count of each layer, for checkpoints.
	items func() []uint64
}

// check returns the error a mutation of this filter gets now, if any.
func (b *filterBase) check() error {
	switch {
	case b.s.closed.Load():
		return fmt.Errorf("store: filter %q: %w", b.name, ErrClosed)
	case b.dropped.Load():
		return fmt.Errorf("store: filter %q was dropped: %w", b.name, ErrClosed)
	case b.s.opts.ReadOnly:
		return fmt.Errorf("store: filter %q: %w", b.name, ErrReadOnly)
	case b.incomplete.Load():
		return fmt.Errorf("store: filter %q: %w", b.name, ErrIncomplete)
	}
	return nil
}

// unusable reports whether lookups must answer "maybe present" because the
// filter cannot be trusted or read: closed, dropped, or incomplete. Never
// answering "absent" for such a filter keeps the no-false-negative promise.
func (b *filterBase) unusable() bool {
	return b.s.closed.Load() || b.dropped.Load() || b.incomplete.Load()
}

// begin enters a mutation: it holds the store's commit gate (shared) until
// end, so a checkpoint sees no half-done mutation.
func (b *filterBase) begin() error {
	b.s.gate.RLock()
	if err := b.check(); err != nil {
		b.s.gate.RUnlock()
		return err
	}
	return nil
}

func (b *filterBase) end() { b.s.gate.RUnlock() }

// logWords appends t's after-images as one record, stages them, and
// returns the record's LSN. Called with b.mu held.
func (b *filterBase) logWords(t *wordTx, delta int8) (uint64, error) {
	lsn, err := b.s.log.Append(appendWordsRecord(nil, b.meta.ID, t.layer, delta, t.writes))
	if err != nil {
		return 0, err
	}
	b.stage(lsn, t)
	b.lastLSN = lsn
	return lsn, nil
}

// settleNoop is settle for a call that logged nothing: it waits for the
// filter's latest logged change, which its answer may rest on. Called
// without b.mu; lsn is b.lastLSN read under it.
func (b *filterBase) settleNoop(lsn uint64) error {
	if lsn == 0 {
		return nil
	}
	return b.settle(lsn)
}

// settle waits until lsn is durable to the mode's promise and, under
// SyncAlways, applies every pending change through lsn. Called without
// b.mu.
func (b *filterBase) settle(lsn uint64) error {
	if err := b.s.log.WaitDurable(lsn); err != nil {
		return err
	}
	if b.s.opts.Sync == SyncAlways {
		b.mu.Lock()
		b.applyThrough(lsn)
		b.mu.Unlock()
	}
	return nil
}

// tx starts a word transaction on a layer. Called with b.mu held.
func (b *filterBase) tx(layer int) *wordTx {
	return &wordTx{b: b, layer: layer, words: b.regions[layer].Words()}
}

func (b *filterBase) path(layer int) string { return b.s.layerPath(b.meta.ID, layer) }

// addLayer creates the file of layer len(meta.Layers) with geometry l and
// records it in the catalog; the file is made durable first, so a crash in
// between leaves only an orphan file that the next Open removes. Called
// with b.mu held.
func (b *filterBase) addLayer(l layerMeta) (mmapbits.Region, error) {
	m := *b.meta
	m.Layers = append(append([]layerMeta(nil), m.Layers...), l)
	if len(m.Layers) > maxLayers {
		return nil, fmt.Errorf("store: filter %q: %w: already %d layers", b.name, ErrFull, maxLayers)
	}
	layer := len(m.Layers) - 1
	r, err := b.s.opts.mapper.Create(b.path(layer), m.header(layer))
	if err != nil {
		return nil, err
	}
	// The counts stay those of the last checkpoint: recovery replays the
	// WAL after it on top of them.
	m.State = b.state()
	if err := b.s.cat.putFilters(0, map[string]*filterMeta{b.name: &m}); err != nil {
		r.Close()
		b.s.opts.mapper.Remove(b.path(layer))
		return nil, err
	}
	b.meta = &m
	b.regions = append(b.regions, r)
	return r, nil
}

// snapshotMeta returns the meta with current item counts, for a
// checkpoint. Called with b.mu
// held, or with the store's gate held exclusively.
func (b *filterBase) snapshotMeta() *filterMeta {
	m := *b.meta
	m.Layers = append([]layerMeta(nil), m.Layers...)
	for i, n := range b.items() {
		m.Layers[i].Items = n
	}
	m.State = b.state()
	return &m
}

// state is the catalog state to record. Called with b.mu held.
func (b *filterBase) state() filterState {
	if b.incomplete.Load() || b.loadRunning {
		return stateLoading
	}
	return stateOK
}

func (b *filterBase) closeRegions() {
	for _, r := range b.regions {
		r.Close()
	}
}

// counted is a filter layer that keeps its item count.
type counted interface{ Count() uint64 }

// layerCounts returns each layer's item count.
func layerCounts[L counted](layers []L) []uint64 {
	out := make([]uint64, len(layers))
	for i, l := range layers {
		out[i] = l.Count()
	}
	return out
}

// sumCounts returns the item count of a chain of layers.
func sumCounts[L counted](layers []L) uint64 {
	var n uint64
	for _, l := range layers {
		n += l.Count()
	}
	return n
}
