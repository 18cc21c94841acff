package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
)

// cleanStore builds a store with one filter of each kind, each over
// several data pages, and closes it cleanly: every data page then matches
// its checksum.
func cleanStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	// SyncInterval: the same records and files after Close, without an
	// fdatasync for each of the 12,000 changes (under the race detector
	// the store took seconds to make, four times in one test).
	s, err := store.Open(dir, &store.Options{Sync: store.SyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateBloom("b", store.BloomConfig{Capacity: 20000, ErrorRate: 0.01, NonScaling: true})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.CreateCounting("n", store.BloomConfig{Capacity: 5000, ErrorRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 10000})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.CreateBitmap("m", 1<<17)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 4000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%05d", i)
	}
	if _, err := b.AddMany(keys); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if err := n.Add(k); err != nil {
			t.Fatal(err)
		}
		if err := c.Add(k); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Set(uint64(i) * 31); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestVerifyDataChecksums damages one data page of each kind's file in
// each way a disk can (a flipped bit, a zeroed 64-byte block, a page cut
// off the end, a wrong stored checksum): verify reports it with the file
// and offset and exits 1. The undamaged store verifies every page.
func TestVerifyDataChecksums(t *testing.T) {
	clean := cleanStore(t)
	r := mustRun(t, 0, "verify", clean)
	if !strings.Contains(r.stdout, "data pages matched their checksums: 0 problems, 0 notes") || strings.Contains(r.stdout, "changed after") {
		t.Fatalf("clean store:\n%s", r)
	}
	damages := []struct {
		name string
		do   func(t *testing.T, path string, b []byte, h mmapbits.Header, page uint64) (want string)
	}{
		{"bit flip", func(t *testing.T, path string, b []byte, h mmapbits.Header, p uint64) string {
			off := mmapbits.HeaderSize + int(p)*mmapbits.PageSize
			b[off+1000] ^= 0x04
			write(t, path, b)
			return fmt.Sprintf("offset %d: data page %d of filter", off, p)
		}},
		{"zeroed block", func(t *testing.T, path string, b []byte, h mmapbits.Header, p uint64) string {
			off := mmapbits.HeaderSize + int(p)*mmapbits.PageSize
			clear(b[off+128 : off+192])
			write(t, path, b)
			return fmt.Sprintf("offset %d: data page %d of filter", off, p)
		}},
		{"wrong page checksum", func(t *testing.T, path string, b []byte, h mmapbits.Header, p uint64) string {
			off := h.SumOffset(p)
			binary.LittleEndian.PutUint32(b[off:], binary.LittleEndian.Uint32(b[off:])^0x100)
			write(t, path, b)
			return fmt.Sprintf("offset %d: data page %d of filter", mmapbits.HeaderSize+int(p)*mmapbits.PageSize, p)
		}},
		{"truncated page", func(t *testing.T, path string, b []byte, h mmapbits.Header, p uint64) string {
			write(t, path, b[:len(b)-mmapbits.PageSize/2])
			return "bad size"
		}},
	}
	for _, name := range []string{"b", "n", "c", "m"} {
		for _, d := range damages {
			t.Run(name+"/"+d.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "store")
				if err := copyDir(clean, dir); err != nil {
					t.Fatal(err)
				}
				path := layerFile(t, dir, name, 0)
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				h, _, err := mmapbits.DecodeHeader(b)
				if err != nil {
					t.Fatal(err)
				}
				if h.DataPages < 2 {
					t.Fatalf("filter %s has %d data pages; the test wants several", name, h.DataPages)
				}
				want := d.do(t, path, b, h, h.DataPages-2)
				r := runCLI("verify", dir)
				rel := relPath(dir, path)
				if r.code != 1 || !strings.Contains(r.stdout, "problem  "+rel+" ") || !strings.Contains(r.stdout, want) {
					t.Fatalf("verify: want exit 1 and a problem in %s with %q, got:\n%s", rel, want, r)
				}
			})
		}
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
