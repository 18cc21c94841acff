package mmapbits

import (
	"errors"
	"fmt"
	"syscall"
)

// Writebacker is implemented by regions that can start writing changed
// data pages back to their file without waiting for the writes, so that
// the next Sync finds fewer pages left to write: a bulk writer calls
// StartWriteback on each range it has finished, and the disk writes it
// while the writer fills the next. File regions implement it (Linux:
// sync_file_range with SYNC_FILE_RANGE_WRITE; elsewhere it does
// nothing). The request itself may block while the device's queue is
// full.
//
// It is advice. It makes nothing durable, and the range is written back
// in whole 2 MiB parts of the file (a huge page): the part that holds
// the end of the range, unless that is the end of the data, is left to
// a later request or to Sync, so that a part the writer has not finished
// is not written twice. A write the disk fails is reported by the next
// Sync, as if Sync had started it: the kernel records it against the
// file, and the msync of Sync returns it; an I/O error the request
// itself returns (EIO, ENOSPC, EDQUOT) is kept and returned by the next
// Sync too. Other failures of the request (the file cannot be opened, a
// file system without the call) only lose the head start. A closed or
// read-only region ignores it, as it does a range past its words.
type Writebacker interface {
	// StartWriteback starts writing back the pages of data words
	// [from, to).
	StartWriteback(from, to uint64)
}

// StartWriteback implements Writebacker.
func (r *fileRegion) StartWriteback(from, to uint64) {
	if err := r.startWriteback(from, to); err != nil && isIOError(err) {
		r.wbErr.CompareAndSwap(nil, &err)
	}
}

// startWriteback is StartWriteback, returning the error of the request
// itself: never that of a write it starts.
func (r *fileRegion) startWriteback(from, to uint64) error {
	to = min(to, uint64(len(r.words)))
	if r.readOnly || r.closed.Load() || from >= to {
		return nil
	}
	first := (HeaderSize + from*8) &^ (hugePage - 1)
	end := HeaderSize + to*8
	if to < uint64(len(r.words)) {
		end &^= hugePage - 1
	} else {
		end = (end + PageSize - 1) &^ (PageSize - 1)
	}
	if end <= first {
		return nil
	}
	return writeback(r.path, int64(first), int64(end-first))
}

// writebackErr returns and clears the I/O error a write-back request
// returned since the last call, wrapped, or nil.
func (r *fileRegion) writebackErr() error {
	if p := r.wbErr.Swap(nil); p != nil {
		return fmt.Errorf("mmapbits: earlier write back of %s: %w", r.path, *p)
	}
	return nil
}

// isIOError reports whether err says that data may not have reached the
// disk, rather than that the request could not be made.
func isIOError(err error) bool {
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
