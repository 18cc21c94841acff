package store

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadFaults returns the page faults (minor and major) of the calling
// thread so far.
func threadFaults(t *testing.T) int64 {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return ru.Minflt + ru.Majflt
}

// faultsOf returns the page faults the calling thread took running fn.
// The caller holds its thread (runtime.LockOSThread).
func faultsOf(t *testing.T, fn func()) int64 {
	t.Helper()
	before := threadFaults(t)
	fn()
	return threadFaults(t) - before
}

// TestInfoReadsNoData: Info and List answer from the counts the store
// keeps in memory, never from a filter's data pages. The filter (18 MB of
// data) is reopened, so none of its pages is mapped in this process yet:
// every page a call reads costs a page fault of the calling thread.
// Fill, which reads every data word, must fault on the pages; Info and
// List must not. A first Info of a small filter warms the code, stack and
// heap those calls use. (Run on the code before Info stopped reading the
// data: Info took 3866 faults on 4733 pages, List 298.) Every store maps
// with small pages: a fault on a huge page, or on a large folio a store
// with huge pages left in the page cache, maps hundreds of pages at once,
// too coarse to count the pages a call reads.
func TestInfoReadsNoData(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{SmallPages: true})
	f, err := s.CreateBloom("big", BloomConfig{Capacity: 1e7, ErrorRate: 0.001, NonScaling: true})
	must(t, err)
	_, err = f.AddMany(benchKeyBatch(0, 1000))
	must(t, err)
	_, err = s.CreateBloom("small", BloomConfig{Capacity: 100})
	must(t, err)
	must(t, s.Close())

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Each call gets a fresh read-only open: a new mapping of the filter.
	for _, c := range []struct {
		name string
		call func(s *Store, f *Bloom) error
	}{
		{"Info", func(s *Store, f *Bloom) error {
			in, err := f.Info()
			if err == nil && in.Items != 1000 {
				t.Errorf("Info: %d items, want 1000", in.Items)
			}
			return err
		}},
		{"List", func(s *Store, f *Bloom) error {
			l, err := s.List()
			if err == nil && (len(l) != 2 || l[0].Items != 1000) {
				t.Errorf("List: %+v, want big with 1000 items, and small", l)
			}
			return err
		}},
	} {
		s := mustOpen(t, dir, &Options{ReadOnly: true, SmallPages: true})
		f, err := s.Bloom("big")
		must(t, err)
		small, err := s.Bloom("small")
		must(t, err)
		mustInfo(t, small) // warms the code, stack and heap the calls use
		n := faultsOf(t, func() { must(t, c.call(s, f)) })
		t.Logf("%s: %d page faults", c.name, n)
		if n > 16 {
			t.Errorf("%s took %d page faults on a filter of %d pages; want none from its data", c.name, n, mustInfo(t, f).SizeBytes/4096)
		}
		must(t, s.Close())
	}

	// The seam: Fill reads every data page of a fresh mapping, and each
	// fault maps at most a few pages (fault-around: 16 by default).
	s = mustOpen(t, dir, &Options{ReadOnly: true, SmallPages: true})
	defer s.Close()
	f, err = s.Bloom("big")
	must(t, err)
	pages := mustInfo(t, f).SizeBytes / 4096
	n := faultsOf(t, func() { must(t, second(f.Fill())) })
	t.Logf("Fill: %d page faults on %d pages", n, pages)
	if n < pages/32 {
		t.Errorf("Fill took %d page faults on a filter of %d pages; the count misses its reads", n, pages)
	}
}
