package mmapbits

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// TestParallelSumsFaultReachesCaller: a page of the mapping that faults
// (the file truncated under it) while another goroutine than the caller
// computes its checksum panics in the caller, with the fault's value, when
// the caller reads the mapping under debug.SetPanicOnFault (as the store's
// checkpoint does): the process does not die of SIGBUS.
func TestParallelSumsFaultReachesCaller(t *testing.T) {
	lowerSumsParallelMin(t, 64, 2)
	const pages = 2000
	h := Header{Kind: KindBitmap, DataPages: pages, Size: pages * PageSize * 8, Capacity: pages * PageSize * 8}
	path := filepath.Join(t.TempDir(), "f.flt")
	r, err := OS{}.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := r.Words()
	for i := range w {
		w[i] = uint64(i) | 1
	}
	r.Touch(0, uint64(len(w)))
	// Cut the last tenth of the data pages: the second goroutine's half.
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-200*PageSize); err != nil {
		t.Fatal(err)
	}
	var got any
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { got = recover() }()
		r.UpdateSums(false)
	}()
	f, ok := got.(interface{ Addr() uintptr })
	if !ok || f.Addr() == 0 {
		t.Fatalf("UpdateSums over a truncated mapping: recovered %v (%T), want a fault with its address", got, got)
	}
	t.Logf("recovered: %v", got)
}
