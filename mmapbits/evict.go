package mmapbits

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/filterstore/filterstore/internal/regfile"
)

// Evicter is a Mapper that can drop a file's pages from memory, so that
// the next mapping of the file reads what is on the disk.
//
// After a failed msync, Linux marks the dirty pages clean and keeps their
// contents in the page cache. A later write of such a page does not always
// reach the disk either: on ext4, a page in a preallocated ("unwritten")
// extent whose first write-back failed is written again by the next
// msync, which then succeeds, but the extent stays unwritten, so once the
// page leaves the cache the file reads zeros there (dmesg: "failed to
// convert unwritten extents to written extents -- potential data loss").
// Dropped from the cache first and written afterwards, the page is
// converted and stays. A store that saw a failed msync therefore evicts
// its files before it maps them again, and rebuilds what the lost pages
// held from its log.
type Evicter interface {
	// Evict makes the file at path durable (its dirty pages written, as
	// fdatasync) and then drops its pages from memory where nothing maps
	// them: a page mapped by a process (another one's read-only view,
	// say) stays. A missing file returns an error wrapping
	// fs.ErrNotExist; a path that is not a regular file is refused
	// without being opened.
	Evict(path string) error
}

var _ Evicter = OS{}

// Evict implements Evicter: fdatasync, then POSIX_FADV_DONTNEED over the
// whole file (where the system has it; elsewhere only the sync).
func (OS) Evict(path string) error {
	f, err := regfile.Open(path, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return fmt.Errorf("mmapbits: evict %s: %w", path, err)
	}
	defer f.Close()
	if err := fdatasync(f); err != nil {
		return fmt.Errorf("mmapbits: evict %s: sync: %w", path, err)
	}
	if err := dropCache(f); err != nil {
		return fmt.Errorf("mmapbits: evict %s: %w", path, err)
	}
	return nil
}
