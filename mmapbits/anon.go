package mmapbits

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms that
// have them (x86-64, arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// AnonWords returns n zeroed words in private anonymous memory outside
// the Go heap, aligned to a huge page and, if huge is set and the kernel
// offers them, backed by transparent huge pages: a bulk build that writes
// random cache lines of a large array then misses the TLB far less often
// than on 4 KiB pages. Pages are allocated as they are first written.
// free unmaps the words; nothing may touch them afterwards.
func AnonWords(n uint64, huge bool) (words []uint64, free func() error, err error) {
	if n == 0 {
		return nil, func() error { return nil }, nil
	}
	if n > (1<<62)/8 {
		return nil, nil, fmt.Errorf("mmapbits: anonymous memory of %d words: too large", n)
	}
	size := int(n*8) + hugePage
	mapMu.Lock()
	err = guard.admit()
	if err == nil {
		guard.made()
	}
	mapMu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("mmapbits: anonymous memory of %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, nil, fmt.Errorf("mmapbits: anonymous memory of %d bytes: %w", size, err)
	}
	off := 0
	if r := int(uintptr(unsafe.Pointer(&mem[0])) % hugePage); r != 0 {
		off = hugePage - r
	}
	if huge {
		adviseHuge(mem[off:])
	}
	words = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[off])), n)
	return words, func() error { return unix.Munmap(mem) }, nil
}
