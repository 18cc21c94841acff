package store

import (
	"github.com/filterstore/filterstore/internal/format"
)

// manyChunk is how many keys the batch lookups hash at a time, on the
// stack: enough to keep several cache misses in flight.
const manyChunk = 256

// fitBools returns dst[:n], allocating only if dst has less capacity.
func fitBools(dst []bool, n int) []bool {
	if cap(dst) < n {
		return make([]bool, n)
	}
	return dst[:n]
}

// hashAll returns the hashes of keys.
func hashAll(keys [][]byte) []uint64 {
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = Hash(k)
	}
	return hs
}

// applyMany runs one op of kind on h's filter per arg, in order, as the
// single calls would one after another, and commits them as a Batch of
// them would: one WAL record (more only where one would pass
// wal.MaxRecordSize) and one durability wait. Unlike a Batch it is not
// all or nothing: it stops at the first op that cannot apply (ErrFull,
// ErrAmbiguous, ErrInvalid), commits the ops before it and returns their
// results, results[i] the answer of op i, with that op's error. A nil or
// shorter result thus says exactly which ops are durable. If the filter
// cannot be changed at all (closed, dropped, broken, incomplete, a failed
// store) or the commit fails (the store fails: ErrFailed), it returns
// nil results: nothing is acknowledged.
func applyMany(h handle, kind batchKind, args []uint64) ([]bool, error) {
	b := h.base()
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.end()
	f := &batchFilter{h: h, b: b, counts: b.items()}
	plans := make([]batchPlan, 0, len(args))
	var opErr error
	if err := b.guardChange(func() error {
		for i, a := range args {
			// An op that fails changes nothing (no count, no word, no
			// layer it would not keep): the plans before it stand.
			p, err := f.plan(batchOp{kind: kind, h: h, arg: a}, i == len(args)-1)
			if err != nil {
				opErr = err
				break
			}
			p.f = f
			plans = append(plans, p)
		}
		return nil
	}); err != nil {
		// The store failed: nothing is logged or acknowledged, and the
		// item counts the plans moved go back.
		undoCounts([]*batchFilter{f})
		b.mu.Unlock()
		return nil, err
	}
	payloads, recOf := planRecords(plans)
	if err := b.s.commitPlanned([]*batchFilter{f}, plans, payloads, recOf); err != nil {
		return nil, err
	}
	res := make([]bool, len(plans))
	for i, p := range plans {
		res[i] = p.ok
	}
	return res, opErr
}

// planRecords encodes the parts of plans as WAL payloads (see records).
// recOf[i] is the index of the payload holding plan i's part, -1 for a
// plan that logs nothing.
func planRecords(plans []batchPlan) (payloads [][]byte, recOf []int) {
	var r records
	recOf = make([]int, len(plans))
	for i, p := range plans {
		recOf[i] = -1
		if p.part != nil {
			recOf[i] = r.add(*p.part)
		}
	}
	return r.done(), recOf
}

// partRecords encodes parts as WAL payloads (see records). recOf[i] is
// the index of the payload holding parts[i].
func partRecords(parts []format.WALRecord) (payloads [][]byte, recOf []int) {
	var r records
	recOf = make([]int, len(parts))
	for i, p := range parts {
		recOf[i] = r.add(p)
	}
	return r.done(), recOf
}
