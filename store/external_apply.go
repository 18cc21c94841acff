package store

import (
	"errors"
	"fmt"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/wal"
)

// Combined applies of external records.
//
// Records apply one at a time, in seq order, and an engine makes a whole
// group of them durable at once (one fsync of its log): their
// ApplyExternal calls arrive together, and each waits for the ones below
// it. Rather than hand the turn from call to call, the call whose turn it
// is (the combiner) applies, with its own record, every record that waits
// right behind it, in seq order: one run. A run is planned as one Batch
// (the gate taken once, each filter locked once) and logged with one
// Append of one WAL record per seq, exactly the records the calls would
// have logged one by one; each waiting call is woken once, with its
// results. Planning each record after the ones before it in the same
// batch is what applying them one after another does.
//
//	seq:      5        6        7        8
//	call:  combiner  queued   queued   (not arrived)
//	          |------ run 5..7 ------|
//	          one gate, one lock per filter, Append(rec5, rec6, rec7)
//	          then 8, if it queued meanwhile (at most maxExtRuns runs)
//
// The combiner releases e.mu while it applies, so that the calls arriving
// meanwhile can queue; e.applying keeps any other call from applying
// until the run is done.

// maxExtRuns bounds how many runs one combiner applies before it leaves
// the next to the call whose record comes next, so that its own caller's
// latency stays bounded.
const maxExtRuns = 4

// extApply is one ApplyExternal call: its record's seq and ops (with their
// filters' handles), and, once applied, its results (or the error) and its
// WAL LSN.
type extApply struct {
	seq uint64
	sum uint32 // the record's checksum
	ops []extOp

	res   []bool
	err   error
	lsn   uint64
	taken bool // in the run a combiner applies: it finishes the call
	done  bool
}

// applyExternal waits for a's turn and applies a, or lets a combiner
// apply it; it returns a's results.
func (s *Store) applyExternal(a *extApply) ([]bool, error) {
	e := &s.ext
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.foreign(a.seq, a.sum); err != nil {
		return nil, err
	}
	if e.first == 0 {
		e.admitted = max(e.admitted, a.seq)
	}
	for !a.done {
		if !a.taken {
			if err := s.extUsable(); err != nil {
				e.unqueue(a)
				return nil, err
			}
			if e.wasAborted(a.seq, a.sum) {
				// Aborted before this call, or while it waited
				// (AbortExternal finishes the call that holds the
				// record's place in the queue; this checks any
				// other call of it, before it queues again).
				e.unqueue(a)
				return nil, abortedError(a.seq)
			}
			if e.low >= a.seq && !e.applying {
				e.unqueue(a)
				if a.seq <= e.applied {
					e.release(a.seq)
					if e.wasSkipped(a.seq) {
						return nil, fmt.Errorf("store: apply external seq %d: %w: seq %d was applied before it, and records apply in seq order (after a restart too: replay them one after another): its ops were not applied",
							a.seq, ErrInvalid, e.applied)
					}
					return nil, nil
				}
				s.combine(a)
				break
			}
			e.queued[a.seq] = a
		}
		s.sleep(a)
	}
	return a.res, a.err
}

// unqueue takes a out of the queue, if it is there. Called with e.mu held.
func (e *extState) unqueue(a *extApply) {
	if e.queued[a.seq] == a {
		delete(e.queued, a.seq)
	}
}

// sleep waits, with e.mu released, until a release, a combiner or Close
// wakes a's seq, or the store fails. A taken call waits for its combiner
// alone, which always finishes it (with the failure, if there is one).
// Called with e.mu held; it returns with e.mu held.
func (s *Store) sleep(a *extApply) {
	e := &s.ext
	ch, ok := e.waiters[a.seq]
	if !ok {
		ch = make(chan struct{})
		e.waiters[a.seq] = ch
	}
	failCh := s.failCh
	if a.taken {
		failCh = nil
	}
	e.mu.Unlock()
	select {
	case <-ch:
	case <-failCh: // the apply it waits for may never come
	}
	e.mu.Lock()
}

// combine applies a, whose turn it is (every lower seq encoded here is
// applied or aborted, and no run is being applied), together with the
// queued records that follow it in seq order, then, up to maxExtRuns
// times, the run that starts at the next pending seq if its call is
// queued. Called with e.mu held; it releases it while a run applies.
func (s *Store) combine(a *extApply) {
	e := &s.ext
	e.applying = true
	run := []*extApply{a}
	for runs := 1; ; runs++ {
		for q := run[len(run)-1].seq + 1; ; q++ {
			b, ok := e.queued[q]
			if !ok {
				break
			}
			delete(e.queued, q)
			b.taken = true
			run = append(run, b)
		}
		e.runs++
		before := e.beforeRun
		e.run = run
		e.mu.Unlock()
		if before != nil {
			before()
		}
		err := s.applyRun(run)
		e.mu.Lock()
		e.run = nil
		if err != nil {
			// The engine holds these records, and the records behind
			// them must not apply past them (ExternalDurable would
			// then tell the engine to drop them): fail the store, if
			// this did not, so that every later apply returns an
			// error and the records are replayed after the next Open.
			if uerr := s.extUsable(); uerr != nil {
				err = uerr
			} else {
				err = s.fail(fmt.Errorf("store: apply external seq %d: %w", run[0].seq, err))
			}
			for _, r := range run {
				r.err, r.done = err, true
			}
			e.applying = false
			e.wakeAll()
			return
		}
		e.marksMu.Lock()
		for _, r := range run {
			r.done = true
			e.release(r.seq)
			if r.seq > e.applied+1 {
				e.skip(e.applied+1, r.seq-1)
			}
			e.applied = r.seq
			if e.next <= r.seq {
				e.next = r.seq + 1 // a replayed record of an earlier process
			}
			e.marks = append(e.marks, extMark{lsn: r.lsn, seq: r.seq})
			if ch, ok := e.waiters[r.seq]; ok {
				close(ch)
				delete(e.waiters, r.seq)
			}
		}
		e.marksMu.Unlock()
		next, ok := e.queued[e.low]
		if !ok || runs == maxExtRuns {
			break
		}
		delete(e.queued, e.low)
		next.taken = true
		run = append(run[:0], next)
	}
	e.applying = false
	// Calls that woke while the run applied went back to sleep: wake
	// those whose turn it may be now (the next seq's, and replays).
	for q, ch := range e.waiters {
		if q <= e.low {
			close(ch)
			delete(e.waiters, q)
		}
	}
}

// opAt names op i of the record of run[r].
type opAt struct{ r, i int }

// applyRun plans and logs the records of run, in seq order, and sets each
// one's results and LSN. Ops that cannot apply are dropped and the rest
// planned again (see ApplyExternal):
//
//   - a cuckoo delete refused as ambiguous: that op alone, while it is
//     planned (it deletes nothing and reports false, a false positive at
//     worst; see Batch.external);
//   - ops on a filter that is dropped or incomplete (it is gone, or
//     answers "maybe"): every op of the run on it, at once;
//   - an op refused for good (ErrFull, ErrInvalid: it would be refused
//     again when the engine replays it) or any op on a broken filter: the
//     filter is marked incomplete first, then as above;
//   - a record whose WAL record would exceed the WAL's limit, which
//     Encode's bound lets through only for cuckoo displacements: the
//     cuckoo filters it adds to are marked incomplete, then as above.
//
// Any other error (an I/O error creating a new layer, say) is returned,
// and fails the store: the filter stays whole, and the engine replays
// the record after the next Open.
func (s *Store) applyRun(run []*extApply) error {
	skip := make(map[*filterBase]bool) // filters whose ops are dropped
	n := 0
	for _, r := range run {
		n += len(r.ops)
	}
	for {
		bt := &Batch{s: s, ops: make([]batchOp, 0, n), external: true}
		at := make([]opAt, 0, n) // batch op -> record op
		for ri, r := range run {
			for i, op := range r.ops {
				if op.h == nil || skip[op.h.base()] || !kindFits(op.kind, op.h) {
					continue
				}
				bt.add(op.kind, op.h, op.arg)
				at = append(at, opAt{ri, i})
			}
		}
		err := bt.commitRun(run, at)
		if err == nil {
			return nil
		}
		s.ext.replans.Add(1)
		if uerr := s.extUsable(); uerr != nil {
			return uerr
		}
		var oe *batchOpError
		var big *extTooBig
		switch {
		case errors.As(err, &big):
			marked := 0
			for _, op := range run[big.r].ops {
				// Only adds displace; a delete logs one word.
				if c, ok := op.h.(*Cuckoo); ok && op.kind == batchCuckooAdd && !skip[c.b] {
					if err := s.extIncomplete(c.b, run[big.r].seq, err); err != nil {
						return err
					}
					skip[c.b] = true
					marked++
				}
			}
			if marked == 0 {
				return err
			}
		case errors.As(err, &oe):
			b := bt.ops[oe.i].h.base()
			switch {
			case b.dropped.Load() || b.incomplete.Load():
			case errors.Is(err, ErrFull) || errors.Is(err, ErrInvalid) || b.broken != nil:
				if err := s.extIncomplete(b, run[at[oe.i].r].seq, err); err != nil {
					return err
				}
			default:
				return err
			}
			skip[b] = true
		default:
			return err
		}
	}
}

// extIncomplete marks b incomplete for an external op of seq that could
// not apply (see applyRun), and logs why: b's lookups answer "maybe"
// until it is rebuilt. The mark reaches the catalog before the record
// that skipped the op is logged: see markIncomplete.
func (s *Store) extIncomplete(b *filterBase, seq uint64, cause error) error {
	s.opts.Logger.Error("an external op could not apply: the filter answers \"maybe\" until rebuilt",
		"filter", b.name(), "seq", seq, "err", cause)
	return b.markIncomplete()
}

// extRecordLimit is the largest WAL payload an external record may
// take: the WAL's limit (tests lower it).
var extRecordLimit = wal.MaxRecordSize

// extTooBig is commitRun's error for the record of run[r], whose WAL
// record would exceed the WAL's limit.
type extTooBig struct {
	r   int
	err error
}

func (e *extTooBig) Error() string { return e.err.Error() }
func (e *extTooBig) Unwrap() error { return e.err }

// commitRun is Commit for a run of external records: bt holds their ops,
// at says which record each comes from. It logs one external record per
// seq (one with no parts too: it carries the seq) in one Append and does
// not wait for them.
func (bt *Batch) commitRun(run []*extApply, at []opAt) error {
	s := bt.s
	recs := make([]format.WALRecord, len(run))
	for r, a := range run {
		recs[r] = format.WALRecord{Op: format.WALOpExternal, Seq: a.seq}
	}
	last := run[len(run)-1].seq
	if len(bt.ops) == 0 {
		s.gate.RLock()
		defer s.gate.RUnlock()
		if err := s.extUsable(); err != nil {
			return err
		}
		lsn, err := s.log.Append(encodeRecords(recs)...)
		if err != nil {
			return s.fail(err)
		}
		setRunLSNs(run, lsn)
		for _, a := range run {
			a.res = make([]bool, len(a.ops))
		}
		s.ext.logged.Store(last)
		return nil
	}
	fs, err := bt.filters()
	if err != nil {
		return err
	}
	if err := bt.lock(fs); err != nil {
		return err
	}
	defer s.gate.RUnlock()
	plans, err := bt.plan(fs)
	if err != nil {
		bt.undo(fs)
		unlockAll(fs)
		return err
	}
	recOf := make([]int, len(plans))
	for j, p := range plans {
		recOf[j] = -1
		if p.part != nil {
			r := at[j].r
			recs[r].Parts = append(recs[r].Parts, *p.part)
			recOf[j] = r
		}
	}
	payloads := encodeRecords(recs)
	for r, p := range payloads {
		if len(p) > extRecordLimit {
			bt.undo(fs)
			unlockAll(fs)
			return &extTooBig{r: r, err: fmt.Errorf("store: external record of seq %d: %w: its WAL record would be %d bytes, above the WAL's limit of %d",
				run[r].seq, ErrInvalid, len(p), extRecordLimit)}
		}
	}
	lsn, err := s.logPlanned(fs, plans, payloads, recOf, false)
	if err != nil {
		return err
	}
	setRunLSNs(run, lsn)
	for _, a := range run {
		a.res = make([]bool, len(a.ops))
	}
	for j, p := range plans {
		run[at[j].r].res[at[j].i] = p.ok
	}
	s.ext.logged.Store(last) // before the gate goes: see extState.logged
	return nil
}

// encodeRecords encodes each of recs as a WAL payload.
func encodeRecords(recs []format.WALRecord) [][]byte {
	payloads := make([][]byte, len(recs))
	for i, r := range recs {
		payloads[i] = format.AppendWALRecord(make([]byte, 0, r.EncodedLen()), r)
	}
	return payloads
}

// setRunLSNs gives the records of run the consecutive LSNs an Append of
// their payloads returned the last of.
func setRunLSNs(run []*extApply, last uint64) {
	first := last + 1 - uint64(len(run))
	for r, a := range run {
		a.lsn = first + uint64(r)
	}
}
