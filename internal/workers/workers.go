// Package workers runs a function on several goroutines at once: the
// fork-join step of the parallel builds (store's Load, cuckoo's Build).
package workers

import "sync"

// Run calls fn(0), ..., fn(n-1) on n goroutines, fn(0) on the caller's,
// and returns when every call has returned. n < 1 calls nothing.
func Run(n int, fn func(w int)) {
	var wg sync.WaitGroup
	for w := 1; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w)
		}()
	}
	if n >= 1 {
		fn(0)
	}
	wg.Wait()
}
