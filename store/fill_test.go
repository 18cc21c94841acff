package store

import (
	"errors"
	"math"
	"testing"
)

// TestFill: each kind's Fill, cross-checked against the filter packages'
// own whole-filter counts (bloom.Filter.FillRatio, bloom.Counting's,
// cuckoo.Filter.Occupancy) layer by layer, and exact where the counts
// are known: a cuckoo filter's used slots are its items, a bitmap's are
// its set bits. Fill after Close or Drop is ErrClosed.
func TestFill(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 500, Expansion: 2})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 256, Expansion: 2})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
	must(t, err)
	m, err := s.CreateBitmap("m", 1000)
	must(t, err)
	for _, h := range []interface {
		Fill() (FillInfo, error)
	}{b, c, n, m} {
		if f, err := h.Fill(); err != nil || f.Used != 0 || f.Ratio != 0 || f.Total == 0 || len(f.Layers) != 1 {
			t.Fatalf("Fill of an empty %T = %+v, %v; want 0 used of a non-zero total", h, f, err)
		}
	}
	keys := make([][]byte, 2000)
	for i := range keys {
		keys[i] = key(i)
	}
	must(t, second(b.AddMany(keys)))
	must(t, second(c.AddMany(keys[:600])))
	bt := s.NewBatch()
	for i := range 100 {
		bt.CuckooDelete(c, key(i))
	}
	for i := range 300 {
		bt.CountingAdd(n, key(i%100))
		bt.BitmapSet(m, uint64(i*3))
	}
	must(t, second(bt.Commit()))

	fb, err := b.Fill()
	must(t, err)
	bl := *b.layers.Load()
	if len(fb.Layers) != len(bl) || len(bl) < 3 {
		t.Fatalf("bloom Fill has %d layers, the filter %d; want 3 or more", len(fb.Layers), len(bl))
	}
	for i, l := range bl {
		checkLayerFill(t, "bloom", i, fb.Layers[i], l.FillRatio())
	}
	checkSum(t, "bloom", fb)

	fc, err := c.Fill()
	must(t, err)
	cl := *c.layers.Load()
	if len(fc.Layers) != len(cl) || len(cl) < 2 {
		t.Fatalf("cuckoo Fill has %d layers, the filter %d; want 2 or more", len(fc.Layers), len(cl))
	}
	for i, l := range cl {
		checkLayerFill(t, "cuckoo", i, fc.Layers[i], l.Occupancy())
	}
	checkSum(t, "cuckoo", fc)
	if fc.Used != c.Items() || fc.Used != 500 {
		t.Errorf("cuckoo Fill: %d used slots, %d items; want 500 of each", fc.Used, c.Items())
	}

	fn, err := n.Fill()
	must(t, err)
	checkLayerFill(t, "counting", 0, fn.Layers[0], n.c.FillRatio())
	checkSum(t, "counting", fn)

	fm, err := m.Fill()
	must(t, err)
	if fm.Used != 300 || fm.Total != 1000 || fm.Ratio != 0.3 {
		t.Errorf("bitmap Fill = %+v; want 300 of 1000", fm)
	}

	must(t, s.Drop("n"))
	if _, err := n.Fill(); !errors.Is(err, ErrClosed) {
		t.Errorf("Fill of a dropped filter: %v, want ErrClosed", err)
	}
	must(t, s.Close())
	if _, err := b.Fill(); !errors.Is(err, ErrClosed) {
		t.Errorf("Fill after Close: %v, want ErrClosed", err)
	}
}

// checkLayerFill compares a layer's Fill with the ratio the filter
// package computes.
func checkLayerFill(t *testing.T, kind string, i int, lf LayerFill, want float64) {
	t.Helper()
	if lf.Total == 0 || lf.Used == 0 || lf.Used > lf.Total || math.Abs(lf.Ratio-want) > 1e-12 ||
		lf.Ratio != float64(lf.Used)/float64(lf.Total) {
		t.Errorf("%s layer %d: Fill %+v, the filter's own ratio %v", kind, i, lf, want)
	}
}

// checkSum checks that f's totals are the sums of its layers'.
func checkSum(t *testing.T, kind string, f FillInfo) {
	t.Helper()
	var used, total uint64
	for _, l := range f.Layers {
		used, total = used+l.Used, total+l.Total
	}
	if f.Used != used || f.Total != total || f.Ratio != float64(used)/float64(total) {
		t.Errorf("%s Fill %+v: totals are not the layers' sums (%d of %d)", kind, f, used, total)
	}
}
