package store

import (
	"fmt"
	"testing"
)

// BenchmarkReadOnlyHas measures lookups of a read-only store opened beside
// its writer, where the writer logged adds after its last checkpoint: the
// read-only store answers from the files with those records on top (its
// overlay). A filter of 1e7 capacity holds 5e6 loaded keys (in the files)
// and then `after` keys added one batch of 1000 at a time (only in the
// WAL): none (no overlay: the baseline), 10,000 (about 5% of a Bloom
// filter's blocks noted) or 1,000,000 (most). Hits are loaded keys,
// late-hits keys added after the checkpoint, misses keys never added.
// Kinds: Bloom, cuckoo, counting.
func BenchmarkReadOnlyHas(b *testing.B) {
	const capacity, loaded = 10_000_000, 5_000_000
	for _, kind := range []string{"bloom", "cuckoo", "counting"} {
		for _, after := range []uint64{0, 10_000, 1_000_000} {
			// The store is made inside the run, so that a -bench pattern
			// that leaves it out skips making it.
			b.Run(fmt.Sprintf("%s/after=%d", kind, after), func(b *testing.B) { benchReadOnlyHas(b, kind, after, capacity, loaded) })
		}
	}
}

// benchReadOnlyHas is BenchmarkReadOnlyHas for one kind and one number of
// keys added after the checkpoint.
func benchReadOnlyHas(b *testing.B, kind string, after, capacity, loaded uint64) {
	dir := b.TempDir()
	w, err := Open(dir, &Options{Sync: SyncInterval, CheckpointEvery: -1, CheckpointBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	var load func() error
	var addMany func([][]byte) error
	switch kind {
	case "bloom":
		f, err := w.CreateBloom("f", BloomConfig{Capacity: capacity, ErrorRate: 0.01, NonScaling: true})
		if err != nil {
			b.Fatal(err)
		}
		load = func() error { return f.Load(Keys(benchKeys(0, loaded))) }
		addMany = func(k [][]byte) error { _, err := f.AddMany(k); return err }
	case "cuckoo":
		f, err := w.CreateCuckoo("f", CuckooConfig{Capacity: capacity, NonScaling: true})
		if err != nil {
			b.Fatal(err)
		}
		load = func() error { return f.Load(Keys(benchKeys(0, loaded))) }
		addMany = func(k [][]byte) error { _, err := f.AddMany(k); return err }
	case "counting":
		f, err := w.CreateCounting("f", BloomConfig{Capacity: capacity, ErrorRate: 0.01})
		if err != nil {
			b.Fatal(err)
		}
		load = func() error { return f.Load(Keys(benchKeys(0, loaded))) }
		addMany = func(k [][]byte) error { _, err := f.AddMany(k); return err }
	}
	if err := load(); err != nil {
		b.Fatal(err)
	}
	for i := uint64(0); i < after; i += 1000 {
		if err := addMany(benchKeyBatch(loaded+i, 1000)); err != nil {
			b.Fatal(err)
		}
	}
	ro, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	var has func([]byte) bool
	switch kind {
	case "bloom":
		f, err := ro.Bloom("f")
		if err != nil {
			b.Fatal(err)
		}
		has = f.Has
	case "cuckoo":
		f, err := ro.Cuckoo("f")
		if err != nil {
			b.Fatal(err)
		}
		has = f.Has
	case "counting":
		f, err := ro.Counting("f")
		if err != nil {
			b.Fatal(err)
		}
		has = f.Has
	}
	for _, c := range []struct {
		name   string
		lo, hi uint64
		want   bool
	}{
		{"hit", 0, loaded, true},
		{"late-hit", loaded, loaded + after, true},
		{"miss", 1 << 40, 1<<40 + loaded, false},
	} {
		if c.lo == c.hi {
			continue // no late keys
		}
		b.Run(c.name, func(b *testing.B) {
			k := make([]byte, 8)
			found := 0
			i := uint64(0)
			for b.Loop() {
				putBenchKey(k, c.lo+(i*0x9e3779b97f4a7c15)%(c.hi-c.lo))
				if has(k) {
					found++
				}
				i++
			}
			if c.want && found != b.N {
				b.Fatalf("%d of %d added keys found", found, b.N)
			}
			b.ReportMetric(float64(found)/float64(b.N), "found/op")
		})
	}
	if err := ro.Close(); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
