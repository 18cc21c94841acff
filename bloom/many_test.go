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
