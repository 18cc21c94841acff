package store

import "github.com/filterstore/filterstore/internal/fserr"

// Sentinel errors; test with errors.Is. They are the same values the bloom,
// cuckoo, bitmap, mmapbits and wal packages return, so an error from any
// layer matches.
var (
	// ErrNotFound: no filter has that name.
	ErrNotFound = fserr.ErrNotFound
	// ErrExists: a filter with that name exists already.
	ErrExists = fserr.ErrExists
	// ErrWrongKind: the filter exists but is of another kind.
	ErrWrongKind = fserr.ErrWrongKind
	// ErrFull: a non-scaling filter at capacity, or a cuckoo filter
	// without expansion that found no free slot.
	ErrFull = fserr.ErrFull
	// ErrClosed: the store was closed, or the filter was dropped.
	ErrClosed = fserr.ErrClosed
	// ErrReadOnly: a mutation through a store opened with ReadOnly.
	ErrReadOnly = fserr.ErrReadOnly
	// ErrCorrupt: the catalog, a filter file or the WAL failed a check.
	// The message names the file and, where it applies, the offset.
	ErrCorrupt = fserr.ErrCorrupt
	// ErrInvalid: a bad name, configuration or argument; the message
	// names the field.
	ErrInvalid = fserr.ErrInvalid
	// ErrLocked: another process holds the directory for writing.
	ErrLocked = fserr.ErrLocked
	// ErrIncomplete: the filter's bulk Load was interrupted by a crash;
	// only Drop and Info work on it.
	ErrIncomplete = fserr.ErrIncomplete
)
