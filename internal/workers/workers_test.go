package workers

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
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

// TestChunks: every chunk runs exactly once with its bounds, the chunks
// cover [0, total) without overlap, goroutine indices stay below n, and a
// goroutine that stalls does not keep the others from taking the rest.
func TestChunks(t *testing.T) {
	for _, c := range []struct{ n, total, size int }{
		{1, 10, 3}, {2, 10, 3}, {4, 1000, 7}, {8, 5, 2}, {3, 0, 4}, {2, 9, 9}, {2, 9, 100},
	} {
		chunks := 0
		if c.total > 0 {
			chunks = (c.total + c.size - 1) / c.size
		}
		seen := make([]atomic.Int32, c.total)
		runs := make([]atomic.Int32, max(chunks, 1))
		var badW atomic.Bool
		Chunks(c.n, c.total, c.size, func(w, k, lo, hi int) {
			if w < 0 || w >= c.n {
				badW.Store(true)
			}
			runs[k].Add(1)
			if lo != k*c.size || hi != min(lo+c.size, c.total) {
				t.Errorf("%+v: chunk %d is [%d, %d)", c, k, lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		if badW.Load() {
			t.Fatalf("%+v: a goroutine index outside [0, %d)", c, c.n)
		}
		for k := range chunks {
			if r := runs[k].Load(); r != 1 {
				t.Fatalf("%+v: chunk %d ran %d times", c, k, r)
			}
		}
		for i := range seen {
			if s := seen[i].Load(); s != 1 {
				t.Fatalf("%+v: index %d covered %d times", c, i, s)
			}
		}
	}
	// The goroutine that takes chunk 0 stalls there until the other has
	// done every other chunk: with fixed shares the other would stop at
	// the end of its share and both would wait (here, until the deadline).
	var done atomic.Int32
	const total = 64
	deadline := time.Now().Add(10 * time.Second)
	Chunks(2, total, 1, func(w, k, lo, hi int) {
		if k == 0 {
			for done.Load() < total-1 && time.Now().Before(deadline) {
				runtime.Gosched()
			}
		}
		done.Add(1)
	})
	if time.Now().After(deadline) {
		t.Fatalf("the chunk-0 goroutine waited 10 s: the other stopped before the last chunk")
	}
	if done.Load() != total {
		t.Fatalf("%d chunks done, want %d", done.Load(), total)
	}
}

// TestRunPanics: a panic in a call on one of Run's goroutines reaches
// Run's caller, and a panic in fn(0) does too, in both cases only once
// every other call has returned.
func TestRunPanics(t *testing.T) {
	for _, panicker := range []int{0, 1, 2} {
		var others atomic.Int32 // calls that ran to their end
		got := func() (v any) {
			defer func() { v = recover() }()
			Run(3, func(w int) {
				if w == panicker {
					panic(w)
				}
				time.Sleep(50 * time.Millisecond)
				others.Add(1)
			})
			return nil
		}()
		if got != panicker {
			t.Fatalf("fn(%d) panicked: the caller recovered %v", panicker, got)
		}
		if n := others.Load(); n != 2 {
			t.Fatalf("fn(%d) panicked: Run panicked with %d of the 2 other calls returned", panicker, n)
		}
	}
}
