//go:build filterstore_testhooks

package store

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
)

// Import whose final catalog commit (commitImport) returns ENOSPC: the
// store goes on; adds to another filter; Close; reopen.
func TestLandedImportCommitENOSPCThenClose(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(landedName(landed), func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
			a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
			must(t, err)
			for i := range 50 {
				must(t, second(a.Add(key(i))))
			}
			var buf bytes.Buffer
			must(t, second(a.WriteTo(&buf)))
			f := armCatalogFault(t, dir, "(*Store).commitImport", 1, syscall.ENOSPC, landed)
			err = s.Import("q", bytes.NewReader(buf.Bytes()))
			f.disarm()
			f.mustHaveFired(t)
			if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
				t.Fatalf("import: %v, want ENOSPC and the store going on", err)
			}
			for i := 50; i < 100; i++ {
				must(t, second(a.Add(key(i))))
			}
			must(t, s.Close())
			s, err = Open(dir, nil)
			if err != nil {
				t.Fatalf("reopen after Close: %v", err)
			}
			defer s.Close()
			a, err = s.Bloom("a")
			must(t, err)
			for i := range 100 {
				if !a.Has(key(i)) {
					t.Fatalf("acknowledged key %d absent", i)
				}
			}
		})
	}
}

// Import whose id reservation (reserveID) returns ENOSPC, then a Create
// and an Import that succeed, Close, reopen; and a crash instead.
func TestLandedImportReserveENOSPC(t *testing.T) {
	for _, landed := range []bool{true, false} {
		for _, crash := range []bool{false, true} {
			name := landedName(landed)
			if crash {
				name += "/crash"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
				a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
				must(t, err)
				for i := range 50 {
					must(t, second(a.Add(key(i))))
				}
				var buf bytes.Buffer
				must(t, second(a.WriteTo(&buf)))
				f := armCatalogFault(t, dir, "(*Store).reserveID", 1, syscall.ENOSPC, landed)
				err = s.Import("q", bytes.NewReader(buf.Bytes()))
				f.disarm()
				f.mustHaveFired(t)
				if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
					t.Fatalf("import: %v", err)
				}
				c, err := s.CreateBloom("c", BloomConfig{Capacity: 1000})
				must(t, err)
				must(t, second(c.Add(key(7))))
				must(t, s.Import("q", bytes.NewReader(buf.Bytes())))
				// A create that fails too (not landed), after the reserve.
				g := armCatalogFault(t, dir, "(*Store).create", 1, syscall.ENOSPC, false)
				_, err = s.CreateBloom("d", BloomConfig{Capacity: 1000})
				g.disarm()
				g.mustHaveFired(t)
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("create d: %v", err)
				}
				must(t, second(s.CreateBloom("e", BloomConfig{Capacity: 1000})))
				if crash {
					s.abandonForTest()
				} else {
					must(t, s.Close())
				}
				s, err = Open(dir, nil)
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer s.Close()
				for _, n := range []string{"a", "q"} {
					h, err := s.Bloom(n)
					must(t, err)
					for i := range 50 {
						if !h.Has(key(i)) {
							t.Fatalf("%s: key %d absent", n, i)
						}
					}
				}
				c, err = s.Bloom("c")
				must(t, err)
				if !c.Has(key(7)) {
					t.Fatal("c: key 7 absent")
				}
				must(t, second(s.Bloom("e")))
				must(t, second(s.CreateBloom("f", BloomConfig{Capacity: 10})))
			})
		}
	}
}
