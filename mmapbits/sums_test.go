package mmapbits

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/crc"
)

// TestPageSumVectors pins the checksum function: a change here is a
// file-format change.
func TestPageSumVectors(t *testing.T) {
	page := make([]uint64, WordsPerPage)
	if got := PageSum(page); got != 0 {
		t.Fatalf("PageSum(zero page) = %08x, want 0 (masked)", got)
	}
	for i := range page {
		page[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	b := make([]byte, PageSize)
	for i, w := range page {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	want := crc.Checksum(b) ^ crc.Checksum(make([]byte, PageSize))
	if got := PageSum(page); got != want || got != 0xba9e62f6 {
		t.Fatalf("PageSum = %08x, want %08x and the pinned ba9e62f6", got, want)
	}
}

// TestSumRegionGolden pins the layout of a version 3 file's checksum
// pages: after the data pages, one little-endian uint32 per data page, in
// page order, masked so that zero means a zeroed page.
func TestSumRegionGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.flt")
	h := Header{Kind: KindBitmap, DataPages: 3, Size: 3 * PageSize * 8, Capacity: 3 * PageSize * 8, StoreID: 1}
	r, err := OS{}.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	w := r.Words()
	w[0] = 1                         // page 0
	w[2*WordsPerPage+5] = 0xdeadbeef // page 2; page 1 stays zero
	r.Touch(0, 1)
	r.Touch(2*WordsPerPage+5, 2*WordsPerPage+6)
	if n, err := r.UpdateSums(false); err != nil || n != 2 {
		t.Fatalf("UpdateSums = %d, %v; want 2 pages", n, err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 5*PageSize || h.FileSize() != 5*PageSize || h.SumOffset(2) != 4*PageSize+8 {
		t.Fatalf("file is %d bytes (FileSize %d, SumOffset(2) %d): want header, 3 data pages, 1 checksum page",
			len(b), h.FileSize(), h.SumOffset(2))
	}
	sums := b[4*PageSize:]
	const want = "5eb6a5c2" + "00000000" + "c88389a1"
	if got := hex.EncodeToString(sums[:12]); got != want {
		t.Fatalf("checksum page starts %s, want %s", got, want)
	}
	for i, c := range sums[12:] {
		if c != 0 {
			t.Fatalf("checksum page byte %d = %x, want 0", 12+i, c)
		}
	}
	for p := range 3 {
		page := make([]uint64, WordsPerPage)
		for i := range page {
			page[i] = binary.LittleEndian.Uint64(b[HeaderSize+p*PageSize+8*i:])
		}
		if got, stored := PageSum(page), binary.LittleEndian.Uint32(sums[4*p:]); got != stored {
			t.Fatalf("page %d: PageSum %08x, stored %08x", p, got, stored)
		}
	}
}

// TestSumsTrackTouchedPages checks that UpdateSums computes only pages
// touched since it last ran, that CheckPage finds a change no Touch
// declared, and that InvalidateSums waits for a full update.
func TestSumsTrackTouchedPages(t *testing.T) {
	for _, m := range []struct {
		name string
		m    Mapper
		dir  string
	}{{"os", OS{}, t.TempDir()}, {"sim", NewSim(), "/sim"}} {
		t.Run(m.name, func(t *testing.T) {
			const pages = 2000 // two checksum pages
			h := Header{Kind: KindBitmap, DataPages: pages, Size: pages * PageSize * 8, Capacity: pages * PageSize * 8}
			path := filepath.Join(m.dir, "t.flt")
			r, err := m.m.Create(path, h)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Header().SumPages() != 2 {
				t.Fatalf("SumPages = %d, want 2", r.Header().SumPages())
			}
			for p := range uint64(pages) {
				if c := r.CheckPage(p); !c.HasSum || c.Stale || !pageOK(c) {
					t.Fatalf("new file, page %d: %+v", p, c)
				}
			}
			w := r.Words()
			w[1500*WordsPerPage+3] = 7
			r.Touch(1500*WordsPerPage+3, 1500*WordsPerPage+4)
			if c := r.CheckPage(1500); !c.Stale || !pageOK(c) {
				t.Fatalf("touched page: %+v, want stale", c)
			}
			if n, _ := r.UpdateSums(false); n != 1 {
				t.Fatalf("UpdateSums computed %d pages, want 1", n)
			}
			if c := r.CheckPage(1500); c.Stale || !pageOK(c) || c.Stored == 0 {
				t.Fatalf("after UpdateSums: %+v", c)
			}
			if n, _ := r.UpdateSums(false); n != 0 {
				t.Fatalf("second UpdateSums computed %d pages, want 0", n)
			}
			// A write nobody declared: the checksum catches it.
			w[9*WordsPerPage] ^= 1 << 40
			if c := r.CheckPage(9); c.Stale || pageOK(c) {
				t.Fatalf("undeclared change: %+v, want a mismatch", c)
			}
			w[9*WordsPerPage] ^= 1 << 40
			r.InvalidateSums()
			w[10*WordsPerPage] = 1 // a write a dead process made
			if c := r.CheckPage(10); !c.Stale {
				t.Fatalf("after InvalidateSums: %+v, want stale", c)
			}
			if n, _ := r.UpdateSums(false); n != 0 {
				t.Fatalf("UpdateSums(false) after InvalidateSums computed %d pages, want 0", n)
			}
			if n, _ := r.UpdateSums(true); n != pages {
				t.Fatalf("UpdateSums(true) computed %d pages, want %d", n, pages)
			}
			for p := range uint64(pages) {
				if c := r.CheckPage(p); c.Stale || !pageOK(c) {
					t.Fatalf("after the full update, page %d: %+v", p, c)
				}
			}
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			ro, err := m.m.OpenRead(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if c := ro.CheckPage(10); !c.HasSum || !pageOK(c) || c.Stored == 0 {
				t.Fatalf("read-only: %+v", c)
			}
			if _, err := ro.UpdateSums(false); err == nil {
				t.Fatal("UpdateSums on a read-only region succeeded")
			}
		})
	}
}

// TestVersion2FileHasNoSums checks that a version 2 file (no checksum
// pages) opens, maps its data, and reports no checksums.
func TestVersion2FileHasNoSums(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.flt")
	h := Header{Kind: KindBloom, DataPages: 2, Size: 128, K: 7, Capacity: 100, ErrorRate: 0.01, StoreID: 5}
	b := appendV2(h)
	b = append(b, make([]byte, 2*PageSize)...)
	binary.LittleEndian.PutUint64(b[HeaderSize+8:], 42)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OS{}.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Header().Version != 2 || r.NumWords() != 2*WordsPerPage || r.Words()[1] != 42 {
		t.Fatalf("version %d, %d words, word 1 = %d", r.Header().Version, r.NumWords(), r.Words()[1])
	}
	if c := r.CheckPage(0); c.HasSum || !pageOK(c) {
		t.Fatalf("version 2 CheckPage = %+v, want no checksum", c)
	}
	r.Touch(0, 1)
	if n, err := r.UpdateSums(true); n != 0 || err != nil {
		t.Fatalf("UpdateSums on version 2 = %d, %v", n, err)
	}
}

// BenchmarkUpdateSums measures recomputing the checksums of 1000 touched
// pages in files of growing size (the cost must not grow with the file),
// and, for comparison, recomputing every page (full).
func BenchmarkUpdateSums(b *testing.B) {
	for _, pages := range []uint64{3_000, 30_000, 300_000} {
		h := Header{Kind: KindBitmap, DataPages: pages, Size: pages * PageSize * 8, Capacity: pages * PageSize * 8}
		r, err := OS{}.Create(filepath.Join(b.TempDir(), "b.flt"), h)
		if err != nil {
			b.Fatal(err)
		}
		w := r.Words()
		for i := range w { // fault every page in: measure checksums, not page faults
			w[i] = uint64(i)
		}
		b.Run(fmt.Sprintf("pages=%d/touched=1000", pages), func(b *testing.B) {
			for b.Loop() {
				for i := range uint64(1000) {
					p := (i * 7919) % pages
					r.Touch(p*WordsPerPage, p*WordsPerPage+1)
				}
				if n, _ := r.UpdateSums(false); n == 0 {
					b.Fatal("nothing computed")
				}
			}
		})
		b.Run(fmt.Sprintf("pages=%d/full", pages), func(b *testing.B) {
			for b.Loop() {
				r.InvalidateSums()
				if n, _ := r.UpdateSums(true); n != int(pages) {
					b.Fatalf("computed %d pages", n)
				}
			}
		})
		r.Close()
	}
}

// pageOK: the page matches its checksum, or is not expected to.
func pageOK(c PageCheck) bool { return !c.HasSum || c.Stale || c.Stored == c.Computed }
