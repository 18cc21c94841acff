package store

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/filterstore/filterstore/internal/smaps"
	"github.com/filterstore/filterstore/mmapbits"
)

// mappingFlags returns the VmFlags of the mapping of this process that
// contains addr, space-separated with a space at each end.
func mappingFlags(t *testing.T, addr uintptr) string {
	t.Helper()
	m, err := smaps.Containing(addr)
	if err != nil {
		t.Fatal(err)
	}
	return " " + strings.Join(m.Flags, " ") + " "
}

// wantHugeMapping fails t unless every region of b is 2 MiB or more and
// mapped for huge pages ("hg" in its VmFlags).
func wantHugeMapping(t *testing.T, b *filterBase) {
	t.Helper()
	for i, r := range b.regions {
		w := r.Words()
		if size := len(w) * 8; size < 2<<20 {
			t.Fatalf("%s layer %d has %d bytes of data, want 2 MiB or more", b.name(), i, size)
		}
		if flags := mappingFlags(t, uintptr(unsafe.Pointer(&w[0]))); !strings.Contains(flags, " hg ") {
			t.Fatalf("%s layer %d: VmFlags%s: want hg", b.name(), i, flags)
		}
	}
}

// TestSmallPagesOption: a store maps a filter file of 2 MiB or more with
// MADV_HUGEPAGE ("hg" in the mapping's VmFlags) by default, read-write
// and read-only, and with MADV_NOHUGEPAGE ("nh") under
// Options.SmallPages; a read-only store beside a live writer, both on huge
// pages, sees the writer's adds.
func TestSmallPagesOption(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	_, err := s.CreateBloom("b", BloomConfig{Capacity: 5_000_000, NonScaling: true})
	must(t, err)
	must(t, s.Close())
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{}, "hg"},
		{Options{ReadOnly: true}, "hg"},
		{Options{SmallPages: true}, "nh"},
		{Options{ReadOnly: true, SmallPages: true}, "nh"},
	} {
		s := mustOpen(t, dir, &c.opts)
		f, err := s.Bloom("b")
		must(t, err)
		w := f.b.regions[0].Words()
		if size := len(w) * 8; size < 2<<20 {
			t.Fatalf("the filter has %d bytes of data, want 2 MiB or more", size)
		}
		flags := mappingFlags(t, uintptr(unsafe.Pointer(&w[0])))
		other := map[string]string{"hg": "nh", "nh": "hg"}[c.want]
		if !strings.Contains(flags, " "+c.want+" ") || strings.Contains(flags, " "+other+" ") {
			t.Errorf("%+v: VmFlags%s: want %s, not %s", c.opts, flags, c.want, other)
		}
		if c.want == "hg" {
			if addr := uintptr(unsafe.Pointer(&w[0])) - mmapbits.HeaderSize; addr%(2<<20) != 0 {
				t.Errorf("%+v: the file is mapped at %#x, not 2 MiB-aligned", c.opts, addr)
			}
		}
		must(t, s.Close())
	}

	// A read-only store beside a live writer, both mapping the file for
	// huge pages, sees every add the writer made before the reader opened
	// and, through the shared mapping, those it makes afterwards.
	w := mustOpen(t, dir, nil)
	defer w.Close()
	wf, err := w.Bloom("b")
	must(t, err)
	_, err = wf.AddMany(benchKeyBatch(0, 1000))
	must(t, err)
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	defer r.Close()
	rf, err := r.Bloom("b")
	must(t, err)
	_, err = wf.AddMany(benchKeyBatch(1000, 1000))
	must(t, err)
	for i, k := range benchKeyBatch(0, 2000) {
		if !rf.Has(k) {
			t.Fatalf("the read-only store misses key %d of the writer's", i)
		}
	}
}
