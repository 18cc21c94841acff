//go:build !(amd64 || arm64) || purego

package prefetch

import (
	"sync/atomic"
	"unsafe"
)

// sink keeps the fallback's loads from being optimized away.
var sink atomic.Uint64

// lines loads the first word of the n lines at p[0], ..., p[n-1]; n > 0.
// The loads are independent, so the core overlaps as many of their misses
// as its reorder buffer allows.
func lines(p *unsafe.Pointer, n int) {
	var acc uint64
	for _, q := range unsafe.Slice(p, n) {
		acc |= atomic.LoadUint64((*uint64)(q))
	}
	if acc == 1<<63+1 { // practically never; keeps acc live
		sink.Store(acc)
	}
}
