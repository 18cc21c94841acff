package mmapbits

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestSimCrash checks the power-loss model: synced words always survive, and
// each dirty page survives whole from one image or the other, chosen by the
// seed.
func TestSimCrash(t *testing.T) {
	seed := testseed.Seed(t)
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

// TestSimCrashClosesRemovedFilesRegions: Crash and Kill close the regions
// of a removed file as well, as the death of the process that mapped it
// does. Before, they stayed open and writable (listed open in the
// twenty-third session).
func TestSimCrashClosesRemovedFilesRegions(t *testing.T) {
	for _, kill := range []bool{false, true} {
		s := NewSim()
		r, err := s.Create("a", Header{Kind: KindBitmap, DataPages: 1, Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Remove("a"); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.Word(0); !ok {
			t.Fatal("a removed file's region closed before the crash")
		}
		if kill {
			s.Kill()
		} else {
			s.Crash(rand.New(rand.NewPCG(1, 0)))
		}
		if _, ok := r.Word(0); ok {
			t.Errorf("kill %v: a removed file's region still reads after it", kill)
		}
		if err := r.Sync(); !errors.Is(err, ErrClosed) {
			t.Errorf("kill %v: Sync of a removed file's region after it: %v, want ErrClosed", kill, err)
		}
	}
}

var errInjected = errors.New("injected EIO")

// failSyncs makes every Sync of s fail while on is set.
func failSyncs(s *Sim, on *atomic.Bool) {
	s.SetInjector(func(op Op, path string) error {
		if op == OpSync && on.Load() {
			return errInjected
		}
		return nil
	})
}

// fill stores v into every word of page pg of r.
func fill(r Region, pg int, v uint64) {
	w := r.Words()[pg*WordsPerPage : (pg+1)*WordsPerPage]
	for i := range w {
		atomic.StoreUint64(&w[i], v)
	}
}

// pagesOf returns the first word of every page of the file at path after
// reopening it.
func pagesOf(t *testing.T, s *Sim, path string) []uint64 {
	t.Helper()
	r, err := s.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := r.Words()
	out := make([]uint64, len(w)/WordsPerPage)
	for pg := range out {
		out[pg] = atomic.LoadUint64(&w[pg*WordsPerPage])
		for _, v := range w[pg*WordsPerPage : (pg+1)*WordsPerPage] {
			if v != out[pg] {
				t.Fatalf("page %d mixes images", pg)
			}
		}
	}
	return out
}

// TestSimFailedSync: a failed Sync loses the dirty pages (fsyncgate): a
// later successful Sync does not write them and a Crash drops them, unless
// they are written again, by a change or a Touch, in between.
func TestSimFailedSync(t *testing.T) {
	seed := testseed.Seed(t)
	const pages = 6
	// then runs between the failed Sync and the successful one; want
	// holds the pages expected after the Crash.
	cases := []struct {
		name string
		then func(r Region)
		want [pages]uint64
	}{
		{"nothing", func(r Region) {}, [pages]uint64{1, 1, 1, 1, 1, 1}},
		{"touch", func(r Region) { r.Touch(WordsPerPage+5, WordsPerPage+6) }, [pages]uint64{1, 3, 1, 1, 1, 1}},
		{"touch range", func(r Region) { r.Touch(WordsPerPage-1, 3*WordsPerPage+1) }, [pages]uint64{2, 3, 4, 5, 1, 1}},
		{"touch clamped", func(r Region) { r.Touch(3*WordsPerPage, 1<<40) }, [pages]uint64{1, 1, 1, 5, 1, 1}},
		{"touch empty", func(r Region) { r.Touch(2*WordsPerPage, 2*WordsPerPage) }, [pages]uint64{1, 1, 1, 1, 1, 1}},
		{"rewrite one word", func(r Region) { atomic.StoreUint64(&r.Words()[2*WordsPerPage], 4) }, [pages]uint64{1, 1, 1, 1, 1, 1}},
		{"change one word", func(r Region) { fill(r, 2, 7) }, [pages]uint64{1, 1, 7, 1, 1, 1}},
		{"new write", func(r Region) { fill(r, 4, 9) }, [pages]uint64{1, 1, 1, 1, 9, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			s := NewSim()
			var fail atomic.Bool
			failSyncs(s, &fail)
			r, err := s.Create("f", Header{Kind: KindBitmap, DataPages: pages, Size: 1})
			if err != nil {
				t.Fatal(err)
			}
			for pg := 0; pg < pages; pg++ {
				fill(r, pg, 1)
			}
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			for pg := 0; pg < 4; pg++ {
				fill(r, pg, uint64(pg)+2)
			}
			fail.Store(true)
			if err := r.Sync(); !errors.Is(err, errInjected) {
				t.Fatalf("Sync: %v, want the injected error", err)
			}
			fail.Store(false)
			// Lost pages keep their memory image: lookups see the writes.
			if got := atomic.LoadUint64(&r.Words()[WordsPerPage]); got != 3 {
				t.Fatalf("memory image after the failed Sync: %d, want 3", got)
			}
			c.then(r)
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			st := s.Crash(rng)
			got := pagesOf(t, s, "f")
			if [pages]uint64(got) != c.want {
				t.Fatalf("seed %d: pages after crash %v, want %v (stats %+v)", seed, got, c.want, st)
			}
			if st.DirtyPages != 0 {
				t.Fatalf("a Sync left %d dirty pages", st.DirtyPages)
			}
		})
	}
}

// TestSimCrashAfterFailedSync: at a crash, lost pages keep their disk image
// whatever rng says, while dirty pages keep either.
func TestSimCrashAfterFailedSync(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := NewSim()
	var fail atomic.Bool
	failSyncs(s, &fail)
	const pages = 64
	r, _ := s.Create("f", Header{Kind: KindBitmap, DataPages: pages, Size: 1})
	for pg := 0; pg < pages/2; pg++ {
		fill(r, pg, 2)
	}
	fail.Store(true)
	if err := r.Sync(); !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	for pg := pages / 2; pg < pages; pg++ {
		fill(r, pg, 3)
	}
	st := s.Crash(rng)
	if st.LostPages != pages/2 || st.DirtyPages != pages/2 || st.KeptPages == 0 || st.KeptPages == pages/2 {
		t.Fatalf("seed %d: stats %+v, want %d lost and %d dirty, some kept", seed, st, pages/2, pages/2)
	}
	got := pagesOf(t, s, "f")
	kept := 0
	for pg, v := range got {
		switch {
		case pg < pages/2 && v != 0:
			t.Fatalf("seed %d: lost page %d holds %d after the crash", seed, pg, v)
		case pg >= pages/2 && v == 3:
			kept++
		case pg >= pages/2 && v != 0:
			t.Fatalf("seed %d: page %d holds %d", seed, pg, v)
		}
	}
	if kept != st.KeptPages {
		t.Fatalf("kept %d, stats %+v", kept, st)
	}
}

// TestSimKill: a killed process's regions stop reaching the file, which
// keeps its memory image, seq word, and dirty and lost pages.
func TestSimKill(t *testing.T) {
	seed := testseed.Seed(t)
	s := NewSim()
	var fail atomic.Bool
	failSyncs(s, &fail)
	const pages = 64
	r, _ := s.Create("f", Header{Kind: KindBitmap, DataPages: pages, Size: 1})
	ro, _ := s.OpenRead("f")
	fill(r, 0, 5) // page 0: lost below
	fail.Store(true)
	r.Sync()
	fail.Store(false)
	for pg := 1; pg < pages; pg++ {
		fill(r, pg, 6) // dirty
	}
	atomic.StoreUint64(r.Seq(), 41) // odd: a move in progress
	s.Kill()

	// The dead process's writes, seq changes and Touches reach nothing.
	fill(r, 1, 7)
	atomic.AddUint64(r.Seq(), 1)
	r.Touch(0, WordsPerPage)
	for _, x := range []Region{r, ro} {
		if _, ok := x.Word(0); ok {
			t.Fatal("a killed region still answers")
		}
		if err := x.Sync(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Sync of a killed region: %v", err)
		}
	}

	r2, err := s.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	w := r2.Words()
	if w[0] != 5 || w[WordsPerPage] != 6 || w[len(w)-1] != 6 {
		t.Fatalf("memory image after Kill: %d %d %d, want 5 6 6", w[0], w[WordsPerPage], w[len(w)-1])
	}
	if got := atomic.LoadUint64(r2.Seq()); got != 41 {
		t.Fatalf("seq after Kill %d, want 41", got)
	}
	// Still dirty: a Crash now may drop pages 1..63; page 0 is still lost.
	st := s.Crash(rand.New(rand.NewPCG(seed, 0)))
	if st.DirtyPages != pages-1 || st.LostPages != 1 || st.KeptPages == 0 || st.KeptPages == pages-1 {
		t.Fatalf("seed %d: crash after kill: %+v", seed, st)
	}
	if got := atomic.LoadUint64(s.files["f"].seq); got != 41 {
		t.Fatalf("seq after Crash %d, want 41", got)
	}
	if got := pagesOf(t, s, "f"); got[0] != 0 {
		t.Fatalf("lost page survived Kill and Crash: %d", got[0])
	}

	// Kill, reopen, Sync: the dirty pages are written, the lost one not.
	s2 := NewSim()
	r, _ = s2.Create("g", Header{Kind: KindBitmap, DataPages: 2, Size: 1})
	failSyncs(s2, &fail)
	fill(r, 0, 5)
	fail.Store(true)
	r.Sync()
	fail.Store(false)
	fill(r, 1, 6)
	s2.Kill()
	r2, _ = s2.Open("g")
	if err := r2.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := s2.Crash(rand.New(rand.NewPCG(seed, 1))); st.DirtyPages != 0 || st.LostPages != 1 {
		t.Fatalf("stats %+v", st)
	}
	if got := pagesOf(t, s2, "g"); got[0] != 0 || got[1] != 6 {
		t.Fatalf("pages %v, want [0 6]", got)
	}
}

// TestSimInjector: an injected failure stops the operation, wrapped; a
// failed Create creates nothing.
func TestSimInjector(t *testing.T) {
	s := NewSim()
	if _, err := s.Create("d/a", Header{Kind: KindBitmap, DataPages: 1, Size: 1}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var failing Op
	s.SetInjector(func(op Op, path string) error {
		seen = append(seen, op.String()+" "+path)
		if op == failing {
			return syscall.ENOSPC
		}
		return nil
	})
	for _, op := range []Op{OpCreate, OpOpen, OpSync, OpRemove, OpList} {
		failing = op
		var err error
		switch op {
		case OpCreate:
			_, err = s.Create("d/b", Header{Kind: KindBitmap, DataPages: 1, Size: 1})
			if p := s.Paths(); len(p) != 1 {
				t.Fatalf("failed Create left files %v", p)
			}
		case OpOpen:
			if _, err = s.Open("d/a"); errors.Is(err, syscall.ENOSPC) {
				if _, err2 := s.OpenRead("d/a"); !errors.Is(err2, syscall.ENOSPC) {
					t.Fatalf("OpenRead: %v", err2)
				}
				if _, err2 := s.OpenView("d/a"); !errors.Is(err2, syscall.ENOSPC) {
					t.Fatalf("OpenView: %v", err2)
				}
			}
		case OpSync:
			failing = 0
			r, _ := s.Open("d/a")
			failing = OpSync
			err = r.Sync()
		case OpRemove:
			err = s.Remove("d/a")
			if p := s.Paths(); len(p) != 1 {
				t.Fatalf("failed Remove removed: %v", p)
			}
		case OpList:
			_, err = s.List("d")
		}
		if !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(err.Error(), "mmapbits: "+op.String()) {
			t.Fatalf("%v: %v, want the injected ENOSPC", op, err)
		}
	}
	want := []string{"create d/b", "open d/a", "open d/a", "open d/a", "open d/a", "sync d/a", "remove d/a", "list d"}
	if !slices.Equal(seen, want) {
		t.Fatalf("injector saw %q, want %q", seen, want)
	}
	s.SetInjector(nil)
	if _, err := s.Create("d/b", Header{Kind: KindBitmap, DataPages: 1, Size: 1}); err != nil {
		t.Fatal(err)
	}
	if names, err := s.List("d"); err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("List: %v %v", names, err)
	}
	if got := Op(99).String(); got != "op(99)" {
		t.Fatalf("Op(99) = %q", got)
	}
	// The injector runs without Sim's lock: it may kill the process at a
	// sync point, and the Sync then finds its region closed.
	r, _ := s.Open("d/a")
	s.SetInjector(func(op Op, path string) error {
		if op == OpSync {
			s.Kill()
		}
		return nil
	})
	if err := r.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync with a Kill at the sync point: %v", err)
	}
}

// TestSimOpenRead: a read-only region over the live memory image.
func TestSimOpenRead(t *testing.T) {
	s := NewSim()
	var fail atomic.Bool
	failSyncs(s, &fail)
	w, _ := s.Create("f", Header{Kind: KindCuckoo, DataPages: 2, Size: 1})
	r, err := s.OpenRead("f")
	if err != nil {
		t.Fatal(err)
	}
	fill(w, 0, 8)
	atomic.AddUint64(w.Seq(), 1)
	if got := atomic.LoadUint64(&r.Words()[3]); got != 8 {
		t.Fatalf("reader sees %d", got)
	}
	if r.Seq() != w.Seq() || atomic.LoadUint64(r.Seq()) != 1 {
		t.Fatal("reader does not share the writer's seq word")
	}
	if err := r.Sync(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Sync: %v", err)
	}
	// A reader's failed Sync does not lose the writer's pages, nor does
	// its Touch rescue lost ones.
	fail.Store(true)
	r.Sync()
	fail.Store(false)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	fill(w, 1, 4)
	fail.Store(true)
	w.Sync()
	fail.Store(false)
	r.Touch(0, 2*WordsPerPage)
	w.Sync()
	if st := s.Crash(rand.New(rand.NewPCG(1, 1))); st.LostPages != 1 || st.DirtyPages != 0 {
		t.Fatalf("stats %+v", st)
	}
	if got := pagesOf(t, s, "f"); got[1] != 0 {
		t.Fatalf("page 1 = %d", got[1])
	}
	v, err := s.OpenView("f")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := v.Word(3); !ok || got != 8 {
		t.Fatalf("view word 3 = %d %v", got, ok)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestSimConcurrent runs writers (atomic stores and Touch) against Sync,
// failing Syncs, opens and Kill, for the race detector.
func TestSimConcurrent(t *testing.T) {
	seed := testseed.Seed(t)
	s := NewSim()
	var n atomic.Uint64
	s.SetInjector(func(op Op, path string) error {
		if op == OpSync && n.Add(1)%3 == 0 {
			return errInjected
		}
		return nil
	})
	const pages = 8
	r, _ := s.Create("f", Header{Kind: KindBitmap, DataPages: pages, Size: 1})
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, g))
			w := r.Words()
			for i := 0; i < 20000; i++ {
				k := rng.Uint64N(uint64(len(w)))
				atomic.StoreUint64(&w[k], rng.Uint64())
				atomic.AddUint64(r.Seq(), 2)
				if i%64 == 0 {
					r.Touch(k, k+1)
				}
			}
		}(uint64(g))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			r.Sync()
			if ro, err := s.OpenRead("f"); err == nil {
				ro.Word(uint64(i))
				ro.Close()
			}
		}
	}()
	wg.Wait()
	s.Kill()
	st := s.Crash(rand.New(rand.NewPCG(seed, 9)))
	t.Logf("crash after concurrent use: %+v", st)
}

// TestSimChecksumsRewrittenAfterFailedSync: a checksum page a failed Sync
// lost is written again when UpdateSums stores its checksums again, even
// the same values (a store through a mapping dirties its page on Linux
// whatever it stores). Before, Sim kept such a page lost, so a later
// successful Sync and a power loss left the data with no checksum: a
// recovery that kept the checksums of pages no record touched then saw a
// false mismatch.
func TestSimChecksumsRewrittenAfterFailedSync(t *testing.T) {
	seed := testseed.Seed(t)
	s := NewSim()
	var fail atomic.Bool
	failSyncs(s, &fail)
	r, err := s.Create("f", Header{Kind: KindBitmap, DataPages: 4, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	fill(r, 1, 7)
	r.Touch(WordsPerPage, 2*WordsPerPage)
	if _, err := r.UpdateSums(false); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := r.Sync(); !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	fail.Store(false)
	// The writer after the failure rewrites the data page (as the
	// store's RESYNC does) and recomputes its checksum: the same value.
	r.Touch(WordsPerPage, 2*WordsPerPage)
	if n, err := r.UpdateSums(false); err != nil || n != 1 {
		t.Fatalf("UpdateSums: %d, %v", n, err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Crash(rand.New(rand.NewPCG(seed, 1)))
	r, err = s.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	if c := r.CheckPage(1); !c.HasSum || c.Stored != c.Computed || c.Stored == 0 {
		t.Fatalf("seed %d: after the crash, page 1: %+v: want its checksum on disk", seed, c)
	}
}

// TestSimStickyLossAndEvict checks SetStickyLoss and Evict: a page a
// failed Sync lost stays lost however it is written again, until Evict
// gives it its disk image; a page written after that reaches the disk.
// Evict leaves a file some region maps alone (ErrBusy), and writes its
// dirty pages; an injected Evict failure (OpEvict) drops nothing and loses
// the dirty pages, as a failed fdatasync does.
func TestSimStickyLossAndEvict(t *testing.T) {
	const pages = 3
	s := NewSim()
	s.SetStickyLoss(true)
	var fail atomic.Bool
	failSyncs(s, &fail)
	r, err := s.Create("f", Header{Kind: KindBitmap, DataPages: pages, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	for pg := 0; pg < pages; pg++ {
		fill(r, pg, 1)
	}
	r.SetStamp(10)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	fill(r, 0, 2)
	fill(r, 1, 3)
	r.SetStamp(20)
	fail.Store(true)
	if err := r.Sync(); !errors.Is(err, errInjected) {
		t.Fatalf("Sync: %v, want the injected error", err)
	}
	fail.Store(false)
	// Written again every way: a Touch, a change, the stamp.
	r.Touch(0, WordsPerPage)
	fill(r, 1, 4)
	fill(r, 2, 5) // not lost: dirty
	r.SetStamp(30)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Evict("f"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Evict of a mapped file: %v, want ErrBusy", err)
	}
	if got := atomic.LoadUint64(&r.Words()[0]); got != 2 {
		t.Fatalf("Evict dropped the pages of a mapped file: page 0 holds %d, want 2", got)
	}
	fill(r, 2, 9) // dirty when the eviction fails
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// An injected failure drops nothing: the lost pages keep their
	// memory images ([2 4 9]), and stay lost; the dirty page is lost too,
	// as a failed fdatasync loses it.
	s.SetInjector(func(op Op, _ string) error {
		if op == OpEvict {
			return errInjected
		}
		return nil
	})
	if err := s.Evict("f"); !errors.Is(err, errInjected) {
		t.Fatalf("Evict with an injected failure: %v, want the injected error", err)
	}
	if got := pagesOf(t, s, "f"); [pages]uint64(got) != [pages]uint64{2, 4, 9} {
		t.Fatalf("after a failed Evict: pages %v, want [2 4 9] (nothing dropped)", got)
	}
	s.SetInjector(nil)
	if err := s.Evict("f"); err != nil {
		t.Fatal(err)
	}
	r, err = s.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	if got := pagesOf(t, s, "f"); [pages]uint64(got) != [pages]uint64{1, 1, 5} {
		t.Fatalf("after Evict: pages %v, want [1 1 5] (the lost pages' disk images, the last one lost by the failed Evict)", got)
	}
	if got := r.Stamp(); got != 30 {
		t.Fatalf("after Evict: stamp %d, want 30 (set again and synced after the failed Sync)", got)
	}
	fill(r, 0, 6)
	r.SetStamp(40)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Crash(rand.New(rand.NewPCG(1, 2)))
	if got := pagesOf(t, s, "f"); [pages]uint64(got) != [pages]uint64{6, 1, 5} {
		t.Fatalf("a page written after Evict: pages %v after a crash, want [6 1 5]", got)
	}
	if r, err = s.Open("f"); err != nil {
		t.Fatal(err)
	} else if got := r.Stamp(); got != 40 {
		t.Fatalf("a stamp set after Evict: %d after a crash, want 40", got)
	}
	if err := s.Evict("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Evict of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestSimStickyChecksumsStayLost is TestSimChecksumsRewrittenAfterFailedSync
// under SetStickyLoss: a checksum page a failed Sync lost stays lost when
// UpdateSums stores its checksums again and a later Sync succeeds, as a
// Touch leaves a data page lost (ext4's unwritten extents: see Evicter),
// so a power loss then leaves the page's checksum off the disk; once Evict
// has dropped the file's pages, the same update and Sync reach the disk.
func TestSimStickyChecksumsStayLost(t *testing.T) {
	seed := testseed.Seed(t)
	s := NewSim()
	s.SetStickyLoss(true)
	var fail atomic.Bool
	failSyncs(s, &fail)
	r, err := s.Create("f", Header{Kind: KindBitmap, DataPages: 4, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	fill(r, 1, 7)
	r.Touch(WordsPerPage, 2*WordsPerPage)
	if _, err := r.UpdateSums(false); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := r.Sync(); !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	fail.Store(false)
	r.Touch(WordsPerPage, 2*WordsPerPage)
	if n, err := r.UpdateSums(false); err != nil || n != 1 {
		t.Fatalf("UpdateSums: %d, %v", n, err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Crash(rand.New(rand.NewPCG(seed, 1)))
	if r, err = s.Open("f"); err != nil {
		t.Fatal(err)
	}
	if c := r.CheckPage(1); c.HasSum && c.Stored != 0 {
		t.Fatalf("seed %d: after the crash, page 1: %+v: want no checksum on disk (its page stays lost)", seed, c)
	}
	// Dropped, then written again: durable.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Evict("f"); err != nil {
		t.Fatal(err)
	}
	if r, err = s.Open("f"); err != nil {
		t.Fatal(err)
	}
	fill(r, 1, 7)
	r.Touch(WordsPerPage, 2*WordsPerPage)
	if n, err := r.UpdateSums(false); err != nil || n != 1 {
		t.Fatalf("UpdateSums after Evict: %d, %v", n, err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Crash(rand.New(rand.NewPCG(seed, 2)))
	if r, err = s.Open("f"); err != nil {
		t.Fatal(err)
	}
	if c := r.CheckPage(1); !c.HasSum || c.Stored != c.Computed || c.Stored == 0 {
		t.Fatalf("seed %d: after Evict, a rewrite and a crash, page 1: %+v: want its checksum on disk", seed, c)
	}
}
