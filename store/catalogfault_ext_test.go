//go:build filterstore_testhooks

package store

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// External adds whose catalog write fails, landed or not: the new layer
// of a growing filter (addLayer), the incomplete mark of a NonScaling
// filter that fills (markIncomplete). Then a crash, reopen and the
// engine's replay of every record above ExternalDurable: every key the
// store reported durable must be there (or the filter incomplete).
func TestLandedExternalFaults(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		for _, landed := range []bool{true, false} {
			for _, what := range []string{"addLayer", "markIncomplete"} {
				t.Run(fmt.Sprintf("%v/%s/%s", errno, landedName(landed), what), func(t *testing.T) {
					dir := t.TempDir()
					opts := &Options{CheckpointEvery: -1, Sync: SyncInterval}
					s := mustOpen(t, dir, opts)
					cfg := BloomConfig{Capacity: 8, ErrorRate: 0.01, NonScaling: what == "markIncomplete"}
					bf, err := s.CreateBloom("f", cfg)
					must(t, err)
					other, err := s.CreateBloom("o", BloomConfig{Capacity: 1000})
					must(t, err)
					f := armCatalogFault(t, dir, what, 1, errno, landed)
					var recs [][]byte
					var failedErr error
					for i := 0; i < 100 && failedErr == nil; i++ {
						bt := s.NewBatch()
						bt.BloomAdd(bf, key(i))
						bt.BloomAdd(other, key(i))
						rec, err := bt.Encode()
						must(t, err)
						recs = append(recs, rec)
						if _, err := s.ApplyExternal(rec); err != nil {
							failedErr = err
						}
					}
					f.disarm()
					f.mustHaveFired(t)
					if failedErr == nil {
						t.Fatal("no ApplyExternal failed")
					}
					t.Logf("ApplyExternal: %v (store failed: %v)", failedErr, errors.Is(failedErr, ErrFailed))
					s.abandonForTest()
					s, err = Open(dir, opts)
					if err != nil {
						t.Fatalf("reopen: %v", err)
					}
					defer s.Close()
					d := s.ExternalDurable()
					for _, rec := range recs {
						seq, err := ExternalSeq(rec)
						must(t, err)
						if seq > d {
							if _, err := s.ApplyExternal(rec); err != nil {
								t.Fatalf("replay of seq %d: %v", seq, err)
							}
						}
					}
					bf, err = s.Bloom("f")
					must(t, err)
					other, err = s.Bloom("o")
					must(t, err)
					for i := range recs {
						if !bf.Has(key(i)) || !other.Has(key(i)) {
							t.Fatalf("key %d absent after replay (f %v, o %v); f: %+v", i, bf.Has(key(i)), other.Has(key(i)), mustInfo(t, bf))
						}
					}
				})
			}
		}
	}
}
