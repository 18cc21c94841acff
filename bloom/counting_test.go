package bloom

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestCountingModel runs random adds and deletes against a map model: no
// false negatives, Count >= the model count (capped at MaxCounter), Items
// equal to the model's total, deletes of absent keys refused.
func TestCountingModel(t *testing.T) {
	r := testseed.New(t)
	for round := range 10 {
		capacity := 200 + r.Uint64N(2000)
		g, err := PlanCounting(capacity, 0.01)
		if err != nil {
			t.Fatal(err)
		}
		g.Salt = r.Uint64()
		c, err := NewCounting(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		model := map[uint64]uint64{} // key hash -> times added minus deleted
		var present []uint64
		total := uint64(0)
		for op := range 20 * capacity {
			switch x := r.IntN(10); {
			case x < 5 || len(present) == 0: // add a new key
				h := r.Uint64()
				c.AddHash(h)
				model[h]++
				present = append(present, h)
				total++
			case x < 7: // add a present key again
				h := present[r.IntN(len(present))]
				c.AddHash(h)
				model[h]++
				total++
			default: // delete a present key
				i := r.IntN(len(present))
				h := present[i]
				if !c.DeleteHash(h) {
					t.Fatalf("round %d op %d: Delete of a present key (model count %d) refused", round, op, model[h])
				}
				total--
				if model[h]--; model[h] == 0 {
					delete(model, h)
					present[i] = present[len(present)-1]
					present = present[:len(present)-1]
				}
			}
			if len(present) > int(capacity) { // stay near capacity
				h := present[0]
				for range model[h] {
					if !c.DeleteHash(h) {
						t.Fatalf("round %d op %d: Delete of a present key refused", round, op)
					}
					total--
				}
				delete(model, h)
				present = present[1:]
			}
		}
		for h, n := range model {
			if !c.HasHash(h) {
				t.Fatalf("round %d: false negative for %#x (model count %d)", round, h, n)
			}
			if got := c.CountHash(h); got < min(n, MaxCounter) {
				t.Fatalf("round %d: Count %d below model count %d", round, got, n)
			}
		}
		if c.Items() != total {
			t.Fatalf("round %d: Items %d, want %d", round, c.Items(), total)
		}
		// Deletes of keys never added are refused unless they are false
		// positives; measure that they are rare and change nothing when
		// refused.
		refused := 0
		for range 1000 {
			h := r.Uint64()
			if c.HasHash(h) {
				continue
			}
			before := slices.Clone(c.Words())
			if c.DeleteHash(h) {
				t.Fatalf("round %d: Delete of an absent key (Has false) succeeded", round)
			}
			if !slices.Equal(before, c.Words()) {
				t.Fatalf("round %d: refused Delete changed the words", round)
			}
			refused++
		}
		if refused < 900 {
			t.Fatalf("round %d: only %d of 1000 random keys absent", round, refused)
		}
	}
}

// TestCountingAddDeleteRestores checks that Delete undoes Add exactly, also
// when a key's positions repeat (K = 32 among 128 counters repeats often),
// except for counters the Add saturated, which must stay at MaxCounter.
func TestCountingAddDeleteRestores(t *testing.T) {
	r := testseed.New(t)
	for _, k := range []uint32{1, 4, 32} {
		c, _ := NewCounting(Geometry{Blocks: 64, K: k}, nil)
		for range 500 { // background load, well below saturation
			c.AddHash(r.Uint64())
		}
		for range 2000 {
			h := r.Uint64()
			before := slices.Clone(c.Words())
			want := addDeleteResult(c.Geometry(), before, h)
			c.AddHash(h)
			if !c.HasHash(h) || c.CountHash(h) < 1 {
				t.Fatalf("k=%d: key missing right after Add", k)
			}
			if !c.DeleteHash(h) {
				t.Fatalf("k=%d: Delete right after Add refused", k)
			}
			if !slices.Equal(want, c.Words()) {
				_, pos := c.Geometry().LocateCounters(h, nil)
				t.Fatalf("k=%d: Add then Delete did not restore the words (positions %v)", k, pos)
			}
		}
	}
}

// addDeleteResult returns the words an Add of h and then a Delete of h must
// leave, computed from the counters alone: every counter returns to its old
// value except one the Add drove to MaxCounter, which saturates and stays.
func addDeleteResult(g Geometry, words []uint64, h uint64) []uint64 {
	out := slices.Clone(words)
	block, pos := g.LocateCounters(h, nil)
	mult := map[uint32]uint64{}
	for _, p := range pos {
		mult[uint32(p)]++
	}
	for p, m := range mult {
		wi := block*BlockWords + uint64(p/CountersPerWord)
		sh := uint(p%CountersPerWord) * CounterBits
		if old := out[wi] >> sh & MaxCounter; old != MaxCounter && old+m >= MaxCounter {
			out[wi] |= MaxCounter << sh
		}
	}
	return out
}

// TestCountingSaturation checks Count semantics up to and at saturation.
func TestCountingSaturation(t *testing.T) {
	c, _ := NewCounting(Geometry{Blocks: 1000, K: 4}, nil)
	x := []byte("x")
	for i := uint64(1); i <= 20; i++ {
		c.Add(x)
		if got, want := c.Count(x), min(i, MaxCounter); got < want {
			t.Fatalf("after %d adds Count = %d, want >= %d", i, got, want)
		}
	}
	if c.Count(x) != MaxCounter {
		t.Fatalf("after 20 adds Count = %d, want %d", c.Count(x), MaxCounter)
	}
	// Saturated counters never decrease: the key stays present.
	for i := range 30 {
		if !c.Delete(x) {
			t.Fatalf("delete %d of a saturated key refused", i)
		}
	}
	if c.Count(x) != MaxCounter || !c.Has(x) {
		t.Fatalf("saturated key after deletes: Count %d Has %v", c.Count(x), c.Has(x))
	}
	if c.Items() != 0 {
		t.Fatalf("Items = %d after 20 adds and 30 deletes, want 0 (never below)", c.Items())
	}

	// Below saturation, Count is exact in an otherwise empty filter, and
	// deleting more than was added is refused.
	y := []byte("y")
	for i := uint64(1); i <= 3; i++ {
		c.Add(y)
	}
	if c.Count(y) < 3 {
		t.Fatalf("Count(y) = %d after 3 adds", c.Count(y))
	}
	for i := range 3 {
		if !c.Delete(y) {
			t.Fatalf("delete %d of y refused", i)
		}
	}
	if c.Has(y) && c.Count(y) != 0 {
		// y may share counters with x only by a false positive.
		t.Logf("y shares counters with x")
	}
	if !c.Has(y) && c.Delete(y) {
		t.Fatal("a fourth delete of y succeeded")
	}
	c.SetItems(42)
	if c.Items() != 42 {
		t.Fatalf("SetItems(42): Items = %d", c.Items())
	}
	if fr := c.FillRatio(); fr <= 0 || fr > 8.0/float64(1000*CountersPerBlock) {
		t.Fatalf("FillRatio = %v with at most 8 non-zero counters", fr)
	}
}

func TestNonzeroCounters(t *testing.T) {
	for _, v := range []uint64{0, 1, 0xf, 0x10, 0x8000000000000000, math.MaxUint64, 0x0123456789abcdef, 0x1111111111111111} {
		want := 0
		for i := range 16 {
			if v>>(4*i)&15 != 0 {
				want++
			}
		}
		if got := NonzeroCounters(v); got != want {
			t.Errorf("NonzeroCounters(%#x) = %d, want %d", v, got, want)
		}
	}
}

// recWords records the loads and stores of a mutation over a private copy,
// like the store's after-image capture.
type recWords struct {
	mem    []uint64
	loads  []uint64
	stores map[uint64]uint64
	order  []uint64
}

func (w *recWords) Load(i uint64) uint64 {
	if v, ok := w.stores[i]; ok {
		return v
	}
	w.loads = append(w.loads, i)
	return w.mem[i]
}

func (w *recWords) Store(i, v uint64) {
	w.stores[i] = v
	w.order = append(w.order, i)
}

// TestCountingTx checks AddTo and DeleteFrom: all reads and writes go through
// the Words, each changed word is stored once as an after-image, the filter's
// own words are untouched, and applying the after-images gives the same
// words as the plain methods.
func TestCountingTx(t *testing.T) {
	r := testseed.New(t)
	g := Geometry{Blocks: 16, K: 12, Salt: 99}
	direct, _ := NewCounting(g, nil)
	viaTx, _ := NewCounting(g, nil)
	var added []uint64
	for op := range 3000 {
		w := &recWords{mem: viaTx.Words(), stores: map[uint64]uint64{}}
		snapshot := slices.Clone(viaTx.Words())
		var h uint64
		var okD, okT bool
		if len(added) == 0 || r.IntN(3) > 0 {
			h = r.Uint64()
			direct.AddHash(h)
			viaTx.AddTo(w, h)
			added = append(added, h)
			okD, okT = true, true
		} else {
			i := r.IntN(len(added))
			h = added[i]
			added = slices.Delete(added, i, i+1)
			okD = direct.DeleteHash(h)
			okT = viaTx.DeleteFrom(w, h)
		}
		if okD != okT {
			t.Fatalf("op %d: direct %v, tx %v", op, okD, okT)
		}
		if !slices.Equal(snapshot, viaTx.Words()) {
			t.Fatalf("op %d: the mutation wrote the filter's own words, not through Words", op)
		}
		if len(w.order) != len(w.stores) {
			t.Fatalf("op %d: a word was stored more than once: %v", op, w.order)
		}
		for _, i := range append(w.loads, w.order...) {
			if i/BlockWords != w.loads[0]/BlockWords {
				t.Fatalf("op %d: mutation touched words of two blocks", op)
			}
		}
		for i, v := range w.stores {
			viaTx.Words()[i] = v
		}
		if !slices.Equal(direct.Words(), viaTx.Words()) {
			t.Fatalf("op %d: after-images differ from the direct mutation", op)
		}
		if direct.CountHash(h) != viaTx.CountFrom(atomicWords(viaTx.Words()), h) {
			t.Fatalf("op %d: CountFrom differs from CountHash", op)
		}
	}
	if direct.Items() != viaTx.Items() {
		t.Fatalf("Items: direct %d, tx %d", direct.Items(), viaTx.Items())
	}
}

// TestCountingFPR fills a counting filter to capacity and measures its
// false-positive rate over 1e6 absent keys, under each derivation.
func TestCountingFPR(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	const n, m = 300_000, 1_000_000
	for _, tc := range []struct {
		rate float64
		d    Derivation
	}{{0.1, DeriveMul}, {0.01, DeriveMul}, {0.01, DeriveMix}} {
		rate := tc.rate
		g, _ := PlanCounting(n, rate)
		g.Derivation = tc.d
		c, _ := NewCounting(g, nil)
		var b [8]byte
		for i := range uint64(n) {
			c.Add(key(&b, i))
		}
		got := measureFPR(m, c.Has)
		est := EstimateCountingFPR(g, n)
		t.Logf("rate %v %v: k=%d %.2f bits/key, measured FPR %.6f (%.3fx), estimated %.6f, fill %.3f",
			rate, tc.d, g.K, float64(g.Bits())/n, got, got/rate, est, c.FillRatio())
		if math.Abs(got/rate-1) > 0.15 {
			t.Errorf("rate %v: measured FPR %v is not within 15%% of the configured rate", rate, got)
		}
	}
}

// TestConcurrentCounting runs readers while a writer adds keys that stay and
// adds and deletes others: a reader must never miss a staying key whose Add
// has returned.
func TestConcurrentCounting(t *testing.T) {
	r := testseed.New(t)
	base := r.Uint64() >> 2
	g, _ := PlanCounting(20_000, 0.01)
	c, _ := NewCounting(g, nil)
	const n = 20_000
	var done atomic.Uint64 // staying keys base..base+done have been added
	var misses atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range max(2, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [8]byte
			x := uint64(w) + 1
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := done.Load()
				if d == 0 {
					continue
				}
				x = x*6364136223846793005 + 1442695040888963407
				k := key(&b, base+(x>>1)%d)
				if !c.Has(k) || c.Count(k) == 0 {
					misses.Add(1)
				}
			}
		}()
	}
	var b [8]byte
	churn := base + 1<<61
	var live []uint64
	deadline := time.Now().Add(40 * time.Second)
	for i := range uint64(n) {
		c.Add(key(&b, base+i))
		done.Store(i + 1)
		// Churn: add one other key, delete one of the live ones.
		c.Add(key(&b, churn+i))
		live = append(live, churn+i)
		if len(live) > 1000 {
			j := r.IntN(len(live))
			if !c.Delete(key(&b, live[j])) {
				t.Fatalf("delete of live churn key refused")
			}
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		if time.Now().After(deadline) {
			t.Logf("stopping early after %d adds", i+1)
			break
		}
	}
	close(stop)
	wg.Wait()
	if misses.Load() != 0 {
		t.Fatalf("%d lookups missed keys whose Add had returned", misses.Load())
	}
}
