package cuckoo

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
)

// MaxLayers bounds the number of layers of a Chain; an add that would need
// one more fails with ErrFull.
const MaxLayers = 256

// MaxExpansion bounds Config.Expansion.
const MaxExpansion = 64

// Config configures a Chain. Zero values of BucketSize, FingerprintBits and
// MaxIterations select the defaults.
type Config struct {
	// Capacity is the number of items layer 0 is sized for (Plan). >= 1.
	Capacity uint64
	// BucketSize is the slots per bucket, 1..16. Default 4.
	BucketSize int
	// FingerprintBits is the bits per fingerprint, 4..16, with
	// BucketSize*FingerprintBits <= 64. Default 16.
	FingerprintBits int
	// MaxIterations bounds the buckets an insert examines, 0..
	// MaxIterationsLimit. Default 500.
	MaxIterations int
	// Expansion is the growth factor of layer capacities: layer i holds
	// Capacity*Expansion^i (1 makes equal layers). 0, the default, means
	// no expansion: a full filter refuses adds with ErrFull. 0..64.
	Expansion uint
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.BucketSize == 0 {
		c.BucketSize = DefaultBucketSize
	}
	if c.FingerprintBits == 0 {
		c.FingerprintBits = DefaultFingerprintBits
	}
	if c.MaxIterations == 0 {
		c.MaxIterations = MaxIterations
	}
	return c
}

// Validate fills defaults and reports every invalid field at once; each
// error wraps ErrInvalid and names the field.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Capacity < 1 {
		errs = append(errs, fmt.Errorf("cuckoo: %w: Capacity must be >= 1, got 0", ErrInvalid))
	}
	if c.MaxIterations < 1 || c.MaxIterations > MaxIterationsLimit {
		errs = append(errs, fmt.Errorf("cuckoo: %w: MaxIterations must be in 0..%d (0 = %d), got %d", ErrInvalid, MaxIterationsLimit, MaxIterations, c.MaxIterations))
	}
	if c.Expansion > MaxExpansion {
		errs = append(errs, fmt.Errorf("cuckoo: %w: Expansion must be in 0..%d, got %d", ErrInvalid, MaxExpansion, c.Expansion))
	}
	if err := (Geometry{Buckets: 1, BucketSize: c.BucketSize, FingerprintBits: c.FingerprintBits}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if _, err := Plan(c.Capacity, c.BucketSize, c.FingerprintBits); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LayerParams returns the capacity and geometry of layer i of a chain
// configured by cfg: capacity Capacity*Expansion^i, sized by Plan, with salt
// LayerSalt(i).
func LayerParams(cfg Config, i int) (capacity uint64, g Geometry, err error) {
	if err := cfg.Validate(); err != nil {
		return 0, Geometry{}, err
	}
	cfg = cfg.withDefaults()
	if i < 0 || i >= MaxLayers || (i > 0 && cfg.Expansion == 0) {
		return 0, Geometry{}, fmt.Errorf("cuckoo: %w: layer must be in 0..%d (Expansion %d), got %d", ErrInvalid, layerLimit(cfg)-1, cfg.Expansion, i)
	}
	capacity = cfg.Capacity
	for k := 0; k < i; k++ {
		hi, lo := bits.Mul64(capacity, uint64(cfg.Expansion))
		if hi != 0 {
			return 0, Geometry{}, fmt.Errorf("cuckoo: %w: capacity of layer %d overflows (Capacity %d, Expansion %d)", ErrInvalid, i, cfg.Capacity, cfg.Expansion)
		}
		capacity = lo
	}
	g, err = Plan(capacity, cfg.BucketSize, cfg.FingerprintBits)
	if err != nil {
		return 0, Geometry{}, fmt.Errorf("cuckoo: layer %d: %w", i, err)
	}
	g.Salt = LayerSalt(i)
	return capacity, g, nil
}

func layerLimit(cfg Config) int {
	if cfg.Expansion == 0 {
		return 1
	}
	return MaxLayers
}

// Allocator returns zeroed words for a new layer: exactly g.Words() of them.
// The store allocates a mapped layer file; nil means make.
type Allocator func(layer int, g Geometry) ([]uint64, error)

// WordsFunc returns the Words through which a mutation of layer i (filter
// f) reads and writes; the store returns its capturing overlay.
type WordsFunc func(layer int, f *Filter) Words

// Chain is a cuckoo filter with expansion layers. Lookups are lock-free;
// mutations are serialized by a mutex.
type Chain struct {
	cfg    Config // defaults filled, valid
	alloc  Allocator
	mu     sync.Mutex
	layers atomic.Pointer[[]*Filter] // immutable slice, oldest first
}

// NewChain returns an empty chain with one layer allocated by alloc.
func NewChain(cfg Config, alloc Allocator) (*Chain, error) {
	return ResumeChain(cfg, nil, alloc)
}

// ResumeChain returns a chain over existing layers (oldest first), as the
// store reopens them. Layer i must have the geometry LayerParams(cfg, i),
// but for its Derivation, which may be any: a layer planned before
// DeriveMul keeps DeriveMix, one planned before DeriveLocal keeps
// DeriveMul, and layers added later get DeriveLocal. With no layers it is
// NewChain.
func ResumeChain(cfg Config, layers []*Filter, alloc Allocator) (*Chain, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Chain{cfg: cfg.withDefaults(), alloc: alloc}
	if len(layers) > layerLimit(c.cfg) {
		return nil, fmt.Errorf("cuckoo: %w: layers: at most %d with Expansion %d, got %d", ErrInvalid, layerLimit(c.cfg), c.cfg.Expansion, len(layers))
	}
	ls := make([]*Filter, len(layers))
	for i, f := range layers {
		if f == nil {
			return nil, fmt.Errorf("cuckoo: %w: layers[%d] is nil", ErrInvalid, i)
		}
		_, g, err := LayerParams(c.cfg, i)
		if err != nil {
			return nil, err
		}
		g.Derivation = f.Geometry().Derivation // New validated it
		if f.Geometry() != g {
			return nil, fmt.Errorf("cuckoo: %w: layers[%d] has geometry %+v, config implies %+v", ErrInvalid, i, f.Geometry(), g)
		}
		ls[i] = f
	}
	if len(ls) == 0 {
		f, err := c.newLayer(0)
		if err != nil {
			return nil, err
		}
		ls = append(ls, f)
	}
	c.layers.Store(&ls)
	return c, nil
}

func (c *Chain) newLayer(i int) (*Filter, error) {
	_, g, err := LayerParams(c.cfg, i)
	if err != nil {
		return nil, err
	}
	var words []uint64
	if c.alloc != nil {
		if words, err = c.alloc(i, g); err != nil {
			return nil, fmt.Errorf("cuckoo: allocate layer %d: %w", i, err)
		}
		if words == nil {
			return nil, fmt.Errorf("cuckoo: %w: allocator returned nil words for layer %d", ErrInvalid, i)
		}
	}
	return New(g, words)
}

// Config returns the chain's configuration with defaults filled.
func (c *Chain) Config() Config { return c.cfg }

// Layers returns a copy of the layer list, oldest first.
func (c *Chain) Layers() []*Filter {
	ls := *c.layers.Load()
	return append([]*Filter(nil), ls...)
}

// Items returns the number of items over all layers.
func (c *Chain) Items() uint64 {
	var n uint64
	for _, f := range *c.layers.Load() {
		n += f.Count()
	}
	return n
}

// HasHash reports whether h may be in some layer (newest first). Lock-free.
func (c *Chain) HasHash(h uint64) bool {
	ls := *c.layers.Load()
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].HasHash(h) {
			return true
		}
	}
	return false
}

// Has reports whether key may have been added.
func (c *Chain) Has(key []byte) bool { return c.HasHash(Hash(key)) }

// CountHash returns the sum over layers of Filter.CountHash: at least the
// number of copies of h added and not deleted; CountUnknown if a layer's
// count is unknown.
func (c *Chain) CountHash(h uint64) uint64 {
	var n uint64
	for _, f := range *c.layers.Load() {
		k := f.CountHash(h)
		if k == CountUnknown {
			return CountUnknown
		}
		n += k
	}
	return n
}

// Count returns CountHash(Hash(key)).
func (c *Chain) Count(key []byte) uint64 { return c.CountHash(Hash(key)) }

// AddHash inserts h into the newest layer. When that layer is full and
// Expansion > 0, h goes into an older layer with room, else a new layer is
// allocated and h goes there; otherwise the error wraps ErrFull. Even with
// expansion, an item added many times fails with ErrFull once both its
// buckets are full in every layer and the newest layer is less than half
// its capacity (a layer holds at most 2*BucketSize copies of one item):
// a hot item does not grow the chain.
func (c *Chain) AddHash(h uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addLocked(nil, h)
}

// Add inserts key; see AddHash.
func (c *Chain) Add(key []byte) error { return c.AddHash(Hash(key)) }

// AddHashTo is AddHash with every layer mutation going through wf.
func (c *Chain) AddHashTo(wf WordsFunc, h uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addLocked(wf, h)
}

// AddNXHash inserts h only if no layer may already hold it. It reports
// whether h was inserted: false means h was (maybe) present.
func (c *Chain) AddNXHash(h uint64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hasLocked(nil, h) {
		return false, nil
	}
	err := c.addLocked(nil, h)
	return err == nil, err
}

// AddNX inserts key if not (maybe) present; see AddNXHash.
func (c *Chain) AddNX(key []byte) (bool, error) { return c.AddNXHash(Hash(key)) }

// AddNXHashTo is AddNXHash with every layer access going through wf.
func (c *Chain) AddNXHashTo(wf WordsFunc, h uint64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hasLocked(wf, h) {
		return false, nil
	}
	err := c.addLocked(wf, h)
	return err == nil, err
}

// DeleteHash removes one copy of h from the newest layer holding a matching
// fingerprint and reports whether it found one. Delete only items that were
// added. With several layers (each with its own salt) there is a further
// hazard: if h's fingerprint also matches, by a false positive, another
// item's entry in a newer layer than the one holding h's copy, that entry
// is removed instead, and the other item may disappear. Its probability per
// delete is about the false-positive rate of the newer layers,
// ~2*BucketSize*load/2^FingerprintBits each (1e-4 at b=4, f=16); a single
// layer (Expansion 0) is free of it. TestChainModel measures it.
func (c *Chain) DeleteHash(h uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteLocked(nil, h)
}

// Delete removes one copy of key; see DeleteHash.
func (c *Chain) Delete(key []byte) bool { return c.DeleteHash(Hash(key)) }

// DeleteHashFrom is DeleteHash with every layer mutation going through wf.
func (c *Chain) DeleteHashFrom(wf WordsFunc, h uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteLocked(wf, h)
}

func (c *Chain) words(wf WordsFunc, i int, f *Filter) Words {
	if wf == nil {
		return f.own
	}
	return wf(i, f)
}

func (c *Chain) hasLocked(wf WordsFunc, h uint64) bool {
	ls := *c.layers.Load()
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].HasHashIn(c.words(wf, i, ls[i]), h) {
			return true
		}
	}
	return false
}

func (c *Chain) addLocked(wf WordsFunc, h uint64) error {
	ls := *c.layers.Load()
	newest := len(ls) - 1
	err := ls[newest].InsertTo(c.words(wf, newest, ls[newest]), h, c.cfg.MaxIterations)
	if err == nil || !errors.Is(err, ErrFull) || c.cfg.Expansion == 0 {
		return err
	}
	// Older layers may have room after deletes; a failure is rare, so the
	// extra searches are cheap overall.
	for i := newest - 1; i >= 0; i-- {
		if ls[i].InsertTo(c.words(wf, i, ls[i]), h, c.cfg.MaxIterations) == nil {
			return nil
		}
	}
	// Below half its capacity, the newest layer does not expand for a key
	// whose two buckets hold nothing but copies of it: one hot item with
	// 2*BucketSize copies filling both its buckets in every layer.
	// Expanding for it would grow the chain geometrically per
	// 2*BucketSize copies. (A failure below half for another reason, a
	// small MaxIterations, expands.)
	capacity, _, lerr := LayerParams(c.cfg, newest)
	if lerr != nil {
		return lerr
	}
	if ls[newest].Count() < capacity/2 && ls[newest].CopiesFill(c.words(wf, newest, ls[newest]), h) {
		return fmt.Errorf("cuckoo: %w: buckets of this item full in every layer (too many copies of one item; newest layer holds %d of capacity %d)", ErrFull, ls[newest].Count(), capacity)
	}
	if len(ls) >= MaxLayers {
		return fmt.Errorf("cuckoo: %w: all %d layers full", ErrFull, MaxLayers)
	}
	f, lerr := c.newLayer(len(ls))
	if lerr != nil {
		return lerr
	}
	nls := append(append(make([]*Filter, 0, len(ls)+1), ls...), f)
	c.layers.Store(&nls)
	return f.InsertTo(c.words(wf, len(ls), f), h, c.cfg.MaxIterations)
}

func (c *Chain) deleteLocked(wf WordsFunc, h uint64) bool {
	ls := *c.layers.Load()
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].DeleteFrom(c.words(wf, i, ls[i]), h) {
			return true
		}
	}
	return false
}
