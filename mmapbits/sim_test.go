package mmapbits

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// TestSimCrash checks the power-loss model: synced words always survive, and
// each dirty page survives whole from one image or the other, chosen by the
// seed.
func TestSimCrash(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := NewSim()
	const pages = 64
	r, err := s.Create("f", Header{Kind: KindBitmap, DataPages: pages, Size: pages * PageSize * 8})
	if err != nil {
		t.Fatal(err)
	}
	w := r.Words()
	for i := range w {
		atomic.StoreUint64(&w[i], 1)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	// Dirty every page after the sync with a page-specific value.
	for i := range w {
		atomic.StoreUint64(&w[i], uint64(i/WordsPerPage)+2)
	}
	st := s.Crash(rng)
	if st.DirtyPages != pages {
		t.Fatalf("dirty pages %d, want %d", st.DirtyPages, pages)
	}
	if st.KeptPages == 0 || st.KeptPages == pages {
		t.Fatalf("seed %d: kept %d of %d pages: the crash should mix images", seed, st.KeptPages, pages)
	}
	if _, ok := r.Word(0); ok {
		t.Fatal("a region open at the crash still answers")
	}
	r2, err := s.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	w2 := r2.Words()
	kept := 0
	for pg := 0; pg < pages; pg++ {
		first := w2[pg*WordsPerPage]
		if first != 1 && first != uint64(pg)+2 {
			t.Fatalf("seed %d: page %d holds %d, neither image", seed, pg, first)
		}
		for _, v := range w2[pg*WordsPerPage : (pg+1)*WordsPerPage] {
			if v != first {
				t.Fatalf("seed %d: page %d mixes images", seed, pg)
			}
		}
		if first != 1 {
			kept++
		}
	}
	if kept != st.KeptPages {
		t.Fatalf("kept %d pages, stats say %d", kept, st.KeptPages)
	}
	// After the crash memory equals disk: a second crash changes nothing.
	if st := s.Crash(rng); st.DirtyPages != 0 {
		t.Fatalf("second crash found %d dirty pages", st.DirtyPages)
	}
}

func TestSimDeterministic(t *testing.T) {
	run := func() []uint64 {
		s := NewSim()
		r, _ := s.Create("f", Header{Kind: KindBitmap, DataPages: 32, Size: 1})
		w := r.Words()
		for i := range w {
			w[i] = uint64(i)
		}
		s.Crash(rand.New(rand.NewPCG(99, 1)))
		r, _ = s.Open("f")
		return r.Words()
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different crash at word %d", i)
		}
	}
}

func TestSimRemoveAndPaths(t *testing.T) {
	s := NewSim()
	if _, err := s.Create("a", Header{Kind: KindBitmap, DataPages: 1, Size: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("a", Header{Kind: KindBitmap, DataPages: 1, Size: 1}); err == nil {
		t.Fatal("create over existing sim file succeeded")
	}
	if _, err := s.Create("b", Header{Kind: KindBitmap, DataPages: 1, Size: 1}); err != nil {
		t.Fatal(err)
	}
	s.Remove("a")
	if p := s.Paths(); len(p) != 1 || p[0] != "b" {
		t.Fatalf("paths %v", p)
	}
	if _, err := s.Open("a"); err == nil {
		t.Fatal("opened a removed file")
	}
}
