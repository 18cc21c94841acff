//go:build filterstore_testhooks

package store

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// A bloom filter's growth whose catalog commit returns ENOSPC, then each
// of: Close; crash; a retried add then Close; a checkpoint then crash;
// a retried add then crash; Drop then crash; Backup.
func TestLandedAddLayerENOSPC(t *testing.T) {
	for _, landed := range []bool{true, false} {
		for _, then := range []string{"close", "crash", "retry-close", "retry-crash", "ckpt-crash", "ckpt-retry-crash", "drop-crash", "backup"} {
			t.Run(landedName(landed)+"/"+then, func(t *testing.T) {
				dir := t.TempDir()
				s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
				b, err := s.CreateBloom("b", BloomConfig{Capacity: 20})
				must(t, err)
				o, err := s.CreateBloom("o", BloomConfig{Capacity: 1000})
				must(t, err)
				for i := range 20 {
					must(t, second(b.Add(key(i))))
					must(t, second(o.Add(key(i))))
				}
				f := armCatalogFault(t, dir, "(*filterBase).addLayer", 1, syscall.ENOSPC, landed)
				_, err = b.Add(key(20))
				f.disarm()
				f.mustHaveFired(t)
				if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
					t.Fatalf("add: %v, want ENOSPC and the store going on", err)
				}
				n := 20 // keys of b acknowledged: 0..n-1 (20 excluded)
				for i := 20; i < 40; i++ {
					must(t, second(o.Add(key(i))))
				}
				retry := func() {
					for i := 21; i < 60; i++ {
						must(t, second(b.Add(key(i))))
					}
					n = 60
				}
				dropped := false
				switch then {
				case "close":
					must(t, s.Close())
				case "crash":
					s.abandonForTest()
				case "retry-close":
					retry()
					must(t, s.Close())
				case "retry-crash":
					retry()
					s.abandonForTest()
				case "ckpt-crash":
					must(t, s.Checkpoint())
					s.abandonForTest()
				case "ckpt-retry-crash":
					must(t, s.Checkpoint())
					retry()
					s.abandonForTest()
				case "drop-crash":
					must(t, s.Drop("b"))
					dropped = true
					s.abandonForTest()
				case "backup":
					bk := filepath.Join(t.TempDir(), "bk")
					must(t, s.Backup(bk))
					must(t, s.Close())
					dir = bk
				}
				s, err = Open(dir, nil)
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer s.Close()
				o, err = s.Bloom("o")
				must(t, err)
				for i := range 40 {
					if !o.Has(key(i)) {
						t.Fatalf("o: key %d absent", i)
					}
				}
				if dropped {
					return
				}
				b, err = s.Bloom("b")
				must(t, err)
				if in := mustInfo(t, b); in.State != "ok" {
					t.Fatalf("b: state %q (%s)", in.State, in.Reason)
				}
				for i := range n {
					if i != 20 && !b.Has(key(i)) {
						t.Fatalf("b: key %d absent", i)
					}
				}
				for i := 60; i < 120; i++ {
					must(t, second(b.Add(key(i))))
				}
				rep, err := s.Check()
				must(t, err)
				if len(rep.Problems) > 0 {
					t.Fatalf("check: %v", rep.Problems)
				}
			})
		}
	}
}

// The same for a cuckoo filter.
func TestLandedAddLayerCuckooENOSPC(t *testing.T) {
	for _, landed := range []bool{true, false} {
		for _, then := range []string{"close", "crash", "retry-close", "retry-crash", "ckpt-retry-crash"} {
			t.Run(landedName(landed)+"/"+then, func(t *testing.T) {
				dir := t.TempDir()
				s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
				c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 64})
				must(t, err)
				i := 0
				f := armCatalogFault(t, dir, "(*filterBase).addLayer", 1, syscall.ENOSPC, landed)
				var failedAt = -1
				for ; i < 2000 && failedAt < 0; i++ {
					if err := c.Add(key(i)); err != nil {
						if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
							t.Fatalf("add %d: %v", i, err)
						}
						failedAt = i
					}
				}
				f.disarm()
				f.mustHaveFired(t)
				n := i
				switch then {
				case "close":
					must(t, s.Close())
				case "crash":
					s.abandonForTest()
				case "retry-close", "retry-crash", "ckpt-retry-crash":
					if then == "ckpt-retry-crash" {
						must(t, s.Checkpoint())
					}
					for ; i < n+200; i++ {
						must(t, c.Add(key(i)))
					}
					n = i
					if then == "retry-close" {
						must(t, s.Close())
					} else {
						s.abandonForTest()
					}
				}
				s, err = Open(dir, nil)
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer s.Close()
				c, err = s.Cuckoo("c")
				must(t, err)
				for j := range n {
					if j != failedAt && !c.Has(key(j)) {
						t.Fatalf("c: key %d absent (failed add was %d)", j, failedAt)
					}
				}
				rep, err := s.Check()
				must(t, err)
				if len(rep.Problems) > 0 {
					t.Fatalf("check: %v", rep.Problems)
				}
			})
		}
	}
}
