//go:build !linux

package store

import "testing"

// dropFileCache stops b where the page cache cannot be dropped per file
// (posix_fadvise is Linux's here): a cold reopen cannot be measured.
func dropFileCache(b *testing.B, path string) {
	b.Helper()
	b.Skipf("cannot evict %s from the page cache on this system", path)
}
