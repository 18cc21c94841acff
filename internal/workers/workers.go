// Package workers runs a function on several goroutines at once: the
// fork-join step of the parallel builds (store's Load, cuckoo's Build).
package workers

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Run calls fn(0), ..., fn(n-1) on n goroutines, fn(0) on the caller's,
// and returns when every call has returned. n < 1 calls nothing.
//
// A panic in any call reaches Run's caller once every call has returned
// (fn(0)'s own, or else the first other one's): never while a call still
// runs, since the caller may then free what the calls work on, and never
// on a goroutine of Run's, where it would end the process.
//
// Run's goroutines fault as the caller does: if it asked for memory
// faults as panics (debug.SetPanicOnFault, as the store does around reads
// and writes of a file's mapping, which fault where the file was
// truncated under it or the disk cannot read a page), a fault in any
// call reaches it as such a panic; otherwise a fault ends the process,
// wherever it happens.
func Run(n int, fn func(w int)) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first any // the first other call's panic (recover is never nil for one)
	)
	guard := debug.SetPanicOnFault(false)
	debug.SetPanicOnFault(guard)
	for w := 1; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if guard {
				debug.SetPanicOnFault(true) // a goroutine of its own: nothing to restore
			}
			defer func() {
				if v := recover(); v != nil {
					mu.Lock()
					if first == nil {
						first = v
					}
					mu.Unlock()
				}
			}()
			fn(w)
		}()
	}
	func() {
		defer wg.Wait()
		if n >= 1 {
			fn(0)
		}
	}()
	if first != nil {
		panic(first)
	}
}

// Chunks splits [0, total) into chunks of size keys (the last may be
// shorter) and calls fn(w, c, lo, hi) once for each chunk c = [lo, hi),
// on n goroutines (w is the goroutine's index, as in Run) that claim
// the chunks in order, one at a time, until none is left. It returns
// when every chunk is done.
//
// Unlike shares fixed in advance, claimed chunks keep every goroutine
// busy until the end when the CPUs are not all theirs: a Load's key
// source runs beside its build, and a fixed half of the work would wait
// for the goroutine that shares a CPU with it.
func Chunks(n, total, size int, fn func(w, c, lo, hi int)) {
	if total <= 0 || size <= 0 {
		return
	}
	chunks := (total + size - 1) / size
	var next atomic.Int64
	Run(min(n, chunks), func(w int) {
		for {
			c := int(next.Add(1)) - 1
			if c >= chunks {
				return
			}
			lo := c * size
			fn(w, c, lo, min(lo+size, total))
		}
	})
}
