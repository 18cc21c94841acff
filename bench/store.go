package bench

import (
	"fmt"
	"time"

	"github.com/filterstore/filterstore/store"
)

// StoreFilter is a filterstore store.Bloom or store.Cuckoo in a mapped file,
// in a store of its own: the store path of the comparison.
type StoreFilter struct {
	s    *store.Store
	dir  string
	kind string // "bloom" or "cuckoo"
	n    uint64
	bf   *store.Bloom
	cf   *store.Cuckoo
}

// storeName is the one filter's name in a benchmark store.
const storeName = "bench"

// storeOptions turns off the periodic checkpoint so that no background
// work runs during a measurement.
func storeOptions() *store.Options { return &store.Options{CheckpointEvery: -1} }

func newStoreBloom(cfg Config) (Filter, error) { return CreateStore(cfg, "bloom") }

func newStoreCuckoo(cfg Config) (Filter, error) { return CreateStore(cfg, "cuckoo") }

// CreateStore opens a new store in cfg.Dir with one empty filter of kind
// "bloom" (non-scaling, capacity N at FPR) or "cuckoo" (capacity N, b=4,
// f=16, no expansion).
func CreateStore(cfg Config, kind string) (*StoreFilter, error) {
	s, err := store.Open(cfg.Dir, storeOptions())
	if err != nil {
		return nil, err
	}
	a := &StoreFilter{s: s, dir: cfg.Dir, kind: kind, n: cfg.N}
	switch kind {
	case "bloom":
		a.bf, err = s.CreateBloom(storeName, store.BloomConfig{Capacity: cfg.N, ErrorRate: cfg.FPR, NonScaling: true})
	case "cuckoo":
		a.cf, err = s.CreateCuckoo(storeName, store.CuckooConfig{Capacity: cfg.N, BucketSize: 4, FingerprintBits: 16})
	default:
		err = fmt.Errorf("bench: no store kind %q", kind)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return a, nil
}

// ReopenStore opens the store a StoreFilter of kind left in dir, timing
// Open plus the handle lookup.
func ReopenStore(dir, kind string, n uint64) (*StoreFilter, time.Duration, error) {
	t0 := time.Now()
	s, err := store.Open(dir, storeOptions())
	if err != nil {
		return nil, 0, err
	}
	a := &StoreFilter{s: s, dir: dir, kind: kind, n: n}
	switch kind {
	case "bloom":
		a.bf, err = s.Bloom(storeName)
	case "cuckoo":
		a.cf, err = s.Cuckoo(storeName)
	default:
		err = fmt.Errorf("bench: no store kind %q", kind)
	}
	d := time.Since(t0)
	if err != nil {
		s.Close()
		return nil, 0, err
	}
	return a, d, nil
}

// Add adds key through the durable path (a WAL record per add under
// SyncAlways); the comparison builds with Build instead.
func (a *StoreFilter) Add(key []byte) bool {
	var err error
	if a.bf != nil {
		_, err = a.bf.Add(key)
	} else {
		err = a.cf.Add(key)
	}
	return err == nil
}

// Build implements Builder with the store's Load.
func (a *StoreFilter) Build(keys *Keys) (int, error) {
	if a.bf != nil {
		return 0, a.bf.Load(store.Keys(keys.All()))
	}
	return 0, a.cf.Load(store.Keys(keys.All()))
}

// Has reports whether key may be in the filter.
func (a *StoreFilter) Has(key []byte) bool {
	if a.bf != nil {
		return a.bf.Has(key)
	}
	return a.cf.Has(key)
}

// HasMany implements Batcher with HasManyInto.
func (a *StoreFilter) HasMany(keys [][]byte, out []bool) []bool {
	if a.bf != nil {
		return a.bf.HasManyInto(out, keys)
	}
	return a.cf.HasManyInto(out, keys)
}

// BitsPerKey is the data bits of the filter's layers over n.
func (a *StoreFilter) BitsPerKey() float64 {
	var info store.Info
	var err error
	perUnit := uint64(512) // bits per bloom block
	if a.bf != nil {
		info, err = a.bf.Info()
	} else {
		info, err = a.cf.Info()
		perUnit = 64 // bits per cuckoo bucket
	}
	if err != nil {
		return 0
	}
	var b uint64
	for _, l := range info.LayerInfo {
		b += l.Size * perUnit
	}
	return float64(b) / float64(a.n)
}

// Close closes the store, leaving its files in its directory.
func (a *StoreFilter) Close() error { return a.s.Close() }

// Dir returns the store's directory.
func (a *StoreFilter) Dir() string { return a.dir }
