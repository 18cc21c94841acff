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
	// fdatasync) and then drops its pages from memory. A page a process
	// maps (another one's read-only view, say) stays: then Evict returns
	// an error wrapping ErrBusy, as it does when a page is read back in
	// meanwhile. A missing file returns an error wrapping fs.ErrNotExist;
	// a path that is not a regular file is refused without being opened.
	// Where the page cache is the storage (tmpfs), nothing is dropped and
	// nothing can be lost: nil.
	Evict(path string) error
}

var _ Evicter = OS{}

// Evict implements Evicter: fdatasync, then POSIX_FADV_DONTNEED over the
// whole file, then mincore over a fresh mapping of it to count the pages
// that stayed (Linux; elsewhere only the sync).
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
	stayed, pages, err := cachedPages(f)
	if err != nil {
		return fmt.Errorf("mmapbits: evict %s: %w", path, err)
	}
	if stayed > 0 {
		return fmt.Errorf("mmapbits: evict %s: %d of its %d pages stay in memory: %w", path, stayed, pages, ErrBusy)
	}
	return nil
}
