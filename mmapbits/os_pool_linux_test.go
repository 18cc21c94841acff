package mmapbits

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/filterstore/filterstore/internal/smaps"
)

// forgetPool empties the placeholder pool, so that a test sees only the
// ranges it closes. The ranges forgotten stay mapped (leaked), which is
// always safe.
func forgetPool() {
	placeholders.mu.Lock()
	placeholders.spans = nil
	placeholders.mu.Unlock()
}

// poolSpans returns a copy of the pool's ranges.
func poolSpans() []span {
	placeholders.mu.Lock()
	defer placeholders.mu.Unlock()
	return slices.Clone(placeholders.spans)
}

// addrOf returns the address of r's mapping.
func addrOf(r Region) uintptr { return uintptr(unsafe.Pointer(&r.(*fileRegion).mem[0])) }

// newFileOfSize creates a bitmap region file of exactly size bytes in dir
// and returns its path, closed.
func newFileOfSize(t *testing.T, dir string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprint("f", size))
	r, err := OS{}.Create(p, headerOfSize(t, size))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPoolReuseAlignsAndSplits: mappings made after a Close take the
// closed range: one that wants huge pages at a 2 MiB-aligned address
// inside it, a small one at the start of what is left; the leftovers stay
// in the pool (mapped, readable placeholder pages), merge back as the
// mappings close, and a mapping no pooled range can hold gets fresh
// address space. Each live mapping keeps its own words.
func TestPoolReuseAlignsAndSplits(t *testing.T) {
	const mib = 1 << 20
	dir := t.TempDir()
	p7, p3, p2 := newFileOfSize(t, dir, 7*mib), newFileOfSize(t, dir, 3*mib), newFileOfSize(t, dir, 2*mib)
	pSmall := newFileOfSize(t, dir, 100*PageSize)
	p3b := filepath.Join(dir, "other3")
	r, err := OS{}.Create(p3b, headerOfSize(t, 3*mib))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	forgetPool()
	defer forgetPool()

	r7, err := OS{}.Open(p7)
	if err != nil {
		t.Fatal(err)
	}
	a := addrOf(r7)
	if a%hugePage != 0 {
		t.Fatalf("7 MiB region at %#x: not 2 MiB-aligned", a)
	}
	// A fresh mapping takes its size class (8 MiB for 7 MiB): the
	// class's rest is pooled at once.
	class := sizeClass(7 * mib)
	if class != 8*mib {
		t.Fatalf("sizeClass(7 MiB) = %d MiB", class/mib)
	}
	if got, want := poolSpans(), []span{{a + 7*mib, mib}}; !slices.Equal(got, want) {
		t.Fatalf("pool with the 7 MiB region open %v, want its class's rest %v", got, want)
	}
	if err := r7.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := poolSpans(), []span{{a, class}}; !slices.Equal(got, want) {
		t.Fatalf("pool after Close %v, want %v", got, want)
	}

	open := func(m OS, p string) Region {
		t.Helper()
		r, err := m.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r3 := open(OS{}, p3)                   // huge: at a
	rs := open(OS{}, pSmall)               // small: at the range's end, a+8 MiB-100 pages
	r2 := open(OS{}, p2)                   // huge: at the next 2 MiB boundary, a+4 MiB
	r3s := open(OS{SmallPages: true}, p3b) // no pooled range holds 3 MiB: fresh
	live := []Region{r3, rs, r2, r3s}
	if got := addrOf(r3); got != a {
		t.Errorf("3 MiB region at %#x, want %#x (the closed range's start, aligned)", got, a)
	}
	smallAt := a + class - 100*PageSize
	if got := addrOf(rs); got != smallAt {
		t.Errorf("small region at %#x, want %#x (at the end of the range, whose aligned start stays whole)", got, smallAt)
	}
	if got := addrOf(r2); got != a+4*mib {
		t.Errorf("2 MiB region at %#x, want %#x (2 MiB-aligned, past the 3 MiB one)", got, a+4*mib)
	}
	if got := addrOf(r3s); got >= a && got < a+7*mib {
		t.Errorf("SmallPages 3 MiB region at %#x, inside the pooled range", got)
	}
	// The leftovers of the pooled range, and the rest of the fresh 3 MiB
	// mapping's class (4 MiB).
	want := []span{{a + 3*mib, mib}, {a + 6*mib, smallAt - (a + 6*mib)}, {addrOf(r3s) + 3*mib, sizeClass(3*mib) - 3*mib}}
	slices.SortFunc(want, func(x, y span) int { return cmp.Compare(x.addr, y.addr) })
	if got := poolSpans(); !slices.Equal(got, want) {
		t.Fatalf("pool %v, want the leftovers %v", got, want)
	}
	for _, s := range want {
		m, err := smaps.Containing(s.addr)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path != "" || m.Start > s.addr || m.End < s.end() {
			t.Errorf("leftover %#x-%#x: mapped as %#x-%#x %q, want anonymous placeholder pages", s.addr, s.end(), m.Start, m.End, m.Path)
		}
		if v := *(*byte)(addrPtr(s.addr)); v != 0 { // readable, zero
			t.Errorf("leftover %#x reads %d", s.addr, v)
		}
	}
	for _, c := range []struct {
		r    Region
		flag string
	}{{r3, "hg"}, {r2, "hg"}, {r3s, "nh"}} {
		if m := vmFlags(t, addrOf(c.r)); !m.Has(c.flag) {
			t.Errorf("region at %#x: VmFlags %v, want %s", addrOf(c.r), m.Flags, c.flag)
		}
	}
	// A distinct pattern in every live mapping, then every one checked:
	// no two overlap.
	for j, r := range live {
		w := r.Words()
		for i := range w {
			atomic.StoreUint64(&w[i], uint64(j)<<56|uint64(i))
		}
	}
	for j, r := range live {
		for i, v := range r.Words() {
			if want := uint64(j)<<56 | uint64(i); v != want {
				t.Fatalf("mapping %d word %d: %#x, want %#x", j, i, v, want)
			}
		}
	}
	for _, r := range live[:3] {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want = []span{{a, class}, {addrOf(r3s) + 3*mib, sizeClass(3*mib) - 3*mib}}
	slices.SortFunc(want, func(x, y span) int { return cmp.Compare(x.addr, y.addr) })
	if got := poolSpans(); !slices.Equal(got, want) {
		t.Fatalf("pool after closing what it held %v, want it merged back to %v", got, want)
	}
	if err := r3s.Close(); err != nil {
		t.Fatal(err)
	}
	// The files hold what was written through the pooled mappings.
	for j, p := range []string{p3, pSmall, p2, p3b} {
		r, err := OS{}.OpenRead(p)
		if err != nil {
			t.Fatal(err)
		}
		if want, v := uint64(j)<<56|7, r.Words()[7]; v != want {
			t.Errorf("%s word 7: %#x, want %#x", filepath.Base(p), v, want)
		}
		r.Close()
	}
}

// TestReaderOfClosedRangeNeverFaults: goroutines keep reading a region's
// words while it is closed and while other files are mapped, written and
// closed over its range: they never fault. (What they read after Close is
// zeros or any bytes of the other files, headers included: not checked.)
func TestReaderOfClosedRangeNeverFaults(t *testing.T) {
	const mib = 1 << 20
	rounds := 200
	if testing.Short() {
		rounds = 30
	}
	dir := t.TempDir()
	defer forgetPool()
	var paths []string
	for _, size := range []int64{100 * PageSize, 2 * mib, 3 * mib} {
		paths = append(paths, newFileOfSize(t, dir, size))
	}
	r, err := OS{}.Create(filepath.Join(dir, "victim"), headerOfSize(t, 7*mib))
	if err != nil {
		t.Fatal(err)
	}
	w := r.Words()
	for i := range w {
		atomic.StoreUint64(&w[i], 1)
	}
	lo, hi := addrOf(r), addrOf(r)+7*mib
	forgetPool() // the victim's range, once closed, is the only one
	var stop atomic.Bool
	var reads atomic.Int64
	var other atomic.Int64
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(0)
			for i := g; !stop.Load(); i = (i + 4099) % len(w) {
				// 1: the victim's; 0: placeholder pages or a file's zeros.
				if v := atomic.LoadUint64(&w[i]); v > 1 {
					other.Add(1)
				}
				n++
			}
			reads.Add(n)
		}()
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	reused := 0
	for round := range rounds {
		var open []Region
		for j, p := range paths {
			m := OS{SmallPages: (round+j)%2 == 1}
			o, err := m.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			if a := addrOf(o); a >= lo && a < hi {
				reused++
			}
			ow := o.Words()
			for i := 0; i < len(ow); i += 97 {
				atomic.StoreUint64(&ow[i], 2<<56|uint64(round))
			}
			open = append(open, o)
		}
		for _, o := range open {
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if reused == 0 {
		t.Errorf("no mapping reused the closed range")
	}
	t.Logf("%d reads (%d of other files' bytes), %d of %d mappings in the closed range",
		reads.Load(), other.Load(), reused, rounds*len(paths))
}
