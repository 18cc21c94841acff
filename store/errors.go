package store

import (
	"fmt"

	"github.com/filterstore/filterstore/internal/fserr"
)

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
	// ErrFull: a non-scaling filter at capacity, a NonScaling cuckoo
	// filter that found no free slot, a cuckoo key whose two buckets
	// are full of its own copies, or a scalable filter (Bloom or
	// expanding cuckoo) that would need a layer past its last (64
	// layers, or a next layer that cannot be planned).
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
	// ErrBusy: the writer's Open must rebuild the filter files from the
	// disk and the WAL (an earlier msync failed: DIR/RESYNC), and another
	// process maps them (a read-only store, an inspect command), so their
	// pages cannot be dropped from memory. Close those and open again;
	// RESYNC stays until an Open succeeds.
	ErrBusy = fserr.ErrBusy
	// ErrIncomplete: the filter's bulk Load did not finish (a crash, a
	// failing key source, a full filter), or an add ApplyExternal applied
	// did not fit (ErrFull); its lookups answer "maybe", it refuses every
	// change (a Rename over another filter too) but Drop and a Rename to a
	// free name, and Info, Fill and CheckFilter report on it.
	ErrIncomplete = fserr.ErrIncomplete
	// ErrFailed: a write or sync of the WAL, of a filter file or of the
	// catalog failed, so what reached the disk is unknown. The store
	// refuses every change from then on (the error also wraps the original
	// one); lookups keep answering, Close returns the error, and the next
	// Open recovers from the WAL.
	ErrFailed = fserr.ErrFailed
	// ErrAmbiguous: a cuckoo Delete refused because the key's fingerprint
	// matches in two or more layers of an expanded filter. Deleting one
	// of the matches could remove another key's only copy (a false
	// negative for that key), so nothing is deleted and the key stays
	// "maybe present". RedisBloom's CF.DEL deletes the first match it
	// finds instead; a persistent store keeps the stronger guarantee.
	ErrAmbiguous = fserr.ErrAmbiguous
	// ErrTooManyMappings: a filter's file was not mapped because the
	// process's memory mappings (each layer file is one) are within a
	// sixteenth of the kernel's limit, vm.max_map_count on Linux (65,530 by
	// default): past it the Go runtime's next mapping would end the
	// process. Only the call fails: a create, a Load or an add that needed
	// a new layer, an Import, or an Open (which maps every filter). Raise
	// the limit (sysctl vm.max_map_count) or keep fewer filters or layers
	// open in the process. The error wraps syscall.ENOMEM too: like any
	// want of memory, it is no fault of a file, and an Open it fails
	// succeeds once it passes.
	ErrTooManyMappings = fserr.ErrTooManyMappings
)

// nilHandleError is the error of a call on a nil or zero handle of type
// typ (one that from, the calls that make them, did not return): it wraps
// ErrInvalid and names the handle, as a nil *os.File's methods return
// os.ErrInvalid.
func nilHandleError(typ, from string) error {
	return fmt.Errorf("store: nil or zero %s handle: obtain one from %s: %w", typ, from, ErrInvalid)
}

// failedError is the error of a failed store: it matches ErrFailed and the
// error that failed it.
type failedError struct{ cause error }

func (e *failedError) Error() string {
	return "store: failed (changes are refused; reopen to recover from the WAL): " + e.cause.Error()
}

func (e *failedError) Unwrap() []error { return []error{ErrFailed, e.cause} }
