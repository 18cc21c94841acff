package store

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// dropFileCache evicts path's clean, unmapped pages from the page cache.
func dropFileCache(b *testing.B, path string) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatalf("fadvise %s: %v", path, err)
	}
}
