package store

// Issue #9 D: no lookup answers "absent" for an item added before, whatever
// Close, Drop or Rename do meanwhile, and closed or dropped handles answer the safe
// way for every kind of lookup.

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
)

// kinds is one filter of every kind in a store, with n keys (bitmap: n
// bits) added.
type kinds struct {
	b *Bloom
	c *Cuckoo
	n *Counting
	m *Bitmap
}

func fillKinds(t *testing.T, s *Store, n int) kinds { return fillKindsAs(t, s, "", n) }

// fillKindsAs is fillKinds with the filters named prefix+"b", "c", "n"
// and "m".
func fillKindsAs(t *testing.T, s *Store, prefix string, n int) kinds {
	t.Helper()
	var k kinds
	var err error
	k.b, err = s.CreateBloom(prefix+"b", BloomConfig{Capacity: uint64(n)})
	must(t, err)
	k.c, err = s.CreateCuckoo(prefix+"c", CuckooConfig{Capacity: uint64(2 * n)})
	must(t, err)
	k.n, err = s.CreateCounting(prefix+"n", BloomConfig{Capacity: uint64(n)})
	must(t, err)
	k.m, err = s.CreateBitmap(prefix+"m", uint64(n))
	must(t, err)
	must(t, k.b.Load(rangeKeys(0, n)))
	must(t, k.c.Load(rangeKeys(0, n)))
	must(t, k.n.Load(rangeKeys(0, n)))
	for i := 0; i < n; i += 7 {
		must(t, second(k.m.Set(uint64(i))))
	}
	return k
}

// misses runs every kind of lookup of added keys and returns how many
// answered "absent" (or a zero count).
func (k kinds) misses(n int, hs []uint64) int {
	bad := 0
	for i := 0; i < n; i += 97 {
		h := Hash(key(i))
		if !k.b.HasHash(h) {
			bad++
		}
		if !k.c.HasHash(h) || k.c.CountHash(h) == 0 {
			bad++
		}
		if !k.n.HasHash(h) || k.n.CountHash(h) == 0 {
			bad++
		}
	}
	for i := 0; i < n; i += 7 * 13 {
		if !k.m.Get(uint64(i)) {
			bad++
		}
	}
	for _, v := range k.b.HasManyHash(hs) {
		if !v {
			bad++
		}
	}
	for _, v := range k.c.HasMany([][]byte{key(1), key(2), key(3)}) {
		if !v {
			bad++
		}
	}
	return bad
}

// TestLookupsRacingCloseAndDrop: lookups of every kind on added keys,
// running while Close, Drop or a Rename over the filters unmap the files,
// never answer "absent": a lookup that read the zero pages replacing a
// mapping notices. The handles of the filters renamed over them keep
// answering from their own files.
func TestLookupsRacingCloseAndDrop(t *testing.T) {
	const n = 20_000
	hs := make([]uint64, 2000)
	for i := range hs {
		hs[i] = Hash(key(i * 7))
	}
	for _, what := range []string{"close", "drop", "rename"} {
		t.Run(what, func(t *testing.T) {
			for round := 0; round < 5; round++ {
				// SyncInterval: the fill's bitmap sets need no fsync each
				// (the lookups, not durability, are the subject).
				s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
				k := fillKinds(t, s, n)
				var next kinds // renamed over k
				if what == "rename" {
					next = fillKindsAs(t, s, "next.", n)
				}
				var bad atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				stop := atomic.Bool{}
				for g := 0; g < 3; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for !stop.Load() {
							bad.Add(int64(k.misses(n, hs)))
							if next.b != nil {
								bad.Add(int64(next.misses(n, hs)))
							}
						}
						// And once more after the unmapping.
						bad.Add(int64(k.misses(n, hs)))
						if next.b != nil {
							bad.Add(int64(next.misses(n, hs)))
						}
					}()
				}
				close(start)
				switch what {
				case "close":
					must(t, s.Close())
				case "drop":
					for _, name := range []string{"b", "c", "n", "m"} {
						must(t, s.Drop(name))
					}
				case "rename":
					for _, name := range []string{"b", "c", "n", "m"} {
						must(t, s.Rename("next."+name, name))
					}
				}
				stop.Store(true)
				wg.Wait()
				if what != "close" {
					must(t, s.Close())
				}
				if bad.Load() > 0 {
					t.Fatalf("round %d: %d lookups of added keys answered absent during %s", round, bad.Load(), what)
				}
			}
		})
	}
}

// TestClosedHandlesAnswerMaybe: after Close, Drop or a Rename over the
// filter, every lookup gives the safe answer: Has and Get true, Count
// math.MaxUint64 ("unknown").
func TestClosedHandlesAnswerMaybe(t *testing.T) {
	for _, what := range []string{"close", "drop", "rename"} {
		t.Run(what, func(t *testing.T) {
			s := mustOpen(t, t.TempDir(), nil)
			k := fillKinds(t, s, 100)
			switch what {
			case "close":
				must(t, s.Close())
			case "drop":
				for _, name := range []string{"b", "c", "n", "m"} {
					must(t, s.Drop(name))
				}
				defer s.Close()
			case "rename":
				fillKindsAs(t, s, "next.", 100)
				for _, name := range []string{"b", "c", "n", "m"} {
					must(t, s.Rename("next."+name, name))
				}
				defer s.Close()
			}
			absent := key(1_000_000)
			for _, c := range []struct {
				name string
				ok   bool
			}{
				{"bloom Has", k.b.Has(absent)},
				{"bloom HasMany", k.b.HasMany([][]byte{absent})[0]},
				{"cuckoo Has", k.c.Has(absent)},
				{"cuckoo HasMany", k.c.HasMany([][]byte{absent})[0]},
				{"cuckoo Count", k.c.Count(key(1)) == math.MaxUint64},
				{"counting Has", k.n.Has(absent)},
				{"counting Count", k.n.Count(key(1)) == math.MaxUint64},
				{"bitmap Get (set bit)", k.m.Get(0)},
				{"bitmap Get (clear bit)", k.m.Get(1)},
			} {
				if !c.ok {
					t.Errorf("%s after %s: not the safe answer", c.name, what)
				}
			}
		})
	}
}

// TestLookupsRaceFreeWithCheckpoints: lookups, handle lookups by name,
// Info and List run beside mutations and checkpoints that replace filter
// metadata; run with -race.
func TestLookupsRaceFreeWithCheckpoints(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: -1, Sync: SyncInterval, SyncEvery: 1e6})
	defer s.Close()
	k := fillKinds(t, s, 2000)
	var wg sync.WaitGroup
	stop := atomic.Bool{}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			k.misses(2000, nil)
			if _, err := s.Cuckoo("c"); err != nil {
				t.Error(err)
			}
			if _, err := s.Bitmap("m"); err != nil {
				t.Error(err)
			}
			_ = k.m.Bits()
			_, _ = k.c.Info()
			_, _ = s.List()
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 1500; i++ {
			for _, err := range []error{second(k.b.Add(key(10_000 + i))), k.c.Add(key(10_000 + i)),
				k.n.Add(key(10_000 + i)), second(k.m.Set(uint64(i % 2000)))} {
				if err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for i := 0; i < 20; i++ {
		must(t, s.Checkpoint())
	}
	stop.Store(true)
	wg.Wait()
}
