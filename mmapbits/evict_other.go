//go:build !linux

package mmapbits

import "os"

// fdatasync writes f's dirty pages and waits for them.
func fdatasync(f *os.File) error { return f.Sync() }

// dropCache does nothing where there is no posix_fadvise: the pages stay.
func dropCache(*os.File) error { return nil }

// cachedPages reports none: without dropCache there is nothing to count.
func cachedPages(*os.File) (cached, pages int, err error) { return 0, 0, nil }
