package store

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
)

// writebackRecorder is a region that records the ranges it is asked to
// write back (nothing else of it is used).
type writebackRecorder struct {
	mmapbits.Region
	mu     sync.Mutex
	ranges [][2]uint64
}

func (w *writebackRecorder) StartWriteback(from, to uint64) {
	w.mu.Lock()
	w.ranges = append(w.ranges, [2]uint64{from, to})
	w.mu.Unlock()
}

// TestPublishPagesTiles: publishPages calls fn on ranges that tile
// [0, words) exactly, each at most publishChunk words and starting on a
// page, on sizes below one page, around a chunk and of several chunks per
// goroutine, at 1, 2 and 5 CPUs; and, from publishWritebackMin words on,
// asks the region to write back each range once fn has returned for it,
// and no other (below it, none).
func TestPublishPagesTiles(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 5} {
		runtime.GOMAXPROCS(procs)
		for _, words := range []uint64{1, 511, 512, 1 << 15, publishChunk - 1, publishChunk + 1, 5*publishChunk + 777, publishWritebackMin - 1, publishWritebackMin, publishWritebackMin + 3*publishChunk + 777} {
			t.Run(fmt.Sprintf("procs=%d/words=%d", procs, words), func(t *testing.T) {
				r := &writebackRecorder{}
				var mu sync.Mutex
				var done [][2]uint64
				publishPages(words, r, func(lo, hi uint64) {
					r.mu.Lock()
					early := slices.Contains(r.ranges, [2]uint64{lo, hi})
					r.mu.Unlock()
					if early {
						t.Errorf("range [%d, %d) written back before fn ran on it", lo, hi)
					}
					mu.Lock()
					done = append(done, [2]uint64{lo, hi})
					mu.Unlock()
				})
				sortRanges := func(rs [][2]uint64) {
					slices.SortFunc(rs, func(a, b [2]uint64) int { return int(a[0]) - int(b[0]) })
				}
				sortRanges(done)
				next := uint64(0)
				for _, d := range done {
					if d[0] != next || d[1] <= d[0] || d[1]-d[0] > publishChunk || d[0]%mmapbits.WordsPerPage != 0 {
						t.Fatalf("ranges %v do not tile [0, %d) in page-aligned parts of at most %d words", done, words, publishChunk)
					}
					next = d[1]
				}
				if next != words {
					t.Fatalf("ranges %v end at %d, want %d", done, next, words)
				}
				sortRanges(r.ranges)
				if words < publishWritebackMin {
					if len(r.ranges) > 0 {
						t.Fatalf("%d words, below %d: written back %v, want nothing", words, publishWritebackMin, r.ranges)
					}
					return
				}
				if !slices.Equal(r.ranges, done) {
					t.Fatalf("written back %v, want the ranges fn ran on, %v", r.ranges, done)
				}
			})
		}
	}
}
