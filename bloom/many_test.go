package bloom

import (
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestCountingHasManyMatchesHas: the counting filter's HasMany and
// HasManyHash answer exactly what Has does, for batches across the batch
// and chunk boundaries (32, 256), with added, deleted and absent keys, and
// with room in out allocate nothing.
func TestCountingHasManyMatchesHas(t *testing.T) {
	r := testseed.New(t)
	g, err := PlanCounting(4000, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCounting(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	for i := range uint64(4000) {
		c.Add(key(&b, i))
	}
	for i := uint64(0); i < 4000; i += 2 { // the odd keys stay
		c.Delete(key(&b, i))
	}
	out := make([]bool, 0, 2000)
	for _, n := range []int{0, 1, 31, 32, 33, 255, 256, 257, 1000, 2000} {
		keys := make([][]byte, n)
		hs := make([]uint64, n)
		for i := range keys {
			keys[i] = key(new([8]byte), r.Uint64N(8000))
			hs[i] = Hash(keys[i])
		}
		got := c.HasMany(keys, out)
		gotH := c.HasManyHash(hs, nil)
		if len(got) != n || len(gotH) != n {
			t.Fatalf("n=%d: HasMany gave %d answers, HasManyHash %d", n, len(got), len(gotH))
		}
		for i, k := range keys {
			if want := c.Has(k); got[i] != want || gotH[i] != want {
				t.Fatalf("n=%d: key %d: HasMany %v, HasManyHash %v, Has %v", n, i, got[i], gotH[i], want)
			}
		}
		if a := testing.AllocsPerRun(10, func() { c.HasMany(keys, out); c.HasManyHash(hs, out) }); a != 0 {
			t.Fatalf("n=%d: %v allocations with room in out, want 0", n, a)
		}
	}
}

// TestCountingHasManyEveryK: for every k and both derivations, the batched
// probe (unrolled for k <= 9, drawn past that) answers what HasHash's loop
// does, with keys added, random ones, and an added key with one of its
// counters zeroed (absent).
func TestCountingHasManyEveryK(t *testing.T) {
	r := testseed.New(t)
	for k := uint32(1); k <= MaxK; k++ {
		for _, d := range []Derivation{DeriveMix, DeriveMul} {
			g := Geometry{Blocks: 1 + r.Uint64N(4), K: k, Salt: r.Uint64(), Derivation: d}
			c, err := NewCounting(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			added := make([]uint64, 3)
			for i := range added {
				added[i] = r.Uint64()
				c.AddHash(added[i])
			}
			hs := append([]uint64(nil), added...)
			for range 100 {
				hs = append(hs, r.Uint64())
			}
			// Zero one counter of the first key: it must read absent.
			block, pos := g.LocateCounters(added[0], nil)
			p := pos[r.IntN(len(pos))]
			c.Words()[block*BlockWords+uint64(p/CountersPerWord)] &^= MaxCounter << (p % CountersPerWord * CounterBits)
			got := c.HasManyHash(hs, nil)
			for i, h := range hs {
				if want := c.HasHash(h); got[i] != want {
					t.Fatalf("k=%d %v: hash %d (%#x): HasManyHash %v, HasHash %v", k, d, i, h, got[i], want)
				}
			}
			if got[0] {
				t.Fatalf("k=%d %v: a key with a zeroed counter reads present", k, d)
			}
		}
	}
}
