package mmapbits

import (
	"slices"
	"testing"
)

// TestSpanPoolMerges: ranges added next to each other become one range,
// in address order, whatever order they come in; separate ranges stay
// apart.
func TestSpanPoolMerges(t *testing.T) {
	const pg = 4096
	var p spanPool
	p.put(10*pg, pg)
	p.put(12*pg, pg)
	p.put(20*pg, 2*pg)
	p.put(0, 0) // ignored
	if want := []span{{10 * pg, pg}, {12 * pg, pg}, {20 * pg, 2 * pg}}; !slices.Equal(p.spans, want) {
		t.Fatalf("spans %v, want %v", p.spans, want)
	}
	p.put(11*pg, pg) // joins both neighbours
	p.put(9*pg, pg)  // joins the left end
	p.put(22*pg, pg) // joins the right end of the last
	if want := []span{{9 * pg, 4 * pg}, {20 * pg, 3 * pg}}; !slices.Equal(p.spans, want) {
		t.Fatalf("spans %v, want %v", p.spans, want)
	}
	if n, r := p.total(); n != 7*pg || r != 2 {
		t.Fatalf("total %d bytes in %d ranges, want %d in 2", n, r, 7*pg)
	}
}

// TestSpanPoolOverlapPanics: a range added over one the pool holds is a
// bug (two owners of one range) and panics rather than let two mappings
// share it.
func TestSpanPoolOverlapPanics(t *testing.T) {
	const pg = 4096
	for _, c := range []span{{10 * pg, pg}, {9 * pg, 2 * pg}, {11 * pg, 3 * pg}, {8 * pg, 10 * pg}} {
		var p spanPool
		p.put(10*pg, 2*pg)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("put %v over [%#x, %#x): no panic", c, 10*pg, 12*pg)
				}
			}()
			p.put(c.addr, c.size)
		}()
	}
}

// TestSpanPoolTake: take picks the smallest range that holds the size at
// an aligned address, returns the aligned address inside it, and removes
// the range; a range whose aligned part is too small does not fit.
func TestSpanPoolTake(t *testing.T) {
	const mib = 1 << 20
	var p spanPool
	a := span{1 * mib, 5 * mib}      // aligned part [2, 6) MiB: 4 MiB
	b := span{256 * mib, 3 * mib}    // aligned already
	c := span{513 * mib, 3 * mib}    // aligned part [514, 516): 2 MiB only
	d := span{1025*mib + 4096, 4096} // one page
	for _, s := range []span{a, b, c, d} {
		p.put(s.addr, s.size)
	}
	s, at, ok := p.take(3*mib, hugePage)
	if !ok || s != b || at != b.addr {
		t.Fatalf("take 3 MiB aligned: %v at %#x %v, want %v at %#x", s, at, ok, b, b.addr)
	}
	s, at, ok = p.take(3*mib, hugePage)
	if !ok || s != a || at != 2*mib {
		t.Fatalf("take 3 MiB aligned again: %v at %#x %v, want %v at %#x", s, at, ok, a, 2*mib)
	}
	if s, at, ok = p.take(3*mib, hugePage); ok {
		t.Fatalf("take 3 MiB aligned from %v: got %v at %#x", p.spans, s, at)
	}
	// Unaligned: the smallest range that holds it, at its start.
	s, at, ok = p.take(4096, 4096)
	if !ok || s != d || at != d.addr {
		t.Fatalf("take a page: %v at %#x %v, want %v", s, at, ok, d)
	}
	s, at, ok = p.take(3*mib, 4096)
	if !ok || s != c || at != c.addr {
		t.Fatalf("take 3 MiB unaligned: %v at %#x %v, want %v", s, at, ok, c)
	}
	if len(p.spans) != 0 {
		t.Fatalf("left %v", p.spans)
	}
}
