package store

import (
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/wal"
)

// batchHeader is the encoding of a batch record of no parts, whose part
// count records.close sets (format.SetBatchParts).
var batchHeader = format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpBatch})

// records encodes WAL record parts, hash or words records, one at a time
// into payloads of at most wal.MaxRecordSize bytes: a batch record of as
// many parts as fit, or the part's own record where a payload holds one
// part only (as the single call logs it). Each part is encoded once,
// straight into the payload's buffer; the part that does not fit moves to
// the next payload. The zero value is ready to use; done returns the
// payloads.
type records struct {
	buf      []byte   // the payloads, back to back; the open one from first
	payloads [][]byte // the closed payloads, slices of buf
	first    int      // where the open payload starts: its batch header
	n        int      // parts in the open payload
}

// recordLimit is the largest payload records makes: wal.MaxRecordSize (a
// variable for tests, which split calls into records with fewer ops).
var recordLimit = wal.MaxRecordSize

// add encodes p and returns the index of the payload that holds it.
func (r *records) add(p format.WALRecord) (payload int) {
	if r.n == 0 {
		r.first = len(r.buf)
		r.buf = append(r.buf, batchHeader...)
	}
	mark := len(r.buf)
	r.buf = format.AppendWALRecord(r.buf, p)
	if r.n > 0 && len(r.buf)-r.first > recordLimit {
		// p opens the next payload: close the open one before it, and
		// slide p's bytes up to make room for a header.
		r.close(mark)
		size := len(r.buf) - mark
		r.buf = append(r.buf, batchHeader...)
		copy(r.buf[mark+len(batchHeader):], r.buf[mark:mark+size])
		copy(r.buf[mark:], batchHeader)
		r.first = mark
	}
	r.n++
	return len(r.payloads)
}

// close ends the open payload at end (of buf).
func (r *records) close(end int) {
	switch r.n {
	case 0:
		return
	case 1:
		r.payloads = append(r.payloads, r.buf[r.first+len(batchHeader):end:end])
	default:
		format.SetBatchParts(r.buf[r.first:end], r.n)
		r.payloads = append(r.payloads, r.buf[r.first:end:end])
	}
	r.n = 0
}

// done closes the open payload and returns every payload, in order.
func (r *records) done() [][]byte {
	r.close(len(r.buf))
	return r.payloads
}
