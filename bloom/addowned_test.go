package bloom

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestAddOwnedMatchesAdd adds the same keys to two filters of one
// geometry, one with AddHash and one with AddOwned and AddHashOwned in
// turn, for both derivations, every K (so both sides of one draw's seven
// positions) and block counts from one up, and requires the same reports
// and Count after every key, the same words at the end, and every key
// found.
func TestAddOwnedMatchesAdd(t *testing.T) {
	r := testseed.New(t)
	for _, d := range []Derivation{DeriveMix, DeriveMul} {
		for k := uint32(1); k <= MaxK; k++ {
			blocks := []uint64{1, 2, 3, 7, 100 + r.Uint64N(900)}[k%5]
			g := Geometry{Blocks: blocks, K: k, Salt: r.Uint64(), Derivation: d}
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			shared, _ := New(g, nil)
			owned, _ := New(g, nil)
			// Filled to about twice a 1% plan's keys, and every tenth key
			// added twice, so that adds find their bits set.
			n := int(blocks*BlockBits/10) * 2
			hs := make([]uint64, 0, n)
			for i := range n {
				key := binary.LittleEndian.AppendUint64(nil, r.Uint64())
				h := Hash(key)
				hs = append(hs, h)
				for rep := range 1 + i%10/9 {
					// AddOwned and AddHashOwned in turn: each has the body.
					var b bool
					if (i+rep)%2 == 0 {
						b = owned.AddOwned(key)
					} else {
						b = owned.AddHashOwned(h)
					}
					a := shared.AddHash(h)
					if a != b {
						t.Fatalf("%v K=%d blocks=%d key %d: AddHash reported %v, AddOwned or AddHashOwned %v", d, k, blocks, i, a, b)
					}
				}
				if shared.Count() != owned.Count() {
					t.Fatalf("%v K=%d blocks=%d key %d: Count %d after AddHash, %d after AddHashOwned", d, k, blocks, i, shared.Count(), owned.Count())
				}
			}
			if !slices.Equal(shared.Words(), owned.Words()) {
				t.Fatalf("%v K=%d blocks=%d: AddHashOwned set other bits than AddHash", d, k, blocks)
			}
			for i, h := range hs {
				if !owned.HasHash(h) {
					t.Fatalf("%v K=%d blocks=%d: key %d missing after AddHashOwned", d, k, blocks, i)
				}
			}
			fresh, _ := New(g, nil)
			if !fresh.AddOwned([]byte("k")) || fresh.AddOwned([]byte("k")) || fresh.Add([]byte("k")) ||
				!fresh.Has([]byte("k")) || fresh.Count() != 1 {
				t.Fatalf("%v K=%d: AddOwned, AddOwned, Add of one key into an empty filter: want true, false, false, found, Count 1", d, k)
			}
			if owned.SetCount(3); owned.Count() != 3 {
				t.Fatalf("%v K=%d: Count %d after SetCount(3) on AddOwned's adds", d, k, owned.Count())
			}
		}
	}
}

// TestAddHashesOwnedEveryK holds AddHashesOwned to AddHash for both
// derivations and every K (the unrolled first draw for 3 to 7 positions,
// the mask array for the others), with and without a base, over a block
// range and its complement: the same words (with base's ORed in), and as
// many new adds as AddHash reports for the keys of the range.
func TestAddHashesOwnedEveryK(t *testing.T) {
	r := testseed.New(t)
	for _, d := range []Derivation{DeriveMix, DeriveMul} {
		for k := uint32(1); k <= MaxK; k++ {
			for _, withBase := range []bool{false, true} {
				blocks := 50 + r.Uint64N(200)
				g := Geometry{Blocks: blocks, K: k, Salt: r.Uint64(), Derivation: d}
				ref, _ := New(g, nil)
				var base *Filter
				if withBase {
					base, _ = New(g, nil)
					for range blocks * 20 {
						h := r.Uint64()
						base.AddHash(h)
						ref.AddHash(h)
					}
				}
				// Keys repeat (every fifth a repeat) and fill the filter
				// to about twice a 1% plan's keys, so that adds find bits set.
				hs := make([]uint64, int(blocks*BlockBits/10)*2)
				for i := range hs {
					if i > 0 && i%5 == 0 {
						hs[i] = hs[r.IntN(i)]
					} else {
						hs[i] = r.Uint64()
					}
				}
				mid := r.Uint64N(blocks + 1)
				got, _ := New(g, nil)
				var gotAdded, wantAdded uint64
				for _, span := range [][2]uint64{{0, mid}, {mid, blocks}} {
					for i := 0; i < len(hs); i += 1000 {
						gotAdded += got.AddHashesOwned(hs[i:min(i+1000, len(hs))], span[0], span[1], base, nil)
					}
				}
				for _, h := range hs {
					if ref.AddHash(h) {
						wantAdded++
					}
				}
				if gotAdded != wantAdded {
					t.Fatalf("%v K=%d base %v: %d new adds, want %d", d, k, withBase, gotAdded, wantAdded)
				}
				words := slices.Clone(got.Words())
				if base != nil {
					for i, w := range base.Words() {
						words[i] |= w
					}
				}
				if i := firstDiff(words, ref.Words()); i >= 0 {
					t.Fatalf("%v K=%d base %v: word %d is %#x, want %#x", d, k, withBase, i, words[i], ref.Words()[i])
				}
			}
		}
	}
}
