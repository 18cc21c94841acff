package mmapbits

// Writebacker is implemented by regions that can start writing changed
// data pages back to their file without waiting, so that the next Sync
// finds fewer pages left to write: a bulk writer calls StartWriteback on
// each range it has finished, and the disk writes it while the writer
// fills the next. File regions implement it (Linux: sync_file_range
// with SYNC_FILE_RANGE_WRITE; elsewhere it does nothing).
//
// It is advice. It makes nothing durable and reports nothing: the
// outcome of the writes it starts is reported by the next Sync, as if
// Sync had started them (on Linux, a failed write back is recorded
// against the file, and the msync of Sync returns it). A closed or
// read-only region ignores it, as it does a range past its words.
type Writebacker interface {
	// StartWriteback starts writing back the pages of data words
	// [from, to).
	StartWriteback(from, to uint64)
}

// StartWriteback implements Writebacker.
func (r *fileRegion) StartWriteback(from, to uint64) {
	_ = r.startWriteback(from, to)
}

// startWriteback is StartWriteback, returning the error of the request
// itself (for tests): never that of a write it starts.
func (r *fileRegion) startWriteback(from, to uint64) error {
	to = min(to, uint64(len(r.words)))
	if r.readOnly || r.closed.Load() || from >= to {
		return nil
	}
	first := HeaderSize + from*8&^(PageSize-1)
	end := HeaderSize + (to*8+PageSize-1)&^(PageSize-1)
	return writeback(r.path, int64(first), int64(end-first))
}
