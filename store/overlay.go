package store

import (
	"fmt"
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/format"
)

// Non-monotonic changes (cuckoo slots, counting-Bloom counters, bitmap
// words) follow docs/DESIGN.md §5 strictly: a mutation is planned through a
// wordTx that reads the filter as it will be once every earlier pending
// change is applied, its after-images go to the WAL, and only once the WAL
// says they are durable to the mode's promise are they stored in the
// mapped file, in WAL order. Until then they live in the filter's overlay:
//
//   - SyncAlways: the writer applies its own change (and every earlier
//     one) after its fdatasync, before it returns; lookups read the map
//     only, so they never see an unacknowledged change.
//   - SyncInterval: the writer returns once the record reached the OS; the
//     change is applied after the next background fdatasync; lookups
//     consult the overlay while it is not empty, so an acknowledged change
//     is visible at once.
//
// All overlay state is guarded by the filter's mutex (filterBase.mu).

// wkey addresses one word of one layer.
type wkey struct {
	layer int
	idx   uint64
}

// pendingOp is a logged change not yet applied to the map.
type pendingOp struct {
	lsn    uint64
	layer  int
	writes []format.WordWrite
}

// overlay holds the pending after-images of one filter.
type overlay struct {
	vals  map[wkey]pendingVal
	queue []pendingOp   // in LSN order
	size  atomic.Int64  // len(vals), read by lookups without the lock
	views []overlayView // per layer, reused by the lookups (see view)
}

type pendingVal struct {
	val uint64
	lsn uint64
}

// wordTx is the bloom.Words / cuckoo.Words a mutation runs against: loads
// see this transaction's own stores, then (in a Batch) the after-images
// the batch's earlier ops planned, then the overlay, then the map; stores
// are captured in order, never written to the map.
type wordTx struct {
	b      *filterBase
	layer  int
	words  []uint64 // the layer's mapped words
	writes []format.WordWrite
	// own indexes writes by word once there are more than smallTx of
	// them (a long cuckoo kick chain); until then Load scans writes.
	own   map[uint64]uint64
	batch map[wkey]uint64 // the batch's earlier after-images on the filter; nil outside a Batch and until an earlier op planned one
	buf   [smallTx]format.WordWrite
}

// smallTx is how many stores a wordTx keeps without an index: a cuckoo add
// or delete stores one to a few words, a counting one at most the 8 words
// of its block, which a scan finds faster than a map would, and without
// allocating one.
const smallTx = bloom.BlockWords

func (t *wordTx) Load(i uint64) uint64 {
	if t.own != nil {
		if v, ok := t.own[i]; ok {
			return v
		}
	} else {
		for j := len(t.writes) - 1; j >= 0; j-- { // the last store wins
			if t.writes[j].Index == i {
				return t.writes[j].Value
			}
		}
	}
	if v, ok := t.batch[wkey{t.layer, i}]; ok {
		return v
	}
	if v, ok := t.b.ov.vals[wkey{t.layer, i}]; ok {
		return v.val
	}
	return atomic.LoadUint64(&t.words[i])
}

func (t *wordTx) Store(i, v uint64) {
	t.writes = append(t.writes, format.WordWrite{Index: i, Value: v})
	switch {
	case t.own != nil:
		t.own[i] = v
	case len(t.writes) > smallTx:
		t.own = make(map[uint64]uint64, 2*len(t.writes))
		for _, w := range t.writes { // in order: the last store wins
			t.own[w.Index] = w.Value
		}
	}
}

// overlayView is a read-only Words over overlay and map, for lookups that
// must see acknowledged but unapplied changes (SyncInterval). Callers hold
// the filter's mutex. Lookups pass a *overlayView from filterBase.view: a
// pointer converts to an interface without allocating, a three-field
// struct does not.
type overlayView struct {
	b     *filterBase
	layer int
	words []uint64
}

func (v overlayView) Load(i uint64) uint64 {
	if p, ok := v.b.ov.vals[wkey{v.layer, i}]; ok {
		return p.val
	}
	return atomic.LoadUint64(&v.words[i])
}

func (v overlayView) Store(uint64, uint64) { panic("store: overlayView is read-only") }

// view returns the overlayView of layer, kept in the overlay so that a
// lookup allocates nothing. Called with b.mu held; the pointer is valid
// until the lock is released.
func (b *filterBase) view(layer int) *overlayView {
	for len(b.ov.views) <= layer {
		b.ov.views = append(b.ov.views, overlayView{b: b, layer: len(b.ov.views)})
	}
	v := &b.ov.views[layer]
	v.words = b.regions[layer].Words() // recovery may have replaced the regions
	return v
}

// stage records a logged transaction as pending. Called with b.mu held,
// right after the record was appended as lsn.
func (b *filterBase) stage(lsn uint64, t *wordTx) {
	if b.ov.vals == nil {
		b.ov.vals = make(map[wkey]pendingVal)
	}
	for _, w := range t.writes {
		b.ov.vals[wkey{t.layer, w.Index}] = pendingVal{w.Value, lsn}
	}
	b.ov.queue = append(b.ov.queue, pendingOp{lsn: lsn, layer: t.layer, writes: t.writes})
	b.ov.size.Store(int64(len(b.ov.vals)))
}

// applyThrough stores every pending change with LSN <= lsn in the map, in
// LSN order, each op's writes in the order they were planned (for cuckoo,
// the end of the kick path first). Called with b.mu held. An error means
// a bug (the writes were planned against the filter's own geometry), or
// a fault writing the mapping, which fails the store (guardChange).
func (b *filterBase) applyThrough(lsn uint64) error {
	return b.guardChange(func() error { return b.applyThroughUnguarded(lsn) })
}

// applyThroughUnguarded is applyThrough without its fault guard.
func (b *filterBase) applyThroughUnguarded(lsn uint64) error {
	n := 0
	var err error
	for _, op := range b.ov.queue {
		if op.lsn > lsn {
			break
		}
		if aerr := b.writeWords(op.layer, op.writes); aerr != nil && err == nil {
			err = fmt.Errorf("store: filter %q: apply LSN %d: %w", b.name(), op.lsn, aerr)
		}
		if op.layer < len(b.regions) {
			// The file now holds the change of a durable record: its
			// stamp says so (see breakNewerThanWAL), in the header page
			// the kernel writes back with the data.
			if r := b.regions[op.layer]; op.lsn > r.Stamp() {
				r.SetStamp(op.lsn)
			}
		}
		for _, w := range op.writes {
			k := wkey{op.layer, w.Index}
			if p, ok := b.ov.vals[k]; ok && p.lsn == op.lsn {
				delete(b.ov.vals, k)
			}
		}
		n++
	}
	if n > 0 {
		b.ov.queue = append(b.ov.queue[:0], b.ov.queue[n:]...)
		b.ov.size.Store(int64(len(b.ov.vals)))
		b.dirty.Store(true)
	}
	return err
}
