package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/filterstore/filterstore/store"
)

// TestCheckPageCache proves, with the kernel's page cache, that check reads
// a few pages of a 16 MiB Bloom filter and info all of them: the layer
// file is evicted from the cache (it is clean after Close), each command
// runs, and mincore counts the file's pages that came back.
func TestCheckPageCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 16 MiB filter")
	}
	dir := filepath.Join(t.TempDir(), "big")
	s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateBloom("big", store.BloomConfig{Capacity: 14_000_000, ErrorRate: 0.01, NonScaling: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := b.Add([]byte(fmt.Sprint("key-", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := layerFile(t, dir, "big", 0)
	total := evict(t, path)
	if n := cached(t, path); n > total/100 {
		t.Skipf("the file system keeps %d of %d pages cached after POSIX_FADV_DONTNEED", n, total)
	}
	mustRun(t, 0, "check", dir, "big", "key-1", "key-2", "key-3", "nobody")
	t.Logf("check: %d of %d pages cached", cached(t, path), total)
	// The header page, a page per key, and what readahead brings with
	// them: far from the file's thousands.
	if n := cached(t, path); n > 200 {
		t.Errorf("check brought %d of the file's %d pages into the page cache", n, total)
	}
	evict(t, path)
	mustRun(t, 0, "info", dir, "big")
	if n := cached(t, path); n < total*9/10 {
		t.Errorf("info brought only %d of %d pages into the page cache: the measure is broken", n, total)
	}
}

// evict drops path's clean pages from the page cache and returns its size
// in pages.
func evict(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("fadvise: %v", err)
	}
	return int(st.Size() / int64(os.Getpagesize()))
}

// cached returns how many of path's pages are in the page cache.
func cached(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Skipf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
