package bloom

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Scalable chain parameters.
const (
	// DefaultExpansion is the capacity growth factor of a Scalable filter
	// whose Config.Expansion is 0.
	DefaultExpansion = 2
	// MaxExpansion is the largest Config.Expansion.
	MaxExpansion = 64
	// TighteningRatio is the factor each layer's error rate shrinks by
	// (Almeida et al., "Scalable Bloom Filters", 2007): layer i gets
	// ErrorRate * (1-r) * r^i, which sums to at most ErrorRate.
	TighteningRatio = 0.5
)

// Config configures a Scalable filter.
type Config struct {
	// Capacity is the number of items the first layer holds at ErrorRate;
	// >= 1. Required.
	Capacity uint64
	// ErrorRate is the false-positive rate the whole chain stays at or
	// below; in (0, 1). Required.
	ErrorRate float64
	// Expansion is the capacity ratio between consecutive layers; in
	// [1, MaxExpansion]. 0 means DefaultExpansion (2).
	Expansion uint
	// NonScaling makes the filter a single layer at the full ErrorRate
	// that refuses adds with ErrFull once it holds Capacity items.
	// Default false.
	NonScaling bool
}

// normalize returns cfg with defaults filled in, or the first problem.
func (cfg Config) normalize() (Config, error) {
	if err := validatePlanArgs(cfg.Capacity, cfg.ErrorRate); err != nil {
		return cfg, err
	}
	if cfg.Expansion == 0 {
		cfg.Expansion = DefaultExpansion
	}
	if cfg.Expansion > MaxExpansion {
		return cfg, fmt.Errorf("bloom: %w: expansion must be in [1, %d] (0 for %d), got %d",
			ErrInvalid, MaxExpansion, DefaultExpansion, cfg.Expansion)
	}
	return cfg, nil
}

// LayerParams returns the capacity, error rate and geometry (salt included)
// of layer i of a Scalable filter with configuration cfg: capacity
// Capacity * Expansion^i, error rate ErrorRate * (1-r) * r^i with
// r = TighteningRatio (the full ErrorRate for a NonScaling filter), the
// geometry planned for them, and Salt LayerSalt(i). The store uses it to
// create layer files itself.
//
// Errors wrap ErrInvalid: a bad cfg, i < 0, i > 0 for a NonScaling filter,
// a layer whose capacity overflows or whose share of the error rate is 0
// in float64, or one Plan refuses (more than MaxBlocks blocks, or a share
// below Plan's floor, which the halving shares reach after about 60
// layers at ErrorRate 0.99, 28 at 1e-10).
func LayerParams(cfg Config, i int) (capacity uint64, errorRate float64, g Geometry, err error) {
	cfg, err = cfg.normalize()
	if err != nil {
		return 0, 0, Geometry{}, err
	}
	if i < 0 || (cfg.NonScaling && i > 0) {
		limit := "i >= 0"
		if cfg.NonScaling {
			limit = "i == 0 for a non-scaling filter"
		}
		return 0, 0, Geometry{}, fmt.Errorf("bloom: %w: layer must be %s, got %d", ErrInvalid, limit, i)
	}
	capacity = cfg.Capacity
	for j := 0; j < i && cfg.Expansion > 1; j++ { // it overflows within 64; Expansion 1 keeps the capacity
		hi, lo := bits.Mul64(capacity, uint64(cfg.Expansion))
		if hi != 0 {
			return 0, 0, Geometry{}, fmt.Errorf("bloom: %w: layer %d capacity overflows (capacity %d, expansion %d)",
				ErrInvalid, i, cfg.Capacity, cfg.Expansion)
		}
		capacity = lo
	}
	errorRate = cfg.ErrorRate
	if !cfg.NonScaling {
		errorRate = cfg.ErrorRate * (1 - TighteningRatio) * math.Pow(TighteningRatio, float64(i))
		if errorRate == 0 {
			// Not the caller's rate, which is in (0, 1): its share for
			// this layer is below the smallest float64.
			return 0, 0, Geometry{}, fmt.Errorf("bloom: %w: layer %d: error rate %v leaves this layer a rate of %v x %v^%d, which is 0 in float64 (raise ErrorRate, or use NonScaling)",
				ErrInvalid, i, cfg.ErrorRate, 1-TighteningRatio, TighteningRatio, i)
		}
	}
	g, err = Plan(capacity, errorRate)
	if err != nil {
		return 0, 0, Geometry{}, fmt.Errorf("bloom: layer %d: %w", i, err)
	}
	g.Salt = LayerSalt(i)
	return capacity, errorRate, g, nil
}

// Allocator returns the zeroed words of a new layer of geometry g, exactly
// g.Words() long; the store backs them with a new mapped file. A nil
// Allocator allocates them in memory.
type Allocator func(layer int, g Geometry) ([]uint64, error)

// layer is one Filter of a Scalable chain and the count it is full at.
type layer struct {
	f        *Filter
	capacity uint64
}

// Scalable is a chain of Filters that grows by adding a layer each time the
// newest one reaches its capacity, keeping the compound false-positive rate
// at or below Config.ErrorRate.
//
// All methods are safe for concurrent use. Adds are serialized by a mutex;
// lookups take no lock: they read an immutable snapshot of the layer list,
// newest layer first, and every layer with atomic loads.
type Scalable struct {
	cfg   Config
	alloc Allocator

	mu     sync.Mutex              // serializes adds and growth
	layers atomic.Pointer[[]layer] // immutable once published; oldest first
}

// NewScalable returns an empty Scalable filter with one layer whose words
// come from alloc (nil: allocated in memory).
func NewScalable(cfg Config, alloc Allocator) (*Scalable, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	s := &Scalable{cfg: cfg, alloc: alloc}
	l, err := s.newLayer(0)
	if err != nil {
		return nil, err
	}
	s.layers.Store(&[]layer{l})
	return s, nil
}

// ResumeScalable returns a Scalable filter over existing layers, oldest
// first, as the store reopens them; their Counts must already be restored
// (Filter.SetCount). New layers come from alloc. Each layer's salt must be
// LayerSalt(i); its block count and k are taken as they are, so filters
// planned by an older Plan keep working.
func ResumeScalable(cfg Config, layers []*Filter, alloc Allocator) (*Scalable, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if len(layers) == 0 || (cfg.NonScaling && len(layers) != 1) {
		want := "at least 1"
		if cfg.NonScaling {
			want = "exactly 1 for a non-scaling filter"
		}
		return nil, fmt.Errorf("bloom: %w: layers must be %s, got %d", ErrInvalid, want, len(layers))
	}
	ls := make([]layer, len(layers))
	for i, f := range layers {
		if f == nil {
			return nil, fmt.Errorf("bloom: %w: layer %d is nil", ErrInvalid, i)
		}
		if f.g.Salt != LayerSalt(i) {
			return nil, fmt.Errorf("bloom: %w: layer %d salt must be %#x, got %#x", ErrInvalid, i, LayerSalt(i), f.g.Salt)
		}
		capacity, _, _, err := LayerParams(cfg, i)
		if err != nil {
			return nil, err
		}
		ls[i] = layer{f: f, capacity: capacity}
	}
	s := &Scalable{cfg: cfg, alloc: alloc}
	s.layers.Store(&ls)
	return s, nil
}

// newLayer creates layer i. A later layer (i > 0) the configuration
// cannot plan (LayerParams: its capacity overflows, or its share of the
// error rate is out of Plan's range) makes the filter full: ErrFull, the
// reason quoted, since the configuration was valid.
func (s *Scalable) newLayer(i int) (layer, error) {
	capacity, _, g, err := LayerParams(s.cfg, i)
	if err != nil {
		if i > 0 {
			err = fmt.Errorf("bloom: %w: the scalable filter's layer %d cannot be made (%v)", ErrFull, i, err)
		}
		return layer{}, err
	}
	var words []uint64
	if s.alloc != nil {
		if words, err = s.alloc(i, g); err != nil {
			return layer{}, fmt.Errorf("bloom: allocate layer %d: %w", i, err)
		}
		if words == nil {
			return layer{}, fmt.Errorf("bloom: %w: allocator returned nil words for layer %d", ErrInvalid, i)
		}
	}
	f, err := New(g, words)
	if err != nil {
		return layer{}, fmt.Errorf("bloom: layer %d: %w", i, err)
	}
	return layer{f: f, capacity: capacity}, nil
}

// Config returns the configuration with defaults filled in.
func (s *Scalable) Config() Config { return s.cfg }

// Layers returns the layers, oldest first.
func (s *Scalable) Layers() []*Filter {
	ls := *s.layers.Load()
	out := make([]*Filter, len(ls))
	for i, l := range ls {
		out[i] = l.f
	}
	return out
}

// Count returns the sum of the layers' Counts.
func (s *Scalable) Count() uint64 {
	var n uint64
	for _, l := range *s.layers.Load() {
		n += l.f.Count()
	}
	return n
}

// EstimateFPR returns the expected compound false-positive rate,
// 1 - prod(1 - EstimateFPR(layer)), from the layers' Counts.
func (s *Scalable) EstimateFPR() float64 {
	pass := 1.0
	for _, l := range *s.layers.Load() {
		pass *= 1 - l.f.EstimateFPR()
	}
	return 1 - pass
}

// Add adds key unless it may already be present in some layer, and reports
// whether it did (false: already present or a false positive), as
// RedisBloom's BF.ADD does on a scaling filter. When the newest layer holds
// its capacity, Add first adds a layer; a NonScaling filter returns ErrFull
// instead, and so does a filter whose next layer cannot be planned (its
// capacity or its share of the error rate out of range, after many
// layers); an allocation failure is returned wrapped with the layer's
// number (errors.Is and errors.As see the Allocator's error).
func (s *Scalable) Add(key []byte) (bool, error) { return s.AddHash(Hash(key)) }

// AddHash is Add for a key whose Hash is h.
func (s *Scalable) AddHash(h uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := *s.layers.Load()
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].f.HasHash(h) {
			return false, nil
		}
	}
	last := ls[len(ls)-1]
	if last.f.Count() >= last.capacity {
		if s.cfg.NonScaling {
			return false, fmt.Errorf("bloom: %w: non-scaling filter holds its capacity %d", ErrFull, last.capacity)
		}
		l, err := s.newLayer(len(ls))
		if err != nil {
			return false, err
		}
		// Publish a new slice: readers may hold the old one.
		next := make([]layer, len(ls), len(ls)+1)
		copy(next, ls)
		next = append(next, l)
		s.layers.Store(&next)
		last = l
	}
	return last.f.AddHash(h), nil
}

// Has reports whether key may be in the filter: false means definitely not.
func (s *Scalable) Has(key []byte) bool { return s.HasHash(Hash(key)) }

// HasHash is Has for a key whose Hash is h.
func (s *Scalable) HasHash(h uint64) bool {
	ls := *s.layers.Load()
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].f.HasHash(h) {
			return true
		}
	}
	return false
}

// HasMany is Filter.HasMany for the chain.
func (s *Scalable) HasMany(keys [][]byte, out []bool) []bool {
	out = resize(out, len(keys))
	var hs [batchSize]uint64
	ls := *s.layers.Load()
	for i := 0; i < len(keys); i += batchSize {
		n := min(batchSize, len(keys)-i)
		for j := range n {
			hs[j] = Hash(keys[i+j])
		}
		hasBatchLayers(ls, hs[:n], out[i:i+n])
	}
	return out
}

// HasManyHash is HasMany for keys given by their hashes.
func (s *Scalable) HasManyHash(hs []uint64, out []bool) []bool {
	out = resize(out, len(hs))
	ls := *s.layers.Load()
	for i := 0; i < len(hs); i += batchSize {
		n := min(batchSize, len(hs)-i)
		hasBatchLayers(ls, hs[i:i+n], out[i:i+n])
	}
	return out
}

// hasBatchLayers answers len(hs) <= batchSize lookups into out, asking each
// layer, newest first, only about the keys no newer layer had.
func hasBatchLayers(ls []layer, hs []uint64, out []bool) {
	var pend [batchSize]uint64 // hashes still unanswered
	var idx [batchSize]int     // their positions in hs
	var res [batchSize]bool
	n := 0
	for j, h := range hs {
		pend[n], idx[n] = h, j
		out[j] = false
		n++
	}
	for i := len(ls) - 1; i >= 0 && n > 0; i-- {
		ls[i].f.hasBatch(pend[:n], res[:n])
		m := 0
		for j := range n {
			if res[j] {
				out[idx[j]] = true
				continue
			}
			pend[m], idx[m] = pend[j], idx[j]
			m++
		}
		n = m
	}
}
