package bloom

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

func TestLayerParams(t *testing.T) {
	cfg := Config{Capacity: 1000, ErrorRate: 0.01}
	total := 0.0
	for i := range 10 {
		c, rate, g, err := LayerParams(cfg, i)
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(1000) << i; c != want {
			t.Errorf("layer %d capacity %d, want %d", i, c, want)
		}
		if want := 0.01 / math.Exp2(float64(i+1)); rate != want {
			t.Errorf("layer %d rate %v, want %v", i, rate, want)
		}
		if g.Salt != LayerSalt(i) {
			t.Errorf("layer %d salt %#x, want %#x", i, g.Salt, LayerSalt(i))
		}
		if EstimateFPR(g, c) > rate {
			t.Errorf("layer %d geometry %+v misses its rate", i, g)
		}
		total += rate
	}
	if total > 0.01 {
		t.Errorf("layer rates sum to %v > 0.01", total)
	}
	_, rate, _, err := LayerParams(Config{Capacity: 1000, ErrorRate: 0.01, NonScaling: true}, 0)
	if err != nil || rate != 0.01 {
		t.Errorf("non-scaling layer 0: rate %v err %v, want the full 0.01", rate, err)
	}
	c, _, _, err := LayerParams(Config{Capacity: 3, ErrorRate: 0.01, Expansion: 64}, 3)
	if err != nil || c != 3*64*64*64 {
		t.Errorf("expansion 64 layer 3: capacity %d err %v", c, err)
	}
}

// TestScalableNoFalseNegatives grows a chain through several expansions and
// checks that every added key stays present, through every lookup path.
func TestScalableNoFalseNegatives(t *testing.T) {
	r := testseed.New(t)
	for _, exp := range []uint{0, 1, 2, 3} {
		cfg := Config{Capacity: 100 + r.Uint64N(400), ErrorRate: 0.01, Expansion: exp}
		var allocated []int
		s, err := NewScalable(cfg, func(layer int, g Geometry) ([]uint64, error) {
			allocated = append(allocated, layer)
			return make([]uint64, g.Words()), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var hs []uint64
		for range 20 * cfg.Capacity {
			h := r.Uint64()
			if _, err := s.AddHash(h); err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		ls := s.Layers()
		if len(ls) < 3 || len(allocated) != len(ls) {
			t.Fatalf("expansion %d: %d layers, allocated %v", exp, len(ls), allocated)
		}
		for i, l := range allocated {
			if l != i {
				t.Fatalf("expansion %d: allocated layers %v, want 0, 1, 2, ...", exp, allocated)
			}
		}
		var sum uint64
		for i, l := range ls {
			c, _, _, _ := LayerParams(s.Config(), i)
			if i < len(ls)-1 && l.Count() != c {
				t.Errorf("expansion %d: full layer %d holds %d, capacity %d", exp, i, l.Count(), c)
			}
			sum += l.Count()
		}
		if s.Count() != sum || sum > uint64(len(hs)) {
			t.Errorf("Count %d, layers sum %d, adds %d", s.Count(), sum, len(hs))
		}
		for _, h := range hs {
			if !s.HasHash(h) {
				t.Fatalf("expansion %d: false negative for %#x", exp, h)
			}
			if ok, err := s.AddHash(h); ok || err != nil {
				t.Fatalf("expansion %d: re-add of %#x returned %v, %v", exp, h, ok, err)
			}
		}
		if i := slices.Index(s.HasManyHash(hs, nil), false); i >= 0 {
			t.Fatalf("expansion %d: HasManyHash false negative for %#x", exp, hs[i])
		}
		t.Logf("expansion %d: %d layers after %d adds, Count %d", exp, len(ls), len(hs), s.Count())
	}
}

func TestScalableHasManyMatchesHas(t *testing.T) {
	s, _ := NewScalable(Config{Capacity: 200, ErrorRate: 0.2}, nil)
	var b [8]byte
	for i := range uint64(3000) {
		s.Add(key(&b, i))
	}
	keys := make([][]byte, 5000)
	for i := range keys {
		keys[i] = key(new([8]byte), uint64(i))
	}
	out := s.HasMany(keys, nil)
	for i, k := range keys {
		if out[i] != s.Has(k) {
			t.Fatalf("HasMany[%d] = %v, Has = %v", i, out[i], s.Has(k))
		}
	}
}

func TestScalableNonScaling(t *testing.T) {
	s, err := NewScalable(Config{Capacity: 100, ErrorRate: 0.01, NonScaling: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	i := uint64(0)
	for s.Count() < 100 {
		if _, err := s.Add(key(&b, i)); err != nil {
			t.Fatalf("add %d (Count %d): %v", i, s.Count(), err)
		}
		i++
	}
	if _, err := s.Add(key(&b, i+1000)); !errors.Is(err, ErrFull) {
		t.Fatalf("add to a full non-scaling filter: %v, want ErrFull", err)
	}
	// A key already present is still answered without error.
	if ok, err := s.Add(key(&b, 0)); ok || err != nil {
		t.Fatalf("re-add to a full filter: %v, %v", ok, err)
	}
	if len(s.Layers()) != 1 {
		t.Fatalf("non-scaling filter has %d layers", len(s.Layers()))
	}
}

func TestResumeScalable(t *testing.T) {
	cfg := Config{Capacity: 100, ErrorRate: 0.01}
	s, _ := NewScalable(cfg, nil)
	var b [8]byte
	for i := range uint64(700) {
		s.Add(key(&b, i))
	}
	// Reopen from the words, as the store does from its files.
	var layers []*Filter
	for _, l := range s.Layers() {
		f, err := New(l.Geometry(), slices.Clone(l.Words()))
		if err != nil {
			t.Fatal(err)
		}
		f.SetCount(l.Count())
		layers = append(layers, f)
	}
	s2, err := ResumeScalable(cfg, layers, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Count() != s.Count() || len(s2.Layers()) != len(s.Layers()) {
		t.Fatalf("resumed Count %d layers %d, want %d %d", s2.Count(), len(s2.Layers()), s.Count(), len(s.Layers()))
	}
	for i := range uint64(700) {
		if !s2.Has(key(&b, i)) {
			t.Fatalf("resumed filter misses %d", i)
		}
	}
	for i := uint64(700); i < 2000; i++ {
		if _, err := s2.Add(key(&b, i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range uint64(2000) {
		if !s2.Has(key(&b, i)) {
			t.Fatalf("resumed and grown filter misses %d", i)
		}
	}
	if len(s2.Layers()) <= len(s.Layers()) {
		t.Fatalf("resumed filter did not grow: %d layers", len(s2.Layers()))
	}
}

// TestScalableFPR fills a chain to 4 layers and checks the compound
// false-positive rate over 1e6 absent keys stays at or below the configured
// rate.
func TestScalableFPR(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	const capacity, m = 50_000, 1_000_000
	for _, rate := range []float64{0.1, 0.01, 0.001} {
		s, _ := NewScalable(Config{Capacity: capacity, ErrorRate: rate}, nil)
		var b [8]byte
		for i := range uint64(15 * capacity) { // about fills layers 0-3
			s.Add(key(&b, i))
		}
		got := measureFPR(m, s.Has)
		t.Logf("rate %v: %d layers, Count %d, measured FPR %.6f (%.3fx), estimated %.6f",
			rate, len(s.Layers()), s.Count(), got, got/rate, s.EstimateFPR())
		if len(s.Layers()) < 3 {
			t.Errorf("only %d layers", len(s.Layers()))
		}
		if got > rate {
			t.Errorf("rate %v: compound measured FPR %v above the configured rate", rate, got)
		}
	}
}

// TestConcurrentScalable runs readers while a writer adds keys through many
// expansions: a reader must never miss a key whose Add has returned.
func TestConcurrentScalable(t *testing.T) {
	r := testseed.New(t)
	base := r.Uint64() >> 2
	s, err := NewScalable(Config{Capacity: 500, ErrorRate: 0.01}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 200_000 // 9 layers
	if racedetect.Enabled && testing.Short() {
		n = 50_000 // 7 layers: the growths the readers race, in a quarter of the adds
	}
	var done atomic.Uint64 // keys base..base+done have been added
	var wg sync.WaitGroup
	var misses atomic.Int64
	stop := make(chan struct{})
	for w := range max(2, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [8]byte
			batch := make([][]byte, 40)
			for i := range batch {
				batch[i] = make([]byte, 8)
			}
			var out []bool
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
				if !s.Has(key(&b, base+(x>>1)%d)) {
					misses.Add(1)
				}
				// Batched lookups, newest keys included.
				d = done.Load()
				for i := range batch {
					copy(batch[i], key(&b, base+d-1-uint64(i)%d))
				}
				out = s.HasMany(batch, out)
				if slices.Contains(out, false) {
					misses.Add(1)
				}
			}
		}()
	}
	var b [8]byte
	deadline := time.Now().Add(40 * time.Second)
	for i := range uint64(n) {
		if _, err := s.Add(key(&b, base+i)); err != nil {
			t.Fatal(err)
		}
		done.Store(i + 1)
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
	t.Logf("%d layers, Count %d", len(s.Layers()), s.Count())
}

// TestLayerParamsHugeIndex: with Expansion 1 the capacity never grows, so
// LayerParams takes no time that grows with i (it multiplied i times:
// about a second at 2^30, hours at 2^40), and a layer far out fails
// planning its vanishing error rate with ErrInvalid.
func TestLayerParamsHugeIndex(t *testing.T) {
	cfg := Config{Capacity: 1000, ErrorRate: 0.01, Expansion: 1}
	if c, _, _, err := LayerParams(cfg, 5); err != nil || c != 1000 {
		t.Fatalf("layer 5: capacity %d, %v; want 1000", c, err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, _, err := LayerParams(cfg, 1<<40)
		if err == nil {
			_, _, _, err = LayerParams(cfg, math.MaxInt)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("layer 2^40: %v, want ErrInvalid", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("LayerParams(Expansion 1, 2^40) still running after 30 s")
	}
}

// TestLayerParamsRateUnderflow: a configured rate inside (0, 1) whose
// share for a layer is below the smallest float64 fails with ErrInvalid
// naming the configured rate. The error used to say "error rate must be
// in (0, 1), got 0", a rate the caller never gave.
func TestLayerParamsRateUnderflow(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		layer int
	}{{5e-324, 0}, {1e-300, 100}} {
		_, _, _, err := LayerParams(Config{Capacity: 1000, ErrorRate: c.rate, Expansion: 1}, c.layer)
		if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "got 0") || !strings.Contains(err.Error(), fmt.Sprint(c.rate)) {
			t.Errorf("rate %v, layer %d: %v; want ErrInvalid naming the rate", c.rate, c.layer, err)
		}
	}
}

// TestScalableFullWhenNextLayerUnplannable: a scalable filter whose next
// layer cannot be planned (Expansion 1 keeps the capacity while each
// layer's share of the error rate shrinks) is full: ErrFull, as the store
// reports it, not ErrInvalid (the configuration was valid); every key
// added before stays present.
func TestScalableFullWhenNextLayerUnplannable(t *testing.T) {
	s, err := NewScalable(Config{Capacity: 1, ErrorRate: 0.5, Expansion: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var i int
	for i = 0; i < 100_000; i++ {
		if _, err = s.Add(fmt.Appendf(nil, "k%d", i)); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFull) || errors.Is(err, ErrInvalid) {
		t.Fatalf("after %d adds: %v, want ErrFull", i, err)
	}
	for j := range i {
		if !s.Has(fmt.Appendf(nil, "k%d", j)) {
			t.Fatalf("key %d absent", j)
		}
	}
}
