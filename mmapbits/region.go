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
	// Close releases the mapping. Further calls fail with ErrClosed or
	// report false.
	Close() error
}

// Region is a read-write region. Words stays valid until Close; filters read
// it with atomic loads and write it with atomic stores or ORs.
type Region interface {
	View
	// Words returns the data words. The slice aliases the mapping.
	Words() []uint64
	// Sync makes every change to Words durable (msync MS_SYNC for files).
	Sync() error
}

// Mapper creates, opens and removes region files. The store uses it for
// every filter file, so tests can substitute Sim.
type Mapper interface {
	// Create makes a new file at path holding h's header page and
	// h.DataPages zeroed data pages, makes the file and its directory
	// entry durable, and maps it read-write. It fails if path exists.
	Create(path string, h Header) (Region, error)
	// Open maps an existing file read-write after checking its header
	// and size.
	Open(path string) (Region, error)
	// OpenView maps an existing file read-only after the same checks.
	OpenView(path string) (View, error)
	// OpenSnapshot maps an existing file copy-on-write after the same
	// checks: Words may be written, but the writes stay in this
	// process's memory and never reach the file (Sync fails with
	// ErrReadOnly). Pages never written show the file as it is, so a
	// live writer's later changes to them may show through.
	OpenSnapshot(path string) (Region, error)
	// Remove deletes the file at path durably. Removing a missing file
	// is not an error.
	Remove(path string) error
	// List returns the names (not paths) of the files in dir, sorted. A
	// missing dir has no files.
	List(dir string) ([]string, error)
}
