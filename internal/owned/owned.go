// Package owned holds what the filter packages' owned adds share: those
// adds (bloom.Filter.AddOwned, cuckoo.Filter.InsertOwned) run on a filter
// no other goroutine uses meanwhile, and take no locked instruction.
package owned

import (
	"sync/atomic"
	"unsafe"
)

// Inc adds 1 to *c with a plain read and write, no locked instruction,
// for a counter no other goroutine reads or writes while Inc runs (the
// caller's hand-off of the filter orders it before any later atomic
// access). An atomic.Uint64 holds its value at offset 0, before any
// padding; the array index below does not compile if the type ever grows
// or shrinks.
func Inc(c *atomic.Uint64) { *(*uint64)(unsafe.Pointer(c))++ }

var _ = [1]struct{}{}[unsafe.Sizeof(atomic.Uint64{})-8]
