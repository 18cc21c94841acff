//go:build filterstore_testhooks

package store

import (
	"fmt"
	"syscall"
	"testing"
)

// TestLandedRecoveryCheckpointFault: the catalog commit of the
// checkpoint that ends a recovering Open fails (EIO, ENOSPC; landed on the
// disk or not); then the power fails or the process dies; the next Open
// must recover every acknowledged op.
func TestLandedRecoveryCheckpointFault(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
			for _, landed := range []bool{true, false} {
				for _, power := range []bool{true, false} {
					name := fmt.Sprintf("%v/%v/%s/power=%v", mode, errno, landedName(landed), power)
					t.Run(name, func(t *testing.T) {
						for seed := uint64(1); seed <= 4; seed++ {
							w, m, rng := recBuild(t, seed, mode, true, 60)
							f := armCatalogFault(t, w.dir, "checkpointLocked", 1, errno, landed)
							s, err := w.open(t)
							f.disarm()
							t.Logf("seed %d: recovering Open with its checkpoint commit failing: %v (fired %d)", seed, err, f.fired)
							if f.fired == 0 {
								if err != nil {
									t.Fatal(err)
								}
								must(t, s.Close())
								continue
							}
							if err == nil {
								t.Fatalf("seed %d: Open succeeded with its checkpoint commit failing", seed)
							}
							if power {
								w.powerLoss(nil, rng)
							}
							m.Crash(power)
							s = recRecover(t, seed, "after the recovering checkpoint's commit failed", w, m)
							must(t, m.Settle(s))
							must(t, s.Close())
							s = recRecover(t, seed, "then a clean Close", w, m)
							must(t, s.Close())
						}
					})
				}
			}
		}
	}
}
