package mmapbits

import (
	"fmt"

	"github.com/filterstore/filterstore/internal/fserr"
)

// Sentinels shared with the rest of filterstore.
var (
	// ErrCorrupt is wrapped by every header or size failure below.
	ErrCorrupt = fserr.ErrCorrupt
	// ErrInvalid reports a bad argument, such as a header with no kind.
	ErrInvalid = fserr.ErrInvalid
	// ErrClosed reports use of a closed region or view.
	ErrClosed = fserr.ErrClosed
	// ErrReadOnly reports a write attempted through a read-only view.
	ErrReadOnly = fserr.ErrReadOnly
	// ErrBusy reports a file whose pages Evict could not drop from
	// memory: another process maps it.
	ErrBusy = fserr.ErrBusy
	// ErrTooManyMappings reports a file left unmapped because the
	// process's memory mappings are close to vm.max_map_count
	// (maplimit.go); the error wraps syscall.ENOMEM too.
	ErrTooManyMappings = fserr.ErrTooManyMappings
)

// One error per kind of header failure; each wraps ErrCorrupt.
var (
	// ErrShortHeader: the file is shorter than the header page.
	ErrShortHeader = fmt.Errorf("mmapbits: short header: %w", ErrCorrupt)
	// ErrBadMagic: the first 8 bytes are not the filter-file magic.
	ErrBadMagic = fmt.Errorf("mmapbits: bad magic: %w", ErrCorrupt)
	// ErrZeroHeader, which wraps ErrBadMagic: every byte of the header
	// page is 0, as in a file whose header never reached the disk (a
	// power loss after the file was allocated, before its first page was
	// written back).
	ErrZeroHeader = fmt.Errorf("mmapbits: header page all zero: %w", ErrBadMagic)
	// ErrBadVersion: the format version is not one this code reads.
	ErrBadVersion = fmt.Errorf("mmapbits: unsupported format version: %w", ErrCorrupt)
	// ErrBadChecksum: the header CRC does not match its contents.
	ErrBadChecksum = fmt.Errorf("mmapbits: header checksum mismatch: %w", ErrCorrupt)
	// ErrBadSize: the file size disagrees with the header's page count, or
	// the header's fields are out of range.
	ErrBadSize = fmt.Errorf("mmapbits: bad size: %w", ErrCorrupt)
)
