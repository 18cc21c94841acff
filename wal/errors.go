package wal

import (
	"errors"
	"fmt"

	"github.com/filterstore/filterstore/internal/fserr"
)

var (
	// ErrCorrupt reports log data that fails a check anywhere but at the torn
	// tail of the last segment: a bad segment header, a segment of another
	// store, an invalid record followed by valid ones, an invalid record in
	// a segment that is not the last, a record with the wrong LSN, or an LSN
	// gap between segments. Every such error is a *CorruptError, which names
	// the segment file and byte offset.
	ErrCorrupt = fserr.ErrCorrupt
	// ErrClosed reports use of a closed Log.
	ErrClosed = fserr.ErrClosed
	// ErrInvalid reports a bad argument or option; the wrapping message names
	// it and the accepted range.
	ErrInvalid = fserr.ErrInvalid
	// ErrTorn is what a Reader returns, wrapped, for a record it cannot
	// accept: one cut short by the end of the input, one whose length exceeds
	// MaxRecordSize, one whose LSN is 0 or one failing its CRC. Recovery
	// treats a torn record at the tail of the last segment as the end of the
	// log; anywhere else Open reports ErrCorrupt instead.
	ErrTorn = errors.New("wal: torn record")
)

// CorruptError describes log data that fails a check; it matches ErrCorrupt
// with errors.Is. Open, Replay and Scan report every corruption as a
// *CorruptError, possibly wrapped with %w; ParseSegmentHeader returns one
// with Segment "" for the caller to fill in.
type CorruptError struct {
	Segment string // base name of the segment file, e.g. 00000000000000000001.log
	Offset  int64  // byte offset in the segment of the header or record at fault
	LSN     uint64 // LSN of the record involved, 0 if none
	Reason  string // what is wrong, e.g. "CRC mismatch: stored 0x.., computed 0x.."
}

// Error returns "wal: segment <Segment> offset <Offset>: <Reason>", or
// "wal: offset <Offset>: <Reason>" while Segment is "".
func (e *CorruptError) Error() string {
	if e.Segment == "" {
		return fmt.Sprintf("wal: offset %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("wal: segment %s offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
