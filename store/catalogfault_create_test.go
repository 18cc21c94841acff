//go:build filterstore_testhooks

package store

import (
	"testing"
)

// Create whose catalog commit returns ENOSPC: the store goes on. Adds to
// another filter, then Close (its checkpoint truncates the WAL) and
// reopen: every acknowledged key must be there and Open must succeed.
func TestLandedCreateENOSPCThenClose(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(landedName(landed), func(t *testing.T) {
			dir, s, a := storeWithKeys(t, 50)
			failCreate(t, s, dir, "p", landed)
			for i := 50; i < 100; i++ {
				must(t, second(a.Add(key(i))))
			}
			must(t, s.Close())
			s, err := Open(dir, nil)
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
			dir, s, a := storeWithKeys(t, 50)
			failCreate(t, s, dir, "p", landed)
			for i := 50; i < 100; i++ {
				must(t, second(a.Add(key(i))))
			}
			must(t, s.Checkpoint())
			for i := 100; i < 150; i++ {
				must(t, second(a.Add(key(i))))
			}
			s.abandonForTest()
			s, err := Open(dir, nil)
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
