package mmapbits

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestParallelSumsFaultReachesCaller: a data page that faults (its file
// truncated under the mapping) while a goroutine other than the caller
// computes its checksum panics in the caller, with the fault's value, when
// the caller reads the mapping under debug.SetPanicOnFault (as the store's
// checkpoint does): the process does not die of SIGBUS. Only the upper
// quarter of the data pages is cut, inside the last goroutine's share and
// past the caller's, and the checksums are in memory, so the fault can
// only come from another goroutine.
func TestParallelSumsFaultReachesCaller(t *testing.T) {
	lowerSumsParallelMin(t, 64, 2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // the caller takes pages 0-1023
	const pages = 2000
	path := filepath.Join(t.TempDir(), "data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(pages * PageSize); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, pages*PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), pages*WordsPerPage)
	for i := range words {
		words[i] = uint64(i) | 1
	}
	s := newPageSums(words, make([]uint32, pages))
	s.touch(0, uint64(len(words)))
	const cut = 1500 // pages kept
	if err := f.Truncate(cut * PageSize); err != nil {
		t.Fatal(err)
	}
	var got any
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { got = recover() }()
		s.update(false, nil)
	}()
	fault, ok := got.(interface{ Addr() uintptr })
	if !ok {
		t.Fatalf("update over a truncated mapping: recovered %v (%T), want a fault with its address", got, got)
	}
	base := uintptr(unsafe.Pointer(&mem[0]))
	if a := fault.Addr(); a < base+cut*PageSize || a >= base+pages*PageSize {
		t.Fatalf("the fault is at %#x, want it in the cut pages [%#x, %#x)", a, base+cut*PageSize, base+pages*PageSize)
	}
	t.Logf("recovered: %v", got)
}
