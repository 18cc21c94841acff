package owned

import (
	"sync/atomic"
	"testing"
)

// TestInc: Inc moves the value atomic loads read, from any start,
// wrapping at 2^64 as Add does.
func TestInc(t *testing.T) {
	for _, start := range []uint64{0, 41, 1<<63 - 1, 1<<64 - 1} {
		var c atomic.Uint64
		c.Store(start)
		Inc(&c)
		Inc(&c)
		if got, want := c.Load(), start+2; got != want {
			t.Fatalf("from %d, two Incs: %d, want %d", start, got, want)
		}
	}
}
