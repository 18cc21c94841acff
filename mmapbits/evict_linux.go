package mmapbits

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync writes f's dirty data pages and waits for them.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// dropCache drops f's clean, unmapped pages from the page cache.
func dropCache(f *os.File) error { return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
