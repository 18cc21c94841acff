package bloom

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestFilterNoFalseNegatives adds random keys and checks every one of them,
// through every lookup path, after every batch.
func TestFilterNoFalseNegatives(t *testing.T) {
	r := testseed.New(t)
	for round := range 20 {
		n := 1 + r.Uint64N(20000)
		rate := []float64{0.5, 0.1, 0.01, 1e-4}[r.IntN(4)]
		g, err := Plan(n, rate)
		if err != nil {
			t.Fatal(err)
		}
		g.Salt = r.Uint64()
		f, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Overfill up to 2x: no false negatives even beyond capacity.
		hs := make([]uint64, 0, 2*n)
		for range 1 + r.Uint64N(2*n) {
			h := r.Uint64()
			f.AddHash(h)
			hs = append(hs, h)
		}
		for _, h := range hs {
			if !f.HasHash(h) {
				t.Fatalf("round %d g=%+v: false negative for %#x", round, g, h)
			}
		}
		out := f.HasManyHash(hs, nil)
		if i := slices.Index(out, false); i >= 0 {
			t.Fatalf("round %d g=%+v: HasManyHash false negative for %#x", round, g, hs[i])
		}
	}
}

func TestFilterAddReportsChange(t *testing.T) {
	g, _ := Plan(1000, 0.01)
	f, _ := New(g, nil)
	if !f.Add([]byte("x")) {
		t.Fatal("first Add of a key into an empty filter reported no change")
	}
	if f.Add([]byte("x")) {
		t.Fatal("second Add of a key reported a change")
	}
	if !f.Has([]byte("x")) || f.Count() != 1 {
		t.Fatalf("Has=%v Count=%d after one add", f.Has([]byte("x")), f.Count())
	}
	var b [8]byte
	added := uint64(1)
	for i := range uint64(999) {
		if f.Add(key(&b, i)) {
			added++
		}
	}
	if f.Count() != added || added < 990 {
		t.Fatalf("Count = %d, want %d (about 1000)", f.Count(), added)
	}
	f.SetCount(7)
	if f.Count() != 7 {
		t.Fatalf("Count after SetCount(7) = %d", f.Count())
	}
	// Each add sets at most K bits.
	if fr, max := f.FillRatio(), float64(1000*g.K)/float64(g.Bits()); fr <= 0 || fr > max {
		t.Fatalf("FillRatio = %v, want in (0, %v]", fr, max)
	}
}

// TestFilterExternalWords checks that a filter works in place on the
// caller's words, and that a second filter over the same words sees the
// same set (as after a reopen of the mapped file).
func TestFilterExternalWords(t *testing.T) {
	g, _ := Plan(5000, 0.01)
	words := make([]uint64, g.Words())
	f, err := New(g, words)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	for i := range uint64(5000) {
		f.Add(key(&b, i))
	}
	f2, _ := New(g, slices.Clone(words))
	for i := range uint64(5000) {
		if !f2.Has(key(&b, i)) {
			t.Fatalf("reopened filter misses key %d", i)
		}
	}
	if f2.Count() != 0 {
		t.Fatalf("reopened Count = %d, want 0 until SetCount", f2.Count())
	}
}

func TestFilterHasManyMatchesHas(t *testing.T) {
	r := testseed.New(t)
	g, _ := Plan(10000, 0.1)
	f, _ := New(g, nil)
	var b [8]byte
	for i := range uint64(10000) {
		f.Add(key(&b, i))
	}
	for _, n := range []int{0, 1, 31, 32, 33, 100, 1000} {
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = key(new([8]byte), r.Uint64N(20000)) // half present
		}
		out := f.HasMany(keys, make([]bool, 3, 2000))
		if len(out) != n {
			t.Fatalf("HasMany of %d keys returned %d answers", n, len(out))
		}
		for i, k := range keys {
			if out[i] != f.Has(k) {
				t.Fatalf("HasMany[%d] = %v, Has = %v", i, out[i], f.Has(k))
			}
		}
	}
}

// measureFPR returns the fraction of the keys absentBase..absentBase+m that
// has reports present.
func measureFPR(m uint64, has func([]byte) bool) float64 {
	var b [8]byte
	fp := 0
	for i := range m {
		if has(key(&b, absentBase+i)) {
			fp++
		}
	}
	return float64(fp) / float64(m)
}

// TestFilterFPR fills a filter to capacity and measures its false-positive
// rate over 2e6 absent keys, under each derivation (with a layer's salt
// for DeriveMix, as Plan makes it for DeriveMul): it must be within 15% of
// the configured rate and of EstimateFPR. At 0.001 K is 10, so DeriveMul's
// positions come from two kinds of draw.
func TestFilterFPR(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	const n, m = 500_000, 2_000_000
	for _, c := range []struct {
		rate float64
		d    Derivation
		salt uint64
	}{{0.1, DeriveMul, 0}, {0.01, DeriveMul, 0}, {0.001, DeriveMul, 0}, {0.01, DeriveMul, LayerSalt(3)}, {0.01, DeriveMix, LayerSalt(0)}, {0.001, DeriveMix, 0}} {
		rate := c.rate
		g, err := Plan(n, rate)
		if err != nil {
			t.Fatal(err)
		}
		if g.Derivation != DeriveMul {
			t.Fatalf("Plan gave derivation %v, want mul", g.Derivation)
		}
		g.Derivation, g.Salt = c.d, c.salt
		f, _ := New(g, nil)
		var b [8]byte
		for i := range uint64(n) {
			f.Add(key(&b, i))
		}
		got := measureFPR(m, f.Has)
		est := EstimateFPR(g, n)
		t.Logf("rate %v %v salt %#x: k=%d %.2f bits/key, measured FPR %.6f (%.3fx), estimated %.6f",
			rate, c.d, c.salt, g.K, float64(g.Bits())/n, got, got/rate, est)
		if math.Abs(got/rate-1) > 0.15 {
			t.Errorf("rate %v: measured FPR %v is not within 15%% of the configured rate", rate, got)
		}
		if math.Abs(got/est-1) > 0.15 {
			t.Errorf("rate %v: measured FPR %v is not within 15%% of EstimateFPR %v", rate, got, est)
		}
	}
}

// TestConcurrentFilter runs writers adding disjoint keys to one filter with
// readers checking the keys each writer has finished: atomic OR must lose
// no bit, and no reader may miss a key whose Add has returned.
func TestConcurrentFilter(t *testing.T) {
	const writers, per = 4, 20_000
	g, _ := Plan(writers*per, 0.01)
	f, _ := New(g, nil)
	var done [writers]atomic.Uint64
	var misses atomic.Int64
	var wg, readers sync.WaitGroup
	stop := make(chan struct{})
	for rd := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var b [8]byte
			x := uint64(rd) + 1
			for {
				select {
				case <-stop:
					return
				default:
				}
				x = x*6364136223846793005 + 1442695040888963407
				w := (x >> 33) % writers
				if d := done[w].Load(); d > 0 && !f.Has(key(&b, w*per+(x>>1)%d)) {
					misses.Add(1)
				}
			}
		}()
	}
	for w := range uint64(writers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [8]byte
			for i := range uint64(per) {
				f.Add(key(&b, w*per+i))
				done[w].Store(i + 1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if misses.Load() != 0 {
		t.Fatalf("%d lookups missed keys whose Add had returned", misses.Load())
	}
	var b [8]byte
	for i := range uint64(writers * per) {
		if !f.Has(key(&b, i)) {
			t.Fatalf("key %d lost after concurrent adds", i)
		}
	}
	if c := f.Count(); c > writers*per || c < writers*per*98/100 {
		t.Fatalf("Count %d after %d distinct adds", c, writers*per)
	}
}

// TestSetHash: SetHash sets exactly AddHash's bits, leaves the count alone,
// and returns the block AddHash writes.
func TestSetHash(t *testing.T) {
	g, err := Plan(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := New(g, nil)
	b, _ := New(g, nil)
	for i := 0; i < 500; i++ {
		h := Hash([]byte{byte(i), byte(i >> 8)})
		a.AddHash(h)
		block := b.SetHash(h)
		if want, _ := g.Locate(h, nil); block != want {
			t.Fatalf("key %d: SetHash block %d, Locate says %d", i, block, want)
		}
	}
	for i, w := range a.Words() {
		if b.Words()[i] != w {
			t.Fatalf("word %d: SetHash %x, AddHash %x", i, b.Words()[i], w)
		}
	}
	if b.Count() != 0 {
		t.Fatalf("SetHash changed the count to %d", b.Count())
	}
}
