package mmapbits

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/filterstore/filterstore/internal/smaps"
)

// vmFlags returns the VmFlags of the mapping of this process that starts
// at addr.
func vmFlags(t *testing.T, addr uintptr) smaps.Mapping {
	t.Helper()
	m, err := smaps.Containing(addr)
	if err != nil {
		t.Fatal(err)
	}
	if m.Start != addr {
		t.Fatalf("the mapping holding %#x starts at %#x", addr, m.Start)
	}
	return m
}

// TestMapSharedHugePages: a region of 2 MiB or more, created, opened or
// opened read-only by OS, is mapped at a 2 MiB-aligned address and advised
// MADV_HUGEPAGE ("hg" in its VmFlags), so the kernel can map its page
// cache folios with 2 MiB entries; with SmallPages it is advised
// MADV_NOHUGEPAGE ("nh") instead; a region under 2 MiB gets neither. The
// words read and write the same either way.
func TestMapSharedHugePages(t *testing.T) {
	for _, c := range []struct {
		name  string
		m     OS
		pages uint64
		flag  string // advice flag its VmFlags must have, "" for neither
	}{
		{"default", OS{}, 1024, "hg"},
		{"small", OS{SmallPages: true}, 1024, "nh"},
		{"under-2MiB", OS{}, 100, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			h := Header{Kind: KindBitmap, DataPages: c.pages, Size: c.pages * PageSize * 8, Capacity: c.pages * PageSize * 8}
			r, err := c.m.Create(path, h)
			if err != nil {
				t.Fatal(err)
			}
			w := r.Words()
			for i := range w {
				w[i] = uint64(i)
			}
			r.Touch(0, uint64(len(w)))
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			check := func(what string, r Region) {
				t.Helper()
				fr := r.(*fileRegion)
				addr := uintptr(unsafe.Pointer(&fr.mem[0]))
				m := vmFlags(t, addr)
				flags, has := m.Flags, m.Has
				switch c.flag {
				case "hg":
					if addr%hugePage != 0 {
						t.Errorf("%s: mapped at %#x, not 2 MiB-aligned", what, addr)
					}
					if !has("hg") || has("nh") {
						t.Errorf("%s: VmFlags %v: want hg (MADV_HUGEPAGE) and not nh", what, flags)
					}
				case "nh":
					if !has("nh") || has("hg") {
						t.Errorf("%s: VmFlags %v: want nh (MADV_NOHUGEPAGE) and not hg", what, flags)
					}
				default:
					if has("hg") || has("nh") {
						t.Errorf("%s: VmFlags %v: want neither hg nor nh", what, flags)
					}
				}
				for i, v := range r.Words() {
					if v != uint64(i) {
						t.Fatalf("%s: word %d = %d, want %d", what, i, v, i)
					}
				}
			}
			check("Create", r)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			for _, open := range []struct {
				what string
				fn   func(string) (Region, error)
			}{{"Open", c.m.Open}, {"OpenRead", c.m.OpenRead}} {
				r, err := open.fn(path)
				if err != nil {
					t.Fatal(err)
				}
				check(open.what, r)
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestHugeMappingCloseRacingReads: Close of a region mapped for huge
// pages, while goroutines read its words, replaces the mapping with zero
// pages in place, as it does for a small one: the readers neither fault
// nor read anything but the words written or zero.
func TestHugeMappingCloseRacingReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	const pages = 1024 // 4 MiB
	r, err := OS{}.Create(path, Header{Kind: KindBitmap, DataPages: pages, Size: pages * PageSize * 8, Capacity: pages * PageSize * 8})
	if err != nil {
		t.Fatal(err)
	}
	w := r.Words()
	for i := range w {
		w[i] = 1
	}
	if addr := uintptr(unsafe.Pointer(&r.(*fileRegion).mem[0])); addr%hugePage != 0 {
		t.Fatalf("mapped at %#x, not 2 MiB-aligned: not the huge-page path", addr)
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	var bad atomic.Int64
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; ; i = (i + 4099) % len(w) {
				if atomic.LoadUint64(&w[i]) > 1 {
					bad.Add(1)
				}
				if stop.Load() {
					return
				}
			}
		}(g)
	}
	time.Sleep(10 * time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range w {
		if v := atomic.LoadUint64(&w[i]); v != 0 {
			t.Fatalf("word %d after Close: %d, want 0 (the zero pages)", i, v)
		}
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d reads of words neither written nor zero", bad.Load())
	}
}
