package cuckoo

import (
	"errors"
	"strings"
	"testing"
)

// TestInvalidInput: every invalid parameter yields an error wrapping
// ErrInvalid whose message names the field; nothing panics.
func TestInvalidInput(t *testing.T) {
	good := Geometry{Buckets: 10, BucketSize: 4, FingerprintBits: 16}
	f, err := New(good, nil)
	if err != nil {
		t.Fatal(err)
	}
	otherLayer := func() *Filter {
		g := good
		g.Salt = 99
		f, _ := New(g, nil)
		return f
	}()
	cfg := Config{Capacity: 100, Expansion: 2}
	geo := func(mod func(*Geometry)) func() error {
		return func() error { g := good; mod(&g); return g.Validate() }
	}
	conf := func(mod func(*Config)) func() error {
		return func() error { c := Config{Capacity: 100}; mod(&c); _, err := NewChain(c, nil); return err }
	}
	cases := []struct {
		name, field string
		run         func() error
	}{
		{"buckets 0", "Buckets", geo(func(g *Geometry) { g.Buckets = 0 })},
		{"buckets huge", "Buckets", geo(func(g *Geometry) { g.Buckets = MaxBuckets + 1 })},
		{"bucket size 0", "BucketSize", geo(func(g *Geometry) { g.BucketSize = 0 })},
		{"bucket size -1", "BucketSize", geo(func(g *Geometry) { g.BucketSize = -1 })},
		{"bucket size 17", "BucketSize", geo(func(g *Geometry) { g.BucketSize = 17 })},
		{"fp bits 3", "FingerprintBits", geo(func(g *Geometry) { g.FingerprintBits = 3 })},
		{"fp bits 17", "FingerprintBits", geo(func(g *Geometry) { g.FingerprintBits = 17 })},
		{"b*f > 64", "bucket size * fingerprint bits", geo(func(g *Geometry) { g.BucketSize = 5 })},
		{"New bad geometry", "BucketSize", func() error { g := good; g.BucketSize = 0; _, err := New(g, nil); return err }},
		{"New short words", "len(words)", func() error { _, err := New(good, make([]uint64, 9)); return err }},
		{"New long words", "len(words)", func() error { _, err := New(good, make([]uint64, 11)); return err }},
		{"New empty words", "len(words)", func() error { _, err := New(good, []uint64{}); return err }},
		{"Plan capacity 0", "Capacity", func() error { _, err := Plan(0, 4, 16); return err }},
		{"Plan b*f", "bucket size * fingerprint bits", func() error { _, err := Plan(10, 8, 16); return err }},
		{"Plan too large", "Capacity", func() error { _, err := Plan(^uint64(0), 1, 16); return err }},
		{"InsertTo maxIter -1", "maxIter", func() error { return f.InsertTo(f.own, 1, -1) }},
		{"InsertTo maxIter past the limit", "maxIter", func() error { return f.InsertTo(f.own, 1, MaxIterationsLimit+1) }},
		{"InsertTo nil words", "w must not be nil", func() error { return f.InsertTo(nil, 1, 0) }},
		{"Apply lengths", "len(idx)", func() error { return f.Apply([]uint64{1}, nil) }},
		{"Apply index", "idx[0]", func() error { return f.Apply([]uint64{10}, []uint64{1}) }},
		{"Config capacity 0", "Capacity", conf(func(c *Config) { c.Capacity = 0 })},
		{"Config bucket size", "BucketSize", conf(func(c *Config) { c.BucketSize = 17 })},
		{"Config fp bits", "FingerprintBits", conf(func(c *Config) { c.FingerprintBits = 2 })},
		{"Config b*f", "bucket size * fingerprint bits", conf(func(c *Config) { c.BucketSize = 8 })},
		{"Config max iterations", "MaxIterations", conf(func(c *Config) { c.MaxIterations = -1 })},
		{"Config max iterations past the limit", "MaxIterations", conf(func(c *Config) { c.MaxIterations = MaxIterationsLimit + 1 })},
		{"Config expansion", "Expansion", conf(func(c *Config) { c.Expansion = 65 })},
		{"Config capacity too large", "Capacity", conf(func(c *Config) { c.Capacity = ^uint64(0); c.BucketSize = 1 })},
		{"LayerParams negative", "layer", func() error { _, _, err := LayerParams(cfg, -1); return err }},
		{"LayerParams no expansion", "layer", func() error { _, _, err := LayerParams(Config{Capacity: 1}, 1); return err }},
		{"LayerParams too many", "layer", func() error { _, _, err := LayerParams(cfg, MaxLayers); return err }},
		{"LayerParams overflow", "capacity of layer", func() error {
			_, _, err := LayerParams(Config{Capacity: 1 << 40, Expansion: 64}, 5)
			return err
		}},
		{"Resume nil layer", "layers[0]", func() error { _, err := ResumeChain(cfg, []*Filter{nil}, nil); return err }},
		{"Resume wrong geometry", "layers[0]", func() error { _, err := ResumeChain(cfg, []*Filter{otherLayer}, nil); return err }},
		{"Resume too many layers", "layers", func() error {
			_, err := ResumeChain(Config{Capacity: 100}, []*Filter{f, f}, nil)
			return err
		}},
		{"Allocator short words", "len(words)", func() error {
			_, err := NewChain(cfg, func(int, Geometry) ([]uint64, error) { return make([]uint64, 1), nil })
			return err
		}},
		{"Allocator nil words", "allocator returned nil", func() error {
			_, err := NewChain(cfg, func(int, Geometry) ([]uint64, error) { return nil, nil })
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), "cuckoo: ") || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("err %q does not name %q", err, c.field)
			}
		})
	}

	// Every problem is reported at once.
	err = Geometry{}.Validate()
	for _, field := range []string{"Buckets", "BucketSize", "FingerprintBits"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Geometry{}.Validate() = %q, missing %s", err, field)
		}
	}
	// An allocator's own error is wrapped, not replaced.
	boom := errors.New("disk full")
	if _, err := NewChain(cfg, func(int, Geometry) ([]uint64, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("allocator error = %v, want %v", err, boom)
	}
	// Defaults are accepted; DeleteFrom(nil) is false, not a panic.
	if _, err := NewChain(Config{Capacity: 1}, nil); err != nil {
		t.Errorf("NewChain(defaults) = %v", err)
	}
	if _, err := NewChain(Config{Capacity: 1, MaxIterations: MaxIterationsLimit}, nil); err != nil {
		t.Errorf("NewChain(MaxIterations: MaxIterationsLimit) = %v", err)
	}
	if f.DeleteFrom(nil, 1) {
		t.Error("DeleteFrom(nil) = true")
	}
	// HasHashIn and CountHashIn read the filter's own words through a nil
	// w (before, both panicked on it).
	if err := f.InsertTo(f.own, 7, 0); err != nil {
		t.Fatal(err)
	}
	if !f.HasHashIn(nil, 7) || f.CountHashIn(nil, 7) != 1 {
		t.Errorf("through nil words: HasHashIn %v, CountHashIn %d; want true, 1", f.HasHashIn(nil, 7), f.CountHashIn(nil, 7))
	}
}

// TestNewTooLargeForMemory: New of a valid geometry too large for any
// slice (MaxBuckets words) returns ErrInvalid; it panicked in make with
// "len out of range" (an adversarial review's finding).
func TestNewTooLargeForMemory(t *testing.T) {
	_, err := New(Geometry{Buckets: MaxBuckets, BucketSize: 4, FingerprintBits: 16}, nil)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("New(MaxBuckets buckets, nil): %v, want ErrInvalid", err)
	}
}
