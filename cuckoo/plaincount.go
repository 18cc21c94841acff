package cuckoo

import (
	"sync/atomic"
	"unsafe"
)

// addPlain adds 1 to *c with a plain read and write, no locked
// instruction: for the Owned adds, whose filter no other goroutine uses
// while they run (the caller's hand-off of the filter orders them before
// any later atomic access). An atomic.Uint64 holds its value at offset 0,
// before any padding; the array index below does not compile if the type
// ever grows.
func addPlain(c *atomic.Uint64) { *(*uint64)(unsafe.Pointer(c))++ }

var _ = [1]struct{}{}[unsafe.Sizeof(atomic.Uint64{})-8]
