//go:build filterstore_testhooks

package store

import (
	"errors"
	"syscall"
	"testing"
)

// Create whose catalog commit returns ENOSPC: the store goes on. Adds to
// another filter, then Close (its checkpoint truncates the WAL) and
// reopen: every acknowledged key must be there and Open must succeed.
func TestLandedCreateENOSPCThenClose(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(landedName(landed), func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
			a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
			must(t, err)
			for i := range 50 {
				must(t, second(a.Add(key(i))))
			}
			f := armCatalogFault(t, dir, "(*Store).create", 1, syscall.ENOSPC, landed)
			_, err = s.CreateBloom("p", BloomConfig{Capacity: 1000})
			f.disarm()
			f.mustHaveFired(t)
			if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
				t.Fatalf("create: %v, want ENOSPC and the store going on", err)
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

// The same with an explicit Checkpoint and a crash instead of Close.
func TestLandedCreateENOSPCCheckpointCrash(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(landedName(landed), func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
			a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
			must(t, err)
			for i := range 50 {
				must(t, second(a.Add(key(i))))
			}
			f := armCatalogFault(t, dir, "(*Store).create", 1, syscall.ENOSPC, landed)
			_, err = s.CreateBloom("p", BloomConfig{Capacity: 1000})
			f.disarm()
			f.mustHaveFired(t)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("create: %v", err)
			}
			for i := 50; i < 100; i++ {
				must(t, second(a.Add(key(i))))
			}
			must(t, s.Checkpoint())
			for i := 100; i < 150; i++ {
				must(t, second(a.Add(key(i))))
			}
			s.abandonForTest()
			s, err = Open(dir, nil)
			if err != nil {
				t.Fatalf("reopen after crash: %v", err)
			}
			defer s.Close()
			a, err = s.Bloom("a")
			must(t, err)
			for i := range 150 {
				if !a.Has(key(i)) {
					t.Fatalf("acknowledged key %d absent", i)
				}
			}
		})
	}
}
