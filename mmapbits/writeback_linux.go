package mmapbits

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// writeback asks the kernel to start writing back the dirty pages of
// bytes [off, off+n) of the file at path (sync_file_range with
// SYNC_FILE_RANGE_WRITE only: it neither waits for the writes nor
// collects their errors, which stay recorded against the file for the
// next fsync or msync of any descriptor opened before them to return).
// The file is opened read-only for the call: the kernel asks no write
// access of it. (On overlayfs the call reaches the overlay's own inode,
// not the mapped file's, and does nothing.) A variable for tests.
var writeback = func(path string, off, n int64) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		// %v, not %w: no failure to open is an I/O error of the data.
		return fmt.Errorf("mmapbits: writeback %s: open: %v", path, err)
	}
	defer unix.Close(fd)
	if err := unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return fmt.Errorf("mmapbits: writeback %s: %w", path, err)
	}
	return nil
}
