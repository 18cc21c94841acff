package mmapbits

// View is read access to a region's header and data words. Both read-write
// regions and read-only views implement it; cmd/inspect and read-only stores
// use nothing else.
type View interface {
	// Header returns the decoded, validated header.
	Header() Header
	// NumWords returns the number of data words (DataPages*512).
	NumWords() uint64
	// Word returns data word i (0 <= i < NumWords), or 0 and false if i is
	// out of range or the view is closed.
	Word(i uint64) (uint64, bool)
	// Stamp returns the file's checkpoint stamp (byte StampOffset of the
	// header page), as a mapping of the file shows it now: 0 in a file no
	// checkpoint stamped. See Region.SetStamp.
	Stamp() uint64
	// Close releases the mapping. Further calls fail with ErrClosed or
	// report false. A view from OpenView is unmapped at once (unlike a
	// Region, whose range stays mapped, see the package doc): no Word may
	// run concurrently with its Close. cmd/inspect and the store read
	// views from one goroutine.
	Close() error
}

// Region is a region whose data words are exposed as a slice: read-write
// (Create, Open, NewMem) or read-only (OpenRead). Words stays valid until
// Close; filters read it with atomic loads and write it with atomic stores
// or ORs.
type Region interface {
	View
	// Words returns the data words. The slice aliases the mapping.
	Words() []uint64
	// Sync makes every change to Words durable (msync MS_SYNC for files).
	// After a failed Sync, the pages it failed to write may count as
	// clean (Linux): rewrite them, or Touch them, before syncing again.
	Sync() error
	// Seq returns the layer's move-sequence word (byte SeqOffset of the
	// header page), shared by every mapping of the file, in this process
	// and others. Cuckoo filters bracket entry moves with it so that
	// lookups retry instead of missing a moving fingerprint. 8-byte
	// aligned; access it only atomically.
	Seq() *uint64
	// SetStamp stores v as the file's checkpoint stamp: the store writes
	// there the WAL position of the checkpoint whose Sync follows, and
	// records it in its catalog once that Sync succeeded, so that a file
	// whose stamp is below the catalog's (an older copy of the file put
	// back, writes the disk lost) is told from the file the catalog
	// describes; between checkpoints it raises it to the LSN of each
	// durable after-image it stores (cuckoo, counting and bitmap
	// changes), so that a file newer than the WAL (a plain copy of a live
	// store) is told too. The next Sync writes it
	// with the data, and so may the kernel's write back of the header
	// page. Read-only regions ignore it.
	SetStamp(v uint64)
	// Touch declares that data words [from, to) were written through
	// Words, even if with the values they already held; writers call it
	// after every write. It marks the pages' checksums stale, for
	// UpdateSums to recompute. On a real MAP_SHARED mapping the write
	// itself dirtied the page; Sim also marks the pages dirty, so that a
	// Sync writes pages that an earlier failed Sync left clean but
	// unwritten. Read-only regions ignore it.
	Touch(from, to uint64)
	// UpdateSums recomputes the checksums of the data pages touched since
	// it last ran (stale) and, if full, of every page after
	// InvalidateSums; it returns how many it computed. The next Sync
	// makes them durable. The caller keeps writers of the data out
	// meanwhile. Regions without checksums (format version 1 or 2,
	// memory regions) compute none; read-only regions fail with
	// ErrReadOnly.
	UpdateSums(full bool) (int, error)
	// InvalidateSums marks every checksum stale until UpdateSums(true):
	// the pages may hold writes no Touch declared (a process that wrote
	// them died).
	InvalidateSums()
	// CheckPage compares data page p with its stored checksum (see
	// PageCheck). It is safe beside writers.
	CheckPage(p uint64) PageCheck
}

// Mapper creates, opens and removes region files. The store uses it for
// every filter file, so tests can substitute Sim.
type Mapper interface {
	// Create makes a new file at path holding h's header page and
	// h.DataPages zeroed data pages, makes the file and its directory
	// entry durable, and maps it read-write. It fails if path exists.
	// Every block of the file is allocated, so that no write through the
	// mapping needs disk space; without the space, Create fails (the
	// error wraps syscall.ENOSPC for OS) and leaves no file behind.
	Create(path string, h Header) (Region, error)
	// Open maps an existing file read-write after checking its header
	// and size.
	Open(path string) (Region, error)
	// OpenView maps an existing file read-only after the same checks.
	OpenView(path string) (View, error)
	// OpenRead maps an existing file read-only and shared after the same
	// checks: Words shows the file's current contents, including a live
	// writer's later changes; writing through Words faults; Sync fails
	// with ErrReadOnly; Touch does nothing; Seq is the file's shared
	// move-sequence word, which only the writer changes.
	OpenRead(path string) (Region, error)
	// Remove deletes the file at path durably. Removing a missing file
	// is not an error.
	Remove(path string) error
	// List returns the names (not paths) of the files in dir, sorted. A
	// missing dir has no files.
	List(dir string) ([]string, error)
}
