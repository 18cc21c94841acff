package wal

import (
	"errors"

	"github.com/filterstore/filterstore/internal/fserr"
)

var (
	// ErrCorrupt reports log data that fails a check anywhere but at the torn
	// tail of the last segment: a bad segment header, an invalid record
	// followed by valid ones, an invalid record in a segment that is not the
	// last, a record with the wrong LSN, or an LSN gap between segments. The
	// wrapping message names the segment file and byte offset.
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
