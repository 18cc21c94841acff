package mmapbits

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// lowerSumsParallelMin makes update go parallel from min stale pages per
// goroutine, on at least procs goroutines, until the test ends.
func lowerSumsParallelMin(t *testing.T, min, procs int) {
	t.Helper()
	was := sumsParallelMin
	sumsParallelMin = min
	prev := runtime.GOMAXPROCS(max(procs, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { sumsParallelMin = was; runtime.GOMAXPROCS(prev) })
}

// TestParallelSumsMatchPages: the checksums update computes on several
// goroutines are every stale page's own, for every page touched, for a
// scattered few, and after InvalidateSums, and the count is the pages
// computed.
func TestParallelSumsMatchPages(t *testing.T) {
	lowerSumsParallelMin(t, 64, 4)
	rng := testseed.New(t)
	const pages = 3001
	h := Header{Kind: KindBitmap, DataPages: pages, Size: pages * PageSize * 8, Capacity: pages * PageSize * 8}
	r, err := OS{}.Create(filepath.Join(t.TempDir(), "p.flt"), h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := r.Words()
	check := func(stage string, wantN, gotN int) {
		t.Helper()
		if gotN != wantN {
			t.Fatalf("%s: UpdateSums computed %d pages, want %d", stage, gotN, wantN)
		}
		for p := range uint64(pages) {
			if c := r.CheckPage(p); c.Stale || !pageOK(c) {
				t.Fatalf("%s: page %d: %+v", stage, p, c)
			}
		}
	}
	for i := range w {
		w[i] = rng.Uint64()
	}
	r.Touch(0, uint64(len(w)))
	n, err := r.UpdateSums(false)
	if err != nil {
		t.Fatal(err)
	}
	check("every page touched", pages, n)

	touched := map[uint64]bool{}
	for len(touched) < 700 {
		p := rng.Uint64N(pages)
		touched[p] = true
		w[p*WordsPerPage+rng.Uint64N(WordsPerPage)] = rng.Uint64()
		r.Touch(p*WordsPerPage, p*WordsPerPage+1)
	}
	n, _ = r.UpdateSums(false)
	check("700 scattered pages", len(touched), n)

	r.InvalidateSums()
	for p := uint64(0); p < pages; p += 3 {
		w[p*WordsPerPage] = rng.Uint64() // undeclared writes
	}
	n, _ = r.UpdateSums(true)
	check("after InvalidateSums", pages, n)
}
