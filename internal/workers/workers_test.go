package workers

import (
	"sync/atomic"
	"testing"
)

// TestRun: every index runs exactly once, each on its own goroutine at
// the same time (all n wait for each other before returning), and Run
// returns only after all of them.
func TestRun(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7} {
		calls := make([]atomic.Int32, max(n, 1))
		var arrived atomic.Int32
		release := make(chan struct{})
		Run(n, func(w int) {
			calls[w].Add(1)
			if arrived.Add(1) == int32(n) {
				close(release) // the last to arrive lets all go
			}
			<-release
		})
		for w := range n {
			if c := calls[w].Load(); c != 1 {
				t.Fatalf("n=%d: fn(%d) ran %d times", n, w, c)
			}
		}
		if n == 0 && calls[0].Load() != 0 {
			t.Fatal("n=0: fn ran")
		}
	}
}
