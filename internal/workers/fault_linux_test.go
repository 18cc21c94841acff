package workers

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sink keeps the faulting read from being optimized away.
var sink byte

// TestRunFaultReachesCaller: with the caller asking for memory faults as
// panics, a call on another goroutine that reads a mapped page past the
// end of a truncated file (SIGBUS) panics in the caller with the fault's
// address, after every call has returned; the calls on the caller's
// goroutine and the others run to their end. (Without Run passing the
// setting on, the fault on the other goroutine ends the process.)
func TestRunFaultReachesCaller(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	page := os.Getpagesize()
	if err := os.WriteFile(path, make([]byte, 4*page), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 4*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if err := os.Truncate(path, int64(page)); err != nil {
		t.Fatal(err)
	}
	const n = 4
	done := make([]bool, n)
	var r any
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { r = recover() }()
		Run(n, func(w int) {
			if w == 2 {
				sink += m[2*page] // past the file's end
			}
			done[w] = true
		})
	}()
	re, ok := r.(runtime.Error)
	if !ok {
		t.Fatalf("Run's panic: %v (%T), want the fault as a runtime.Error", r, r)
	}
	a, ok := re.(interface{ Addr() uintptr })
	if !ok {
		t.Fatalf("the panic %v carries no address", re)
	}
	if want := uintptr(unsafe.Pointer(unsafe.SliceData(m))) + uintptr(2*page); a.Addr() != want {
		t.Errorf("fault at %#x, want %#x", a.Addr(), want)
	}
	for w, d := range done {
		if d != (w != 2) {
			t.Errorf("call %d ran to its end: %v", w, d)
		}
	}
	t.Logf("the caller got: %v", r)
}
