//go:build filterstore_testhooks && linux

package store

// Run with: go test -tags filterstore_testhooks -run TestCountAfterCloseReadsReusedRange ./store/
// (make test and CI do).

import (
	"math"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestCountAfterCloseReadsReusedRange: a counting filter's Count that
// reads the filter after Close, from a range another file's mapping has
// since taken over (mmapbits reuses closed regions' ranges), answers
// "unknown", not the counts it read there. The hook closes the store
// after the lookup's first check and maps pages whose counters all read
// 1 over the closed filter's data, as a later file reusing the range
// would; the key was added 5 times. Count re-checked the filter only
// when it read 0, and answered 1: below the 5 adds it promises at least.
func TestCountAfterCloseReadsReusedRange(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
	must(t, err)
	k := key(3)
	for range 5 {
		must(t, n.Add(k))
	}
	if c := n.Count(k); c < 5 {
		t.Fatalf("count before Close: %d", c)
	}
	words := n.b.regions[0].Words()
	page := uintptr(os.Getpagesize())
	first := unsafe.Pointer(&words[0])
	start := unsafe.Add(first, -int(uintptr(first)&(page-1)))
	size := (uintptr(unsafe.Pointer(&words[len(words)-1])) + 8 - uintptr(start) + page - 1) &^ (page - 1)
	fired := false
	lookupReadHook = func(b *filterBase) {
		if fired || b != n.b {
			return
		}
		fired = true
		must(t, s.Close())
		p, err := unix.MmapPtr(-1, 0, start, size, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED)
		if err != nil {
			t.Fatalf("mapping over the closed range: %v", err)
		}
		mem := unsafe.Slice((*byte)(p), size)
		for i := range mem {
			mem[i] = 0x11 // every 4-bit counter 1
		}
	}
	defer func() { lookupReadHook = nil }()
	c := n.Count(k)
	if !fired {
		t.Fatal("the hook did not run")
	}
	if c != math.MaxUint64 {
		t.Fatalf("Count after Close read a reused range and answered %d, want unknown (math.MaxUint64)", c)
	}
}
