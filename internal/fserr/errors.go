// Package fserr holds the sentinel errors shared by every filterstore
// package, so that errors.Is(err, store.ErrFull) holds whether the error came
// from bloom, cuckoo, bitmap, mmapbits, wal or store. Each public package
// re-exports the sentinels it can return as its own variables with the same
// values.
package fserr

import "errors"

var (
	// ErrInvalid reports a bad argument or configuration; the wrapping
	// message names the field and the accepted range.
	ErrInvalid = errors.New("filterstore: invalid argument")
	// ErrFull reports that a filter cannot take another item: a non-scaling
	// Bloom filter at capacity, or a cuckoo filter without expansion whose
	// insert found no free slot within MaxIterations.
	ErrFull = errors.New("filterstore: filter is full")
	// ErrCorrupt reports data on disk that fails a check: bad magic,
	// version, CRC, size, or a catalog/file mismatch. The wrapping message
	// names the file and offset.
	ErrCorrupt = errors.New("filterstore: corrupt data")
	// ErrClosed reports use of a closed store, filter, region or log.
	ErrClosed = errors.New("filterstore: closed")
	// ErrReadOnly reports a mutation attempted through a read-only store or
	// mapping.
	ErrReadOnly = errors.New("filterstore: read-only")
	// ErrNotFound reports a filter name that is not in the catalog.
	ErrNotFound = errors.New("filterstore: not found")
	// ErrExists reports a create with a name already in the catalog.
	ErrExists = errors.New("filterstore: already exists")
	// ErrWrongKind reports a filter opened as a kind it is not.
	ErrWrongKind = errors.New("filterstore: wrong filter kind")
	// ErrLocked reports a directory already held by another writer.
	ErrLocked = errors.New("filterstore: directory locked by another writer")
	// ErrBusy reports files another process maps while the caller must
	// drop them from memory (a store rebuilding its filter files after a
	// failed msync).
	ErrBusy = errors.New("filterstore: files mapped by another process")
	// ErrIncomplete reports a filter that may lack keys it was given: its
	// unlogged bulk load did not finish, or an add applied from an
	// engine's log did not fit. Its contents are not trustworthy.
	ErrIncomplete = errors.New("filterstore: filter incomplete (a bulk load did not finish, or an external add did not fit)")
	// ErrFailed reports a store that saw a write or sync of its log, a
	// filter file or its catalog fail: it refuses every change from then on,
	// since what reached the disk is unknown; reopening recovers from the
	// log.
	ErrFailed = errors.New("filterstore: store failed")
	// ErrAmbiguous reports a cuckoo delete refused because the key's
	// fingerprint matches in two or more layers of an expanded filter: the
	// match in the wrong layer may be another key's only copy, so deleting
	// either could make that key a false negative. Nothing was deleted.
	ErrAmbiguous = errors.New("filterstore: ambiguous delete (fingerprint in several layers)")
	// ErrTooManyMappings reports a filter file left unmapped because the
	// process's memory mappings are close to the kernel's limit
	// (vm.max_map_count on Linux), past which the next mapping the Go
	// runtime needs would kill the process.
	ErrTooManyMappings = errors.New("filterstore: too many memory mappings")
)
