package store

import "testing"

// BenchmarkNoopChange measures single changes that change nothing (a
// Bloom Add and a cuckoo AddNX of a key the filter holds, a bitmap Set of
// a set bit) under SyncInterval: no WAL write, so the change's own work
// (the commit gate, the mutex, the lookup, the fault guard of
// changeguard.go) is the whole time, where a change that logs a record
// spends most of its time in the write (BenchmarkDurableAdd).
func BenchmarkNoopChange(b *testing.B) {
	s, err := Open(b.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bl, err := s.CreateBloom("b", BloomConfig{Capacity: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	ck, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	bm, err := s.CreateBitmap("m", 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	const held = 1000
	for i := range held {
		if _, err := bl.Add(key(i)); err != nil {
			b.Fatal(err)
		}
		if err := ck.Add(key(i)); err != nil {
			b.Fatal(err)
		}
		if _, err := bm.Set(uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		change func(i int) (bool, error)
	}{
		{"bloom-Add-held", func(i int) (bool, error) { return bl.Add(key(i % held)) }},
		{"cuckoo-AddNX-held", func(i int) (bool, error) { return ck.AddNX(key(i % held)) }},
		{"bitmap-Set-set", func(i int) (bool, error) { return bm.Set(uint64(i % held)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if changed, err := c.change(i); changed || err != nil {
					b.Fatalf("change %d: %v, %v: want no change", i, changed, err)
				}
			}
		})
	}
}
