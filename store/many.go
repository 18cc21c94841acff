package store

import (
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/wal"
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
	f := &batchFilter{h: h, b: b}
	plans := make([]batchPlan, 0, len(args))
	var opErr error
	for _, a := range args {
		// An op that fails changes nothing (no count, no word, no
		// layer it would not keep): the plans before it stand.
		p, err := f.plan(batchOp{kind: kind, h: h, arg: a})
		if err != nil {
			opErr = err
			break
		}
		p.f = f
		plans = append(plans, p)
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

// planRecords encodes the parts of plans as WAL payloads (see
// partRecords). recOf[i] is the index of the payload holding plan i's
// part, -1 for a plan that logs nothing.
func planRecords(plans []batchPlan) (payloads [][]byte, recOf []int) {
	var parts []format.WALRecord
	for _, p := range plans {
		if p.part != nil {
			parts = append(parts, *p.part)
		}
	}
	payloads, partRec := partRecords(parts)
	recOf = make([]int, len(plans))
	j := 0
	for i, p := range plans {
		recOf[i] = -1
		if p.part != nil {
			recOf[i] = partRec[j]
			j++
		}
	}
	return payloads, recOf
}

// partRecords encodes parts, hash or words records, as WAL payloads of at
// most wal.MaxRecordSize bytes: a batch record of as many parts as fit,
// or the part's own record where a payload holds one part only (as the
// single call logs it). recOf[i] is the index of the payload holding
// parts[i].
func partRecords(parts []format.WALRecord) (payloads [][]byte, recOf []int) {
	recOf = make([]int, len(parts))
	header := len(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpBatch}))
	var buf []byte
	first, size := 0, header
	flush := func(end int) {
		switch end - first {
		case 0:
			return
		case 1:
			payloads = append(payloads, format.AppendWALRecord(nil, parts[first]))
		default:
			payloads = append(payloads, format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpBatch, Parts: parts[first:end]}))
		}
		first, size = end, header
	}
	for i, p := range parts {
		buf = format.AppendWALRecord(buf[:0], p)
		if size+len(buf) > wal.MaxRecordSize {
			flush(i)
		}
		size += len(buf)
		recOf[i] = len(payloads)
	}
	flush(len(parts))
	return payloads, recOf
}
