package store

import (
	"errors"
	"fmt"
	"slices"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/wal"
)

// Batch collects changes to any filters of one store, of any kinds, and
// commits them as one: Commit logs them in one WAL record (a batch record,
// drawn in internal/format) and waits once for it to be durable, so after
// any crash either every change of an acknowledged batch is there, or, for
// a batch whose Commit did not return nil, possibly none of them. Build one
// with Store.NewBatch.
//
// A Batch is not safe for concurrent use: one goroutine adds its ops and
// commits it. Different batches, and single calls, commit concurrently;
// their records share the WAL's group commit.
//
// A batch is atomic against crashes, not isolated from lookups: a
// concurrent lookup may see some of its changes before others (Bloom bits
// are set before the record is written, as a single Add sets them; the
// other kinds' changes reach each filter when the record is durable, one
// filter after another).
//
// A nil Batch takes no ops, and the Commit and Encode of a nil or zero
// one (or of a nil or zero Store's) return an error wrapping ErrInvalid
// that names it.
type Batch struct {
	s    *Store
	ops  []batchOp
	done bool
	// failed: the Commit that set done returned an error (for the error
	// of a second Commit).
	failed bool
	// external: the batch applies external records (applyRun), whose
	// ambiguous cuckoo deletes delete nothing and report false rather
	// than fail the batch.
	external bool
}

// batchKind is what a batch op does.
type batchKind uint8

const (
	batchBloomAdd batchKind = iota
	batchCuckooAdd
	batchCuckooDelete
	batchCountingAdd
	batchCountingDelete
	batchBitmapSet
	batchBitmapClear
)

// batchOp is one op of a Batch.
type batchOp struct {
	kind batchKind
	h    handle // nil for a nil handle
	arg  uint64 // the key's hash; a bitmap's offset
}

// NewBatch returns an empty batch of changes to this store's filters. A
// nil or zero Store's batch fails its Commit and Encode with ErrInvalid.
func (s *Store) NewBatch() *Batch { return &Batch{s: s} }

// Len returns the number of ops added to the batch; 0 for a nil batch.
func (bt *Batch) Len() int {
	if bt == nil {
		return 0
	}
	return len(bt.ops)
}

// add adds an op; a nil batch, whose Commit fails, takes none.
func (bt *Batch) add(kind batchKind, h handle, arg uint64) {
	if bt == nil {
		return
	}
	bt.ops = append(bt.ops, batchOp{kind: kind, h: h, arg: arg})
}

// nilErr returns the error of a nil or zero Batch, or of one that a nil or
// zero Store made; nil for a Store's.
func (bt *Batch) nilErr() error {
	if bt == nil || bt.s == nil {
		return nilHandleError("Batch", "Store.NewBatch")
	}
	return bt.s.nilErr()
}

// BloomAdd adds key to f; its result is (*Bloom).Add's: whether key was
// new.
func (bt *Batch) BloomAdd(f *Bloom, key []byte) { bt.BloomAddHash(f, Hash(key)) }

// BloomAddHash is BloomAdd for a hashed key.
func (bt *Batch) BloomAddHash(f *Bloom, h uint64) { bt.add(batchBloomAdd, handleOf(f), h) }

// CuckooAdd inserts key into c, as (*Cuckoo).Add; its result is true.
func (bt *Batch) CuckooAdd(c *Cuckoo, key []byte) { bt.CuckooAddHash(c, Hash(key)) }

// CuckooAddHash is CuckooAdd for a hashed key.
func (bt *Batch) CuckooAddHash(c *Cuckoo, h uint64) { bt.add(batchCuckooAdd, handleOf(c), h) }

// CuckooDelete removes one copy of key from c; its result is
// (*Cuckoo).Delete's: whether it did. A key whose fingerprint matches in
// several layers fails the whole batch with an error wrapping
// ErrAmbiguous, as Delete refuses it.
func (bt *Batch) CuckooDelete(c *Cuckoo, key []byte) { bt.CuckooDeleteHash(c, Hash(key)) }

// CuckooDeleteHash is CuckooDelete for a hashed key.
func (bt *Batch) CuckooDeleteHash(c *Cuckoo, h uint64) { bt.add(batchCuckooDelete, handleOf(c), h) }

// CountingAdd increments key's counters in n, as (*Counting).Add; its
// result is true.
func (bt *Batch) CountingAdd(n *Counting, key []byte) { bt.CountingAddHash(n, Hash(key)) }

// CountingAddHash is CountingAdd for a hashed key.
func (bt *Batch) CountingAddHash(n *Counting, h uint64) { bt.add(batchCountingAdd, handleOf(n), h) }

// CountingDelete decrements key's counters in n; its result is
// (*Counting).Delete's: whether it did.
func (bt *Batch) CountingDelete(n *Counting, key []byte) { bt.CountingDeleteHash(n, Hash(key)) }

// CountingDeleteHash is CountingDelete for a hashed key.
func (bt *Batch) CountingDeleteHash(n *Counting, h uint64) {
	bt.add(batchCountingDelete, handleOf(n), h)
}

// BitmapSet sets the bit at off in m; its result is (*Bitmap).Set's:
// whether the bit was clear.
func (bt *Batch) BitmapSet(m *Bitmap, off uint64) { bt.add(batchBitmapSet, handleOf(m), off) }

// BitmapClear clears the bit at off in m; its result is
// (*Bitmap).Clear's: whether the bit was set.
func (bt *Batch) BitmapClear(m *Bitmap, off uint64) { bt.add(batchBitmapClear, handleOf(m), off) }

// handleOf returns f as a handle, nil for a nil pointer or a zero handle
// (no filter behind it: its base is a stand-in).
func handleOf[F interface {
	*Bloom | *Cuckoo | *Counting | *Bitmap
	handle
}](f F) handle {
	if f.base().isStandIn() {
		return nil
	}
	return f
}

// Commit applies every op of the batch, in order, and returns each op's
// result: results[i] is what the single call of op i would report (new,
// deleted, changed; true for cuckoo and counting adds), as if the ops ran
// one after another with nothing in between. Several ops on one filter see
// each other: op 2 is planned against the filter as op 1 leaves it.
//
// Commit takes the commit gate shared, as a single change does, and the
// mutex of every filter involved, in the order of their ids (so batches
// over the same filters never deadlock); a filter under Load is waited
// for. It plans every op first. An op that cannot apply fails the whole
// batch before anything is logged or changed: ErrFull, ErrAmbiguous (a
// cuckoo delete; see (*Cuckoo).Delete), ErrInvalid (a nil
// handle, a handle of another store, a bitmap offset out of range, or a
// batch whose WAL record would pass the WAL's limit of 16 MiB, about
// 900,000 Bloom adds: split it), a
// dropped, closed, broken or incomplete filter, a failed or closed store.
// The error names the op ("store: batch op 3 (cuckoo add to "users"):
// ...") and wraps the cause, so errors.Is works. It then sets the Bloom
// bits (monotonic: as a single Add, before logging), appends one WAL
// record holding every op that changed something, stages the other
// kinds' after-images, and releases the filters; it waits once for the
// record to be durable (Options.Sync) and, under SyncAlways, stores the
// after-images in the files. A batch that changes nothing still waits
// until the changes its answers rest on are durable, as a single call
// does.
//
// The one exception to "nothing changes when an op fails": a scalable
// Bloom or an expanding cuckoo filter that needs a new layer for an op
// gets it while the batch is planned, as the single call does: the layer
// file and its catalog entry are made durable at once, before the record.
// If the batch then fails, the new layer stays, empty; lookups are
// unaffected (an empty layer holds no bits or fingerprints) and later adds
// fill it. Undoing it would need a catalog write of its own, which could
// fail too, for no gain.
//
// An empty batch commits to (nil, nil). A batch commits once: a second
// Commit returns an error wrapping ErrInvalid, as does the Commit of a nil
// or zero Batch.
func (bt *Batch) Commit() ([]bool, error) {
	if err := bt.nilErr(); err != nil {
		return nil, err
	}
	if bt.done {
		// A failed Commit is no less final: say which, rather than
		// "already committed" for a batch that never was (an
		// adversarial review).
		if bt.failed {
			return nil, fmt.Errorf("store: batch: %w: a batch commits once, and its Commit failed: build a new batch to retry", ErrInvalid)
		}
		return nil, fmt.Errorf("store: batch: %w: already committed", ErrInvalid)
	}
	bt.done = true
	res, err := bt.commit()
	bt.failed = err != nil
	return res, err
}

// commit is Commit once the batch is marked done.
func (bt *Batch) commit() ([]bool, error) {
	if len(bt.ops) == 0 {
		return nil, nil
	}
	s := bt.s
	fs, err := bt.filters()
	if err != nil {
		return nil, err
	}
	if err := bt.lock(fs); err != nil {
		return nil, err
	}
	defer s.gate.RUnlock()
	rec := format.WALRecord{Op: format.WALOpBatch}
	plans, res, recOf, payload, err := bt.planRecord(fs, &rec)
	if err != nil {
		return nil, err
	}
	var payloads [][]byte
	if payload != nil {
		payloads = [][]byte{payload}
	}
	if err := s.commitPlanned(fs, plans, payloads, recOf); err != nil {
		return nil, err
	}
	return res, nil
}

// planRecord plans the batch's ops, with the commit gate held shared and
// every filter of fs locked, and adds each op that changes something to
// rec as a part. It returns the plans, their results, recOf for
// commitPlanned (0 for a plan in rec, -1 for one that logs nothing) and
// rec encoded: nil when rec has no parts. On an error the
// filters are unlocked and nothing is changed (bar a new layer; see
// Commit).
func (bt *Batch) planRecord(fs []*batchFilter, rec *format.WALRecord) (plans []batchPlan, res []bool, recOf []int, payload []byte, err error) {
	plans, err = bt.plan(fs)
	if err != nil {
		bt.undo(fs)
		unlockAll(fs)
		return nil, nil, nil, nil, err
	}
	res, recOf = make([]bool, len(plans)), make([]int, len(plans))
	for i, p := range plans {
		res[i] = p.ok
		if p.part != nil {
			rec.Parts = append(rec.Parts, *p.part)
		} else {
			recOf[i] = -1
		}
	}
	if len(rec.Parts) == 0 {
		return plans, res, recOf, nil, nil
	}
	payload = format.AppendWALRecord(nil, *rec)
	if len(payload) > wal.MaxRecordSize {
		bt.undo(fs)
		unlockAll(fs)
		return nil, nil, nil, nil, fmt.Errorf("store: batch of %d ops: %w: its %s record would be %d bytes, above the WAL's limit of %d",
			len(bt.ops), ErrInvalid, rec.Op, len(payload), wal.MaxRecordSize)
	}
	return plans, res, recOf, payload, nil
}

// commitPlanned logs and applies planned ops, with the commit gate held
// shared (the caller releases it) and the mutex of every filter of fs
// held (commitPlanned releases them). payloads are the WAL records that
// hold the plans' parts, recOf[i] the index in payloads of plan i's
// record (-1 for a plan that logs nothing). It sets the Bloom bits,
// appends the records in one call, stages the other after-images under
// their records' LSNs, releases the filters, waits once for the last
// record to be durable and, under SyncAlways, stores the after-images in
// the files. With no payload it waits until the filters' latest logged
// changes are durable, which the plans' answers rest on. A nil error
// acknowledges every plan.
func (s *Store) commitPlanned(fs []*batchFilter, plans []batchPlan, payloads [][]byte, recOf []int) error {
	lsn, err := s.logPlanned(fs, plans, payloads, recOf, true)
	if err != nil {
		return err
	}
	if lsn == 0 {
		return s.failedNow()
	}
	if err := fs[0].b.wait(lsn); err != nil {
		return err
	}
	if s.opts.Sync == SyncAlways {
		for _, f := range fs {
			f.b.mu.Lock()
			err := f.b.applyThrough(lsn)
			f.b.mu.Unlock()
			if err != nil {
				return s.fail(err)
			}
		}
	}
	return nil
}

// logPlanned is the first half of commitPlanned, up to the release of
// the filters: it returns the LSN to wait for (0: none). ordinary is
// false for the records of ApplyExternal.
func (s *Store) logPlanned(fs []*batchFilter, plans []batchPlan, payloads [][]byte, recOf []int, ordinary bool) (uint64, error) {
	var lsn uint64
	if len(payloads) > 0 {
		if err := guardChanges(fs, func() error {
			for _, p := range plans {
				if p.part != nil && p.part.Op == format.WALOpHash {
					p.f.b.setBloomBits(p.f.h.(*Bloom), p.part.Layer, p.part.Hash)
				}
			}
			return nil
		}); err != nil {
			unlockAll(fs)
			return 0, err
		}
		var err error
		lsn, err = s.log.Append(payloads...)
		if err != nil {
			// As in a Bloom add: bits may be set with no record to
			// follow; fail the store while the mutexes are held.
			err = s.fail(err)
			unlockAll(fs)
			return 0, err
		}
		// The payloads got consecutive LSNs, the last one lsn.
		first := lsn + 1 - uint64(len(payloads))
		for i, p := range plans {
			if p.part == nil {
				continue
			}
			plsn := first + uint64(recOf[i])
			if p.tx != nil {
				p.f.b.stage(plsn, p.tx)
			}
			p.f.b.lastLSN = plsn
			if ordinary {
				p.f.b.ordLSN.Store(plsn)
			}
			if m, ok := p.f.h.(*Bitmap); ok {
				// Counted once logged, as a single write.
				m.bm.SetCount(addDelta(m.bm.Count(), int64(p.part.Delta)))
			}
		}
	} else {
		// Nothing changed: wait for what the answers rest on.
		for _, f := range fs {
			lsn = max(lsn, f.b.lastLSN)
		}
	}
	unlockAll(fs)
	return lsn, nil
}

// bases returns the filters of fs.
func bases(fs []*batchFilter) []*filterBase {
	bs := make([]*filterBase, len(fs))
	for i, f := range fs {
		bs[i] = f.b
	}
	return bs
}

// batchFilter is one filter a batch changes, while it commits.
type batchFilter struct {
	h     handle
	b     *filterBase
	first int // the index of the batch's first op on it
	// words holds, for cuckoo, counting and bitmap filters, the
	// after-images the batch's ops planned so far: later ops read them
	// (wordTx.batch).
	words map[wkey]uint64
	// bits holds, for a Bloom filter, the bits the batch's planned adds
	// will set, and added how many items each layer gains.
	bits  bloomBits
	added map[int]uint64
	// counts are the item counts of the filter's layers before planning,
	// which planning changes (cuckoo and counting); restored if it fails.
	counts []uint64
	// last is the index of the batch's last op on the filter: what it
	// plans is read by no later op, so it is not noted in words or bits.
	last int
}

// batchPlan is one planned op.
type batchPlan struct {
	f    *batchFilter
	ok   bool              // the op's result
	part *format.WALRecord // what it logs; nil if it changes nothing
	tx   *wordTx           // the after-images it stages (not Bloom)
}

// filters checks every op's handle and returns the filters the batch
// changes, in the order of their ids.
func (bt *Batch) filters() ([]*batchFilter, error) {
	// A batch names few filters: a linear search finds them without a
	// map until there are many, and they live in chunks of an array (a
	// full chunk is left as it is, so the pointers into it stay valid),
	// so a small batch costs two allocations here, and a batch of many
	// ops on one filter no more.
	const linear = linearFilters
	var fs []*batchFilter
	var all []batchFilter
	var byBase map[*filterBase]bool // once len(fs) > linear
	for i, op := range bt.ops {
		if op.h == nil {
			return nil, bt.opErr(i, fmt.Errorf("%w: nil filter handle", ErrInvalid))
		}
		b := op.h.base()
		if b.s != bt.s {
			return nil, bt.opErr(i, fmt.Errorf("%w: the handle is of another store", ErrInvalid))
		}
		if byBase != nil && byBase[b] ||
			byBase == nil && slices.ContainsFunc(fs, func(f *batchFilter) bool { return f.b == b }) {
			continue
		}
		if len(all) == cap(all) {
			all = make([]batchFilter, 0, min(len(bt.ops)-i, 2*cap(all)+4))
		}
		if fs == nil {
			fs = make([]*batchFilter, 0, min(len(bt.ops), linear))
		}
		all = append(all, batchFilter{h: op.h, b: b, first: i})
		fs = append(fs, &all[len(all)-1])
		switch {
		case byBase != nil:
			byBase[b] = true
		case len(fs) > linear:
			byBase = make(map[*filterBase]bool, 2*len(fs))
			for _, f := range fs {
				byBase[f.b] = true
			}
		}
	}
	slices.SortFunc(fs, func(x, y *batchFilter) int {
		switch {
		case x.b.id < y.b.id:
			return -1
		case x.b.id > y.b.id:
			return 1
		}
		return 0
	})
	return fs, nil
}

// lock takes the commit gate shared and the mutex of every filter in fs,
// in order, waiting while a Load of one of them runs (as filterBase.lock
// does for one filter). On success the caller holds all of them.
func (bt *Batch) lock(fs []*batchFilter) error {
	s := bt.s
	for {
		s.gate.RLock()
		for _, f := range fs {
			if err := f.b.check(); err != nil {
				s.gate.RUnlock()
				return bt.opErr(f.first, err)
			}
		}
		var loading chan struct{}
		n := 0
		for _, f := range fs {
			f.b.mu.Lock()
			n++
			if loading = f.b.loading; loading != nil {
				break
			}
		}
		if loading == nil {
			return nil
		}
		unlockAll(fs[:n])
		s.gate.RUnlock()
		<-loading
	}
}

func unlockAll(fs []*batchFilter) {
	for _, f := range fs {
		f.b.mu.Unlock()
	}
}

// batchOpError is the error of a batch that op i failed.
type batchOpError struct {
	i   int
	msg string
	err error
}

func (e *batchOpError) Error() string { return e.msg }
func (e *batchOpError) Unwrap() error { return e.err }

// opErr names op i in err.
func (bt *Batch) opErr(i int, err error) error {
	op := bt.ops[i]
	what, prep := op.kind.describe()
	if op.h == nil {
		return &batchOpError{i, fmt.Sprintf("store: batch op %d (%s): %v", i, what, err), err}
	}
	return &batchOpError{i, fmt.Sprintf("store: batch op %d (%s %s %q): %v", i, what, prep, op.h.base().name(), err), err}
}

// describe names what an op of kind k does, and the preposition before
// its filter's name.
func (k batchKind) describe() (what, prep string) {
	switch k {
	case batchBloomAdd:
		return "bloom add", "to"
	case batchCuckooAdd:
		return "cuckoo add", "to"
	case batchCuckooDelete:
		return "cuckoo delete", "from"
	case batchCountingAdd:
		return "counting add", "to"
	case batchCountingDelete:
		return "counting delete", "from"
	case batchBitmapSet:
		return "bitmap set", "in"
	}
	return "bitmap clear", "in"
}

// plan plans every op in order, with every filter's mutex held, and
// changes nothing a crash could keep: Bloom bits are noted, not set;
// after-images are captured, not staged. (The exceptions: item counts of
// cuckoo and counting filters, which planning moves and undo restores,
// and a new layer; see Commit.)
func (bt *Batch) plan(fs []*batchFilter) (plans []batchPlan, err error) {
	// Planning reads the filters' mappings: a fault fails the store
	// (guardChanges), and the caller undoes the plans as for an op that
	// cannot apply.
	err = guardChanges(fs, func() (err error) {
		plans, err = bt.planUnguarded(fs)
		return err
	})
	return plans, err
}

// planUnguarded is plan without its fault guard.
func (bt *Batch) planUnguarded(fs []*batchFilter) ([]batchPlan, error) {
	var byBase map[*filterBase]*batchFilter // for many filters; few are searched
	if len(fs) > linearFilters {
		byBase = make(map[*filterBase]*batchFilter, len(fs))
		for _, f := range fs {
			byBase[f.b] = f
		}
	}
	for _, f := range fs {
		f.counts = f.b.items()
	}
	for i, op := range bt.ops {
		filterOf(fs, byBase, op.h.base()).last = i
	}
	plans := make([]batchPlan, len(bt.ops))
	for i, op := range bt.ops {
		f := filterOf(fs, byBase, op.h.base())
		p, err := f.plan(op, i == f.last)
		if err != nil {
			if !bt.external || op.kind != batchCuckooDelete || !errors.Is(err, ErrAmbiguous) {
				return nil, bt.opErr(i, err)
			}
			p = batchPlan{} // deleteLocked changed nothing: false
		}
		p.f = f
		plans[i] = p
	}
	return plans, nil
}

// linearFilters is how many filters a batch finds by a linear search
// before it indexes them in a map.
const linearFilters = 16

// filterOf returns the batchFilter of b: byBase's, or, if byBase is nil,
// the one in fs.
func filterOf(fs []*batchFilter, byBase map[*filterBase]*batchFilter, b *filterBase) *batchFilter {
	if byBase != nil {
		return byBase[b]
	}
	for _, f := range fs {
		if f.b == b {
			return f
		}
	}
	return nil
}

// undo restores the item counts planning changed. Called with every
// filter's mutex held, after plan.
func (bt *Batch) undo(fs []*batchFilter) { undoCounts(fs) }

// undoCounts puts back the item counts of fs's cuckoo and counting
// filters as they were before planning (batchFilter.counts), which
// planning moves.
func undoCounts(fs []*batchFilter) {
	for _, f := range fs {
		switch h := f.h.(type) {
		case *Cuckoo:
			for i, l := range *h.layers.Load() {
				var n uint64 // a layer planning added held nothing
				if i < len(f.counts) {
					n = f.counts[i]
				}
				l.SetCount(n)
			}
		case *Counting:
			if len(f.counts) == 1 {
				h.c.SetItems(f.counts[0])
			}
		}
	}
}

// tx starts a word transaction on layer that sees the batch's earlier
// after-images. Called with b.mu held.
func (f *batchFilter) tx(layer int) *wordTx {
	t := f.b.tx(layer)
	t.batch = f.words // nil until an op planned some
	return t
}

// planned records a planned transaction for the batch's later ops on f,
// if there are any (not last), and returns its plan.
func (f *batchFilter) planned(t *wordTx, delta int8, last bool) batchPlan {
	if !last {
		if f.words == nil {
			f.words = make(map[wkey]uint64)
		}
		for _, w := range t.writes {
			f.words[wkey{t.layer, w.Index}] = w.Value
		}
	}
	return batchPlan{ok: true, tx: t, part: &format.WALRecord{
		Op: format.WALOpWords, FilterID: f.b.id, Layer: t.layer, Delta: delta, Writes: t.writes}}
}

// plan plans one op on f, against f as the batch's earlier ops leave it;
// last says it is the batch's last op on f.
func (f *batchFilter) plan(op batchOp, last bool) (batchPlan, error) {
	switch h := f.h.(type) {
	case *Bloom:
		return f.planBloom(h, op.arg, last)
	case *Cuckoo:
		if op.kind == batchCuckooAdd {
			t, err := h.insertLocked(op.arg, f.tx)
			if err != nil {
				return batchPlan{}, err
			}
			return f.planned(t, 1, last), nil
		}
		t, err := h.deleteLocked(op.arg, f.tx)
		if err != nil {
			return batchPlan{}, err
		}
		if t != nil {
			return f.planned(t, -1, last), nil
		}
	case *Counting:
		t := f.tx(0)
		if op.kind == batchCountingAdd {
			if f.b.meta.NonScaling && h.c.Items() >= f.b.meta.Capacity {
				return batchPlan{}, fmt.Errorf("store: counting filter %q holds its capacity of %d: %w", f.b.name(), f.b.meta.Capacity, ErrFull)
			}
			h.c.AddTo(t, op.arg)
			return f.planned(t, 1, last), nil
		}
		if h.c.DeleteFrom(t, op.arg) {
			return f.planned(t, -1, last), nil
		}
	case *Bitmap:
		off := op.arg
		if off >= h.bm.Bits() {
			return batchPlan{}, fmt.Errorf("store: bitmap %q: %w: offset %d out of range 0..%d", f.b.name(), ErrInvalid, off, h.bm.Bits()-1)
		}
		set := op.kind == batchBitmapSet
		t := f.tx(0)
		m := uint64(1) << (off % 64)
		w := t.Load(off / 64)
		if (w&m != 0) == set {
			break
		}
		if set {
			t.Store(off/64, w|m)
			return f.planned(t, 1, last), nil
		}
		t.Store(off/64, w&^m)
		return f.planned(t, -1, last), nil
	default:
		return batchPlan{}, errors.New("store: batch: unknown filter kind")
	}
	return batchPlan{}, nil // changes nothing: false
}

// planBloom plans a Bloom add of h as addLocked does it, reading each
// layer's bits together with those the batch's earlier adds will set;
// it sets none. Unless last, it notes the bits it will set for the
// batch's later adds.
func (f *batchFilter) planBloom(bl *Bloom, h uint64, last bool) (batchPlan, error) {
	layers := *bl.layers.Load()
	for i := len(layers) - 1; i >= 0; i-- {
		if f.bits.has(layers[i], i, h) {
			return batchPlan{}, nil
		}
	}
	n := len(layers) - 1
	if layers[n].Count()+f.added[n] >= f.b.meta.Layers[n].Capacity {
		var err error
		if layers, err = bl.grow(layers); err != nil {
			return batchPlan{}, err
		}
		n++
	}
	if !last {
		if f.bits == nil {
			f.bits, f.added = make(bloomBits), make(map[int]uint64)
		}
		f.bits.add(n, layers[n].Geometry(), h)
		f.added[n]++
	}
	return batchPlan{ok: true, part: &format.WALRecord{Op: format.WALOpHash, FilterID: f.b.id, Layer: n, Hash: h}}, nil
}

// setBloomBits sets the bits of a planned add of h in layer of f and
// marks its block's page written. Called with b.mu held.
func (b *filterBase) setBloomBits(f *Bloom, layer int, h uint64) {
	_, block := (*f.layers.Load())[layer].AddHashBlock(h)
	b.regions[layer].Touch(block*bloom.BlockWords, (block+1)*bloom.BlockWords)
	b.dirty.Store(true)
}
