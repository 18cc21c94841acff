package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestHasManyMatchesHasLayers: HasManyInto and HasManyHashInto of every
// kind answer exactly what Has does, key by key, on filters of several
// layers (Bloom and cuckoo grow them), with deleted keys, for seeded
// random batches across the chunk (256) and batch boundaries; with room
// in dst they allocate nothing (under SyncAlways). Under SyncInterval the
// lookups also go through the overlay of changes not yet applied.
func TestHasManyMatchesHasLayers(t *testing.T) {
	for _, sync := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(fmt.Sprintf("sync=%d", sync), func(t *testing.T) {
			r := testseed.New(t)
			s, err := Open(t.TempDir(), &Options{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bl, err := s.CreateBloom("b", BloomConfig{Capacity: 200, ErrorRate: 0.01})
			if err != nil {
				t.Fatal(err)
			}
			ck, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 200})
			if err != nil {
				t.Fatal(err)
			}
			cn, err := s.CreateCounting("n", BloomConfig{Capacity: 2000, ErrorRate: 0.01})
			if err != nil {
				t.Fatal(err)
			}
			key := func(i uint64) []byte { return []byte(fmt.Sprintf("key-%d", i)) }
			var added [][]byte
			for i := uint64(0); i < 1500; i++ {
				added = append(added, key(i))
			}
			if _, err := bl.AddMany(added); err != nil {
				t.Fatal(err)
			}
			if _, err := ck.AddMany(added); err != nil {
				t.Fatal(err)
			}
			if _, err := cn.AddMany(added); err != nil {
				t.Fatal(err)
			}
			var gone [][]byte
			for i := 0; i < len(added); i += 3 {
				gone = append(gone, added[i])
			}
			for _, k := range gone {
				// A fingerprint in several layers is refused: it stays.
				if _, err := ck.Delete(k); err != nil && !errors.Is(err, ErrAmbiguous) {
					t.Fatal(err)
				}
			}
			if _, err := cn.DeleteMany(gone); err != nil {
				t.Fatal(err)
			}
			if l := len(mustInfo(t, bl).LayerInfo); l < 3 {
				t.Fatalf("Bloom has %d layers, want 3 or more", l)
			}
			if l := len(mustInfo(t, ck).LayerInfo); l < 3 {
				t.Fatalf("cuckoo has %d layers, want 3 or more", l)
			}
			type kind struct {
				into   func(dst []bool, keys [][]byte) []bool
				hashed func(dst []bool, hs []uint64) []bool
				has    func([]byte) bool
			}
			kinds := map[string]kind{
				"bloom":    {bl.HasManyInto, bl.HasManyHashInto, bl.Has},
				"cuckoo":   {ck.HasManyInto, ck.HasManyHashInto, ck.Has},
				"counting": {cn.HasManyInto, cn.HasManyHashInto, cn.Has},
			}
			dst := make([]bool, 0, 1200)
			for _, n := range []int{1, 16, 33, 255, 256, 257, 600, 1200} {
				keys := make([][]byte, n)
				hs := make([]uint64, n)
				for i := range keys {
					keys[i] = key(r.Uint64N(3000)) // half never added
					hs[i] = Hash(keys[i])
				}
				for name, k := range kinds {
					got := k.into(dst, keys)
					gotH := k.hashed(nil, hs)
					if len(got) != n || len(gotH) != n {
						t.Fatalf("%s n=%d: %d and %d answers", name, n, len(got), len(gotH))
					}
					for i, key := range keys {
						if want := k.has(key); got[i] != want || gotH[i] != want {
							t.Fatalf("%s n=%d: key %q: HasManyInto %v, HasManyHashInto %v, Has %v", name, n, key, got[i], gotH[i], want)
						}
					}
					if sync == SyncInterval {
						// Lookups through the overlay box a view of
						// each layer.
						continue
					}
					if a := allocsPerRun(5, func() { k.into(dst, keys); k.hashed(dst, hs) }); a != 0 {
						t.Fatalf("%s n=%d: %v allocations with room in dst, want 0", name, n, a)
					}
				}
			}
		})
	}
}
