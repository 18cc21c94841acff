package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/wal"
)

// The protocol of external-log mode, the reasons it loses nothing and
// applies nothing twice, and the record's format are in the package
// documentation (doc.go, "External-log mode"). The record's constants:
const (
	extMagic     = "FSXB"
	extVersion   = 1
	extHeaderLen = 4 + 1 + 8 + 8 + 4
	extOpLen     = 1 + 8 + 8
	maxBatchKind = batchBitmapClear
	extMaxOps    = 1 << 20
	extMinRecLen = extHeaderLen + 4
	// maxExtSeq is the last seq a record may carry: the seq after it
	// must still fit (the bookkeeping holds applied+1 and uses
	// math.MaxUint64 for "none pending"). A decoder refuses a record
	// beyond it as damaged, Encode fails with ErrFull past it, and Open
	// refuses a catalog that records one.
	maxExtSeq = math.MaxUint64 - 1
)

// extWALBound returns the most bytes the WAL record of an external
// record of ops can take, but for cuckoo displacements: a Bloom add logs
// a hash part; a counting op the words of one block it changes; a bitmap
// op one word; a cuckoo op one word and, if it displaces fingerprints,
// one more per move, which no bound short of MaxIterations moves per op
// can foresee (see applyRun for a record that exceeds the limit then).
// A record over the bound could never be logged, and the engine would
// hold it, durably, forever: Encode refuses it.
func extWALBound(ops []batchOp) int {
	n := format.WALRecord{Op: format.WALOpExternal}.EncodedLen()
	hash := format.WALRecord{Op: format.WALOpHash}.EncodedLen()
	word := format.WordsRecordLen(1)
	block := format.WordsRecordLen(bloom.BlockWords)
	for _, op := range ops {
		switch op.h.(type) {
		case *Bloom:
			n += hash
		case *Counting:
			n += block
		default:
			n += word
		}
	}
	return n
}

// extState is the store's external-log bookkeeping.
type extState struct {
	mu    sync.Mutex
	next  uint64 // the seq Encode hands out next (the first Encode raises it above applied and admitted)
	first uint64 // the first seq Encode handed out here; 0: none yet
	// admitted is the highest seq of a record ApplyExternal took before
	// the first Encode (a replay, maybe still being applied): the first
	// Encode hands out seqs above it.
	admitted uint64
	applied  uint64            // the highest seq applied (recovered, or since)
	pending  map[uint64]uint32 // encoded here, not yet applied or aborted: the record's checksum
	// released holds the checksums of the last seqs encoded here that
	// were applied or aborted, at seq % len: with pending, it tells a
	// record this process encoded from another one given the same seq.
	released [extReleased]extSum
	// low is the lowest pending seq, math.MaxUint64 with none: a record
	// of seq N waits while low < N.
	low uint64
	// waiters holds a channel per seq whose ApplyExternal waits, closed
	// when low passes below it no more (or at Close, or a failure):
	// each release wakes only the calls it unblocks, not every waiter
	// (with a group of records made durable at once, waking all of them
	// per apply cost more than the applies).
	waiters map[uint64]chan struct{}
	// queued holds the ApplyExternal calls that wait for their turn, by
	// seq; applying is set while a combiner applies a run of them with
	// e.mu released (see combine).
	queued   map[uint64]*extApply
	applying bool
	run      []*extApply   // the records the combiner applies now, with e.mu released
	runs     uint64        // runs applied, for tests
	replans  atomic.Uint64 // runs planned again after a skip, for tests
	// beforeRun, if set (tests), runs before each run applies, with
	// e.mu released.
	beforeRun func()
	// logged is the highest seq whose record is in the WAL, set with the
	// commit gate held shared: a checkpoint (gate exclusive) reads it
	// without e.mu.
	logged atomic.Uint64

	// skipped holds the seqs below applied that no record applied (an
	// aborted seq, or a record a later one was applied before), as
	// ranges, oldest first, at most maxExtSkipped of them: such a record
	// arriving now is out of order, an error, where a seq below applied
	// that did apply is a replay and changes nothing.
	skipped []seqRange

	marksMu sync.Mutex
	marks   []extMark // applied seqs whose records may not be synced yet
	durable uint64    // the highest seq known synced or checkpointed
}

// extSum is an external record's seq and checksum, and whether
// AbortExternal released it.
type extSum struct {
	seq     uint64
	sum     uint32
	aborted bool
}

// extReleased is how many released seqs extState.released remembers; a
// record of an older seq encoded here arriving again is taken for a
// replay without comparing its checksum.
const extReleased = 4096

// recordSum is the checksum an external record ends with (decodeExternal
// checked it).
func recordSum(rec []byte) uint32 { return binary.LittleEndian.Uint32(rec[len(rec)-4:]) }

// foreign returns an error if the record of seq with checksum sum is not
// one that this process's Encode made, while seq is one that Encode
// handed out here or a later one: a record of an earlier process (its
// seqs are handed out again once the catalog's checkpoint is below them)
// arriving after this process began to encode. The engine must replay
// its log before it encodes: applied now, the record would take the seq
// of a record encoded here, whose ops would then be taken for a replay
// and dropped (or it would drop the older record's). Called with e.mu
// held.
func (e *extState) foreign(seq uint64, sum uint32) error {
	if e.first == 0 || seq < e.first {
		return nil
	}
	mine := false
	if want, ok := e.pending[seq]; ok {
		mine = want == sum
	} else if seq < e.next {
		r := e.released[seq%extReleased]
		mine = r.seq != seq || r.sum == sum
	}
	if mine {
		return nil
	}
	return fmt.Errorf("store: external record seq %d: %w: this process's Encode handed seq %d to another record (seqs from %d on): replay the engine's log, from ExternalDurable on, before encoding new batches; nothing of it was applied",
		seq, ErrInvalid, seq, e.first)
}

// seqRange is the seqs lo..hi.
type seqRange struct{ lo, hi uint64 }

// maxExtSkipped bounds extState.skipped; the oldest ranges go first (a
// record of one of their seqs arriving then is taken for a replay).
const maxExtSkipped = 1024

// skip records that the seqs lo..hi were passed over. Called with e.mu
// held.
func (e *extState) skip(lo, hi uint64) {
	if len(e.skipped) == maxExtSkipped {
		e.skipped = append(e.skipped[:0], e.skipped[1:]...)
	}
	e.skipped = append(e.skipped, seqRange{lo, hi})
}

// wasSkipped reports whether seq, below applied, was passed over. Called
// with e.mu held.
func (e *extState) wasSkipped(seq uint64) bool {
	for i := len(e.skipped) - 1; i >= 0; i-- {
		if r := e.skipped[i]; seq >= r.lo && seq <= r.hi {
			return true
		}
	}
	return false
}

// extMark is the WAL LSN of an applied external record.
type extMark struct{ lsn, seq uint64 }

// init sets up e at Open with the seq the catalog's checkpoint covers.
func (e *extState) init(checkpointed uint64) {
	e.pending = make(map[uint64]uint32)
	e.waiters = make(map[uint64]chan struct{})
	e.queued = make(map[uint64]*extApply)
	e.low = math.MaxUint64
	e.recovered(checkpointed)
}

// hold records seq, of the record with checksum sum, as pending. Called
// with e.mu held; seq is above every pending seq.
func (e *extState) hold(seq uint64, sum uint32) {
	if len(e.pending) == 0 {
		e.low = seq
	}
	e.pending[seq] = sum
}

// release takes seq out of the pending set (applied or aborted) and wakes
// the ApplyExternal calls that no longer wait behind a pending seq. Called
// with e.mu held.
func (e *extState) release(seq uint64) {
	sum, ok := e.pending[seq]
	if !ok {
		return
	}
	delete(e.pending, seq)
	e.released[seq%extReleased] = extSum{seq: seq, sum: sum}
	if seq != e.low {
		return
	}
	old := e.low
	if len(e.pending) == 0 {
		e.low = math.MaxUint64
		e.wakeAll()
		return
	}
	// Every pending seq lies in (old, e.next), so the walk ends there;
	// low only rises, so each seq is walked over once.
	for e.low++; ; e.low++ {
		if _, ok := e.pending[e.low]; ok {
			break
		}
	}
	for q := old + 1; q <= e.low; q++ {
		if ch, ok := e.waiters[q]; ok {
			close(ch)
			delete(e.waiters, q)
		}
	}
}

// wakeAll wakes every waiting ApplyExternal call, to look again (the
// store closed or failed, or nothing is pending). Called with e.mu held.
func (e *extState) wakeAll() {
	for q, ch := range e.waiters {
		close(ch)
		delete(e.waiters, q)
	}
}

// resolve sets the handle of each op's filter (nil for ids the store does
// not have): a lookup per op in s.byID, so an apply costs nothing per
// filter of the store.
func (s *Store) resolve(ops []extOp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ops {
		ops[i].h = s.byID[ops[i].filterID]
	}
}

// recovered raises the applied seq to one that recovery found in the
// catalog or the WAL (all of it on disk, so durable too).
func (e *extState) recovered(seq uint64) {
	if seq > e.applied {
		e.applied, e.durable = seq, seq
		e.logged.Store(seq)
	}
}

// Encode turns the batch into an external record for the engine to store
// in its own log, and hands it the next sequence number of this store's
// external log. It changes nothing: the ops are applied by ApplyExternal
// once the engine's record is durable, or released by AbortExternal. It
// checks what can be checked now (nil handles, handles of another store,
// dropped or closed filters, which fail with ErrClosed, bitmap offsets, a
// WAL record that could exceed the WAL's limit: see the package
// documentation, "External-log mode") and fails with ErrInvalid unless
// the store was opened with
// SyncInterval, or if the batch is nil or zero (see Commit); with ErrFull
// once every seq up to 2^64-2 is taken. A batch is
// encoded, or committed, once. A batch that deletes from a cuckoo or
// counting filter that ordinary calls (Add, Delete, Commit) changed since
// the store's WAL was last synced costs one fdatasync here, which makes
// those changes durable first (see the package documentation,
// "External-log mode"); otherwise Encode does no I/O.
func (bt *Batch) Encode() ([]byte, error) {
	if err := bt.nilErr(); err != nil {
		return nil, err
	}
	if bt.done {
		return nil, fmt.Errorf("store: batch: %w: already committed or encoded", ErrInvalid)
	}
	s := bt.s
	if s.opts.Sync != SyncInterval {
		return nil, fmt.Errorf("store: batch encode: %w: external-log mode needs a store opened with SyncInterval", ErrInvalid)
	}
	if len(bt.ops) > extMaxOps {
		return nil, fmt.Errorf("store: batch encode: %w: %d ops, the limit is %d", ErrInvalid, len(bt.ops), extMaxOps)
	}
	if _, err := bt.filters(); err != nil {
		return nil, err
	}
	for i, op := range bt.ops {
		if err := op.h.base().check(); err != nil {
			return nil, bt.opErr(i, err)
		}
		if m, ok := op.h.(*Bitmap); ok && op.arg >= m.bm.Bits() {
			return nil, bt.opErr(i, fmt.Errorf("%w: offset %d out of range 0..%d", ErrInvalid, op.arg, m.bm.Bits()-1))
		}
	}
	if n := extWALBound(bt.ops); n > extRecordLimit {
		return nil, fmt.Errorf("store: batch encode: %w: %d ops, whose WAL record could take %d bytes, above the WAL's limit of %d",
			ErrInvalid, len(bt.ops), n, extRecordLimit)
	}
	if err := bt.syncDeletedFrom(); err != nil {
		return nil, err
	}
	// The record but its seq and checksum, which are made under e.mu.
	le := binary.LittleEndian
	b := make([]byte, 0, extHeaderLen+extOpLen*len(bt.ops)+4)
	b = append(b, extMagic...)
	b = append(b, extVersion)
	b = le.AppendUint64(b, s.id)
	b = le.AppendUint64(b, 0) // seq
	b = le.AppendUint32(b, uint32(len(bt.ops)))
	for _, op := range bt.ops {
		b = append(b, byte(op.kind))
		b = le.AppendUint64(b, op.h.base().id)
		b = le.AppendUint64(b, op.arg)
	}

	e := &s.ext
	e.mu.Lock()
	if e.first == 0 {
		// Above every seq applied, or taken to be applied: a replayed
		// record still being applied has not raised applied yet.
		e.next = max(e.next, e.applied+1, e.admitted+1)
		e.first = e.next
	}
	if e.next > maxExtSeq || e.next == 0 {
		e.mu.Unlock()
		return nil, fmt.Errorf("store: batch encode: %w: every external seq up to %d is taken", ErrFull, uint64(maxExtSeq))
	}
	bt.done = true
	seq := e.next
	e.next++
	// Pending with no checksum until it is known: no record encoded here
	// can arrive before Encode returns, and any other with this seq is
	// refused either way.
	e.hold(seq, 0)
	e.mu.Unlock()
	le.PutUint64(b[13:], seq)
	sum := crc.Checksum(b)
	e.mu.Lock()
	if _, ok := e.pending[seq]; ok {
		e.pending[seq] = sum
	}
	e.mu.Unlock()
	return le.AppendUint32(b, sum), nil
}

// syncDeletedFrom makes durable, with one fdatasync of the store's WAL,
// the changes that ordinary calls (not ApplyExternal) logged to the
// cuckoo and counting filters the batch deletes from, unless they are
// durable already. A power loss could otherwise take an ordinary add of
// the key a delete removes while the engine's log keeps the delete:
// replayed onto the filter without the add, the delete would remove the
// fingerprint or counters of another key that collides with it, one
// synced long before perhaps, which would then read absent. A filter
// that only external records change costs nothing here, nor does one
// whose ordinary changes the background sync has made durable.
func (bt *Batch) syncDeletedFrom() error {
	var need uint64
	for _, op := range bt.ops {
		if op.kind == batchCuckooDelete || op.kind == batchCountingDelete {
			need = max(need, op.h.base().ordLSN.Load())
		}
	}
	s := bt.s
	if need == 0 || s.log.DurableLSN() >= need {
		return nil
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed.Load() {
		return fmt.Errorf("store: batch encode: %w", ErrClosed)
	}
	if err := s.failed(); err != nil {
		return err
	}
	if err := s.log.Sync(); err != nil {
		return s.fail(err)
	}
	return nil
}

// extOp is one decoded op of an external record.
type extOp struct {
	kind     batchKind
	filterID uint64
	arg      uint64
	h        handle // filterID's open handle, nil if none (resolve sets it)
}

// decodeExternal checks an external record of this store and returns its
// seq and ops. Damaged bytes are ErrCorrupt, another store's record
// ErrInvalid.
func (s *Store) decodeExternal(rec []byte) (uint64, []extOp, error) {
	le := binary.LittleEndian
	if len(rec) < extMinRecLen || string(rec[:4]) != extMagic {
		return 0, nil, fmt.Errorf("store: external record: %w: not an external record (%d bytes)", ErrCorrupt, len(rec))
	}
	body := rec[:len(rec)-4]
	if got, want := le.Uint32(rec[len(rec)-4:]), crc.Checksum(body); got != want {
		return 0, nil, fmt.Errorf("store: external record: %w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if rec[4] != extVersion {
		return 0, nil, fmt.Errorf("store: external record: %w: version %d, this build reads %d", ErrCorrupt, rec[4], extVersion)
	}
	if id := le.Uint64(rec[5:]); id != s.id {
		return 0, nil, fmt.Errorf("store: external record: %w: it is of store %016x, this is %016x", ErrInvalid, id, s.id)
	}
	seq, n := le.Uint64(rec[13:]), le.Uint32(rec[21:])
	if seq == 0 || seq > maxExtSeq || uint64(len(body)-extHeaderLen) != uint64(n)*extOpLen {
		return 0, nil, fmt.Errorf("store: external record: %w: seq %d, %d ops in %d bytes", ErrCorrupt, seq, n, len(rec))
	}
	ops := make([]extOp, n)
	for i := range ops {
		p := body[extHeaderLen+extOpLen*i:]
		if batchKind(p[0]) > maxBatchKind {
			return 0, nil, fmt.Errorf("store: external record: %w: op %d has kind %d", ErrCorrupt, i, p[0])
		}
		ops[i] = extOp{kind: batchKind(p[0]), filterID: le.Uint64(p[1:]), arg: le.Uint64(p[9:])}
	}
	return seq, ops, nil
}

// ExternalSeq returns the sequence number of an external record, for an
// engine that keys its log by it (a torn or foreign record is an error
// wrapping ErrCorrupt).
func ExternalSeq(rec []byte) (uint64, error) {
	if len(rec) < extMinRecLen || string(rec[:4]) != extMagic ||
		binary.LittleEndian.Uint32(rec[len(rec)-4:]) != crc.Checksum(rec[:len(rec)-4]) {
		return 0, fmt.Errorf("store: external record: %w: not a whole external record", ErrCorrupt)
	}
	seq := binary.LittleEndian.Uint64(rec[13:])
	if seq == 0 || seq > maxExtSeq {
		return 0, fmt.Errorf("store: external record: %w: seq %d", ErrCorrupt, seq)
	}
	return seq, nil
}

// ApplyExternal applies an external record (Batch.Encode) once the
// engine's log holds it durably, and returns each op's result as Commit
// would. It first waits until every record encoded before it by this
// store has been applied or aborted, so records apply in seq order. A
// record at or below the highest seq already applied (a replay from
// earlier than ExternalDurable) changes nothing and returns nil results,
// unless its seq was passed over: aborted, or not yet applied when a
// later record was (records of an earlier process, which nothing here
// orders, replayed on several goroutines): then nothing of it applies
// and ApplyExternal fails with ErrInvalid, since planning it after the
// later records is not what applying it in order does. (The store
// remembers the last 1024 such gaps of the process.)
//
// An op on a filter whose Load runs waits for the Load to end, as Add
// does (see Load), and every record encoded after it waits behind it: an
// engine's writes stall for the rest of the Load if it applies records
// that change a filter while loading it, and a Load whose key source
// waits on such an ApplyExternal never ends. To rebuild a filter that
// records keep changing, Load a new filter from a snapshot of the data
// while records change only the old one; once the Load returned, let
// records change both, bring the new one up to date with the changes
// since the snapshot (ordinary changes: Batch, Add), then Rename it over
// the old one.
//
// It never asks for a sync of the store's own WAL: the engine's log is
// the durability. It logs one external record, returns once the record
// has reached the operating system (a write, as a SyncInterval add's
// record has when the add returns, so that a read-only open made
// afterwards, in this process or another, finds it), and stages the
// after-images of non-monotonic changes, which reach the filter files
// after the background WAL sync; lookups see every change at once. The
// WAL writes and syncs from one goroutine at a time, so a record that
// arrives while the background sync runs waits for that sync to end
// before it is written (as a SyncInterval add does): on a slow disk, up
// to one fdatasync. A record the sync round took itself is released once
// written, before the fdatasync.
//
// A store opened with SyncAlways refuses it with ErrInvalid, as Encode
// does: external-log mode needs SyncInterval. So is a record AbortExternal
// gave up (see AbortExternal). So is a record of an
// earlier process that arrives once Encode here handed out its seq or
// an earlier one (see the package comment of external-log mode): the
// engine replays its log before it encodes. A record whose checksum
// holds over ops that do not fit the store's filters (an op of another
// kind than its filter's, a bitmap offset beyond the bitmap: made by
// hand, or replayed into a store restored from a backup older than the
// record) is refused with ErrCorrupt before anything applies. It can
// never apply: the engine gives it up with AbortExternal, or, in the
// process that encoded it, later records wait for it.
//
// Ops that cannot apply are skipped, as the package documentation says
// ("External-log mode"), and report false; an ErrFull or
// ErrInvalid, or an op on a broken filter, marks the filter incomplete
// (in the catalog, at once), as does a record whose cuckoo displacements
// take its WAL record past the WAL's limit (for the cuckoo filters it
// adds to), and every op of the record on a filter that is incomplete,
// broken or dropped is skipped. A failed or closed store
// returns its error (an op that failed for a reason that may pass, such
// as an I/O error creating a new layer, fails the store): nothing was
// applied, and the engine replays the record after the next Open.
func (s *Store) ApplyExternal(rec []byte) ([]bool, error) {
	if err := s.nilErr(); err != nil {
		return nil, err
	}
	// What the store is comes first: a read-only or SyncAlways store
	// refuses any record, whole or not, with the same error.
	if s.opts.ReadOnly {
		return nil, fmt.Errorf("store: apply external: %w", ErrReadOnly)
	}
	if s.opts.Sync != SyncInterval {
		// Under SyncAlways lookups read no overlay, where the staged
		// after-images of cuckoo, counting and bitmap changes wait.
		return nil, fmt.Errorf("store: apply external: %w: external-log mode needs a store opened with SyncInterval (an engine replaying its records must open the store as it did when it encoded them)", ErrInvalid)
	}
	seq, ops, err := s.decodeExternal(rec)
	if err != nil {
		return nil, err
	}
	// Handles by id, taken before the wait: a filter dropped meanwhile
	// fails its ops' planning, which skips them as if it were missing
	// here (ids are never reused).
	s.resolve(ops)
	if err := checkExternalOps(ops); err != nil {
		return nil, err
	}
	a := &extApply{seq: seq, sum: recordSum(rec), ops: ops}
	res, err := s.applyExternal(a)
	if err != nil || a.lsn == 0 {
		return res, err // failed, or applied before: nothing logged now
	}
	// A read-only open reads the changes of cuckoo, counting and bitmap
	// filters from the WAL's segment files until the sync brings them to
	// the filter files: the record must be there before the caller is
	// told the ops applied.
	if err := s.log.WaitWritten(a.lsn); err != nil {
		if errors.Is(err, wal.ErrClosed) {
			// Close closed the log before writing the record: its own
			// failure, if any, fails the store. The engine replays the
			// record after the next Open.
			return nil, fmt.Errorf("store: apply external: %w", ErrClosed)
		}
		return nil, s.fail(err)
	}
	return res, nil
}

// extUsable is the error an external apply gets from the store as a
// whole: closed or failed.
func (s *Store) extUsable() error {
	if s.closed.Load() {
		return fmt.Errorf("store: apply external: %w", ErrClosed)
	}
	return s.failed()
}

// AbortExternal tells the store that the engine will never hold the
// external record: its commit failed. Records encoded after it stop
// waiting for it. Call it only when the engine's record is certainly not
// durable, or is one ApplyExternal refused as ErrCorrupt (it can never
// apply); a record that might be durable is applied, or replayed after a
// restart, instead. A record of an earlier process whose seq this
// process's Encode handed out again is refused with ErrInvalid, as
// ApplyExternal refuses it, and releases nothing.
//
// A record this process encoded is applied or aborted, never both: an
// ApplyExternal of an aborted record, later or waiting for its turn
// meanwhile, returns ErrInvalid and applies nothing (a delete applied
// after all would drop a key the engine still holds), and an abort of a
// record whose ApplyExternal is applying it already returns ErrInvalid.
// An abort of a record applied already, aborted already, or encoded by
// an earlier process changes nothing.
func (s *Store) AbortExternal(rec []byte) error {
	if err := s.nilErr(); err != nil {
		return err
	}
	seq, _, err := s.decodeExternal(rec)
	if err != nil {
		return err
	}
	e := &s.ext
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.foreign(seq, recordSum(rec)); err != nil {
		return err
	}
	if slices.ContainsFunc(e.run, func(r *extApply) bool { return r.seq == seq }) {
		return fmt.Errorf("store: abort external seq %d: %w: its ApplyExternal is applying it", seq, ErrInvalid)
	}
	if _, ok := e.pending[seq]; !ok {
		return nil // applied, aborted, or not encoded here: nothing to release
	}
	if q, ok := e.queued[seq]; ok {
		// Its ApplyExternal waits for its turn: it applies nothing.
		delete(e.queued, seq)
		q.err, q.done = abortedError(seq), true
		if ch, ok := e.waiters[seq]; ok {
			close(ch)
			delete(e.waiters, seq)
		}
	}
	e.release(seq)
	e.released[seq%extReleased].aborted = true
	return nil
}

// abortedError is ApplyExternal's error for a record of seq that
// AbortExternal gave up.
func abortedError(seq uint64) error {
	return fmt.Errorf("store: apply external seq %d: %w: AbortExternal gave the record up; a record is applied or aborted, not both: nothing of it was applied", seq, ErrInvalid)
}

// wasAborted reports whether seq, of the record with checksum sum, was
// encoded here and given up by AbortExternal (among the last extReleased
// seqs released). Called with e.mu held.
func (e *extState) wasAborted(seq uint64, sum uint32) bool {
	r := e.released[seq%extReleased]
	return r.aborted && r.seq == seq && r.sum == sum
}

// ExternalDurable returns the highest external seq through which every
// applied external record is durable in the store (its filter files or
// its synced WAL): the engine may delete its records at or below it, and
// after a restart must replay, with ApplyExternal and in seq order, every
// record above it. 0 means none yet, as for a nil or zero Store. A
// read-only store reports what its catalog recorded when it opened, the
// seq its writer's last checkpoint had covered then.
func (s *Store) ExternalDurable() uint64 {
	if s.nilErr() != nil {
		return 0
	}
	var synced uint64
	if s.log != nil {
		synced = s.log.DurableLSN()
	}
	return s.ext.synced(synced)
}

// synced records that the WAL is durable through LSN synced: the marks of
// the records it holds are dropped, their seqs durable. It returns the
// highest durable seq. ExternalDurable calls it, and so does every
// background sync (applySynced), so that the marks of an engine that
// reads ExternalDurable only at restart do not pile up, one per applied
// record, for the store's whole life.
func (e *extState) synced(synced uint64) uint64 {
	e.marksMu.Lock()
	defer e.marksMu.Unlock()
	i := 0
	for ; i < len(e.marks) && e.marks[i].lsn <= synced; i++ {
		e.durable = max(e.durable, e.marks[i].seq)
	}
	e.marks = e.marks[i:]
	return e.durable
}

// checkpointedExternal records that a checkpoint covered every external
// record through seq: their marks are dropped.
func (s *Store) checkpointedExternal(seq uint64) {
	e := &s.ext
	e.marksMu.Lock()
	e.durable = max(e.durable, seq)
	i := 0
	for i < len(e.marks) && e.marks[i].seq <= seq {
		i++
	}
	e.marks = e.marks[i:]
	e.marksMu.Unlock()
}

// checkExternalOps refuses, with ErrCorrupt and before anything
// applies, a record whose ops do not fit the store's filters: an op whose
// kind is not its filter's, or a bitmap offset beyond its bitmap. Within
// one store's history ids are never reused and bitmaps never change size,
// so no drop, rename or reopen between Encode and the apply makes one;
// such a record was made by hand, or replays a history the store does not
// share (records encoded after the backup it was restored from, whose
// filter ids the restored store gave to other filters). Applied, its
// other ops took effect and the misfit marked its filter incomplete for
// good.
func checkExternalOps(ops []extOp) error {
	for i, op := range ops {
		if op.h == nil {
			continue // a filter dropped (or never here): skipped at apply
		}
		what, _ := op.kind.describe()
		if !kindFits(op.kind, op.h) {
			return fmt.Errorf("store: external record: %w: op %d is a %s, but filter id %d (%q) is of another kind: a record made by hand, or encoded by a history this store does not share (after the backup it was restored from)", ErrCorrupt, i, what, op.filterID, op.h.base().name())
		}
		if m, ok := op.h.(*Bitmap); ok && m.bm != nil && op.arg >= m.bm.Bits() {
			return fmt.Errorf("store: external record: %w: op %d is a %s at offset %d, beyond bitmap %q's %d bits: a record made by hand, or encoded by a history this store does not share (after the backup it was restored from)", ErrCorrupt, i, what, op.arg, op.h.base().name(), m.bm.Bits())
		}
	}
	return nil
}

// kindFits reports whether op kind applies to the filter h.
func kindFits(k batchKind, h handle) bool {
	switch h.(type) {
	case *Bloom:
		return k == batchBloomAdd
	case *Cuckoo:
		return k == batchCuckooAdd || k == batchCuckooDelete
	case *Counting:
		return k == batchCountingAdd || k == batchCountingDelete
	case *Bitmap:
		return k == batchBitmapSet || k == batchBitmapClear
	}
	return false
}
