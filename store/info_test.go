package store

import "testing"

// TestInfoCountsAfterRecovery: Info's item counts, kept in memory, are
// exact across a crash (the catalog's counts at the last checkpoint plus
// the replayed records after it), in a read-only open of the crashed store
// (its overlay of those records), after recovery and after a clean reopen;
// List agrees with each handle's Info, and each Info's layers sum to it.
func TestInfoCountsAfterRecovery(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 200, Expansion: 2})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 128, Expansion: 2})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
	must(t, err)
	m, err := s.CreateBitmap("m", 1000)
	must(t, err)
	ops := func(from, to int) {
		t.Helper()
		keys := make([][]byte, 0, to-from)
		for i := from; i < to; i++ {
			keys = append(keys, key(i))
		}
		must(t, second(b.AddMany(keys)))
		must(t, second(c.AddMany(keys)))
		bt := s.NewBatch()
		for i := from; i < to; i++ {
			bt.CountingAdd(n, key(i%50))
			bt.BitmapSet(m, uint64(i*2))
			if i%5 == 0 {
				bt.CuckooDelete(c, key(i))
				bt.BitmapClear(m, uint64(i*2))
			}
		}
		must(t, second(bt.Commit()))
	}
	ops(0, 300) // reaches the catalog at the checkpoint
	must(t, s.Checkpoint())
	ops(300, 500) // only in the WAL at the crash
	want := map[string]uint64{"b": b.Card(), "c": 400, "n": 500, "m": 400}
	if got := c.Items(); got != want["c"] {
		t.Fatalf("cuckoo: %d items before the crash, want %d", got, want["c"])
	}
	if mustInfo(t, b).Layers < 2 || mustInfo(t, c).Layers < 2 {
		t.Fatalf("the Bloom and cuckoo filters did not grow: %d and %d layers", mustInfo(t, b).Layers, mustInfo(t, c).Layers)
	}
	checkInfoCounts(t, "before the crash", s, want)
	s.abandonForTest()

	r := mustOpen(t, dir, &Options{ReadOnly: true})
	checkInfoCounts(t, "read-only, before recovery", r, want)
	must(t, r.Close())

	s = mustOpen(t, dir, nil)
	checkInfoCounts(t, "after recovery", s, want)
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	checkInfoCounts(t, "after a clean reopen", s, want)
}

// checkInfoCounts checks that List and each filter's Info give the items
// of want, and that the layers' items sum to them.
func checkInfoCounts(t *testing.T, when string, s *Store, want map[string]uint64) {
	t.Helper()
	list, err := s.List()
	must(t, err)
	if len(list) != len(want) {
		t.Fatalf("%s: List has %d filters, want %d", when, len(list), len(want))
	}
	for _, in := range list {
		var h infoer
		var err error
		switch in.Kind {
		case "bloom":
			h, err = s.Bloom(in.Name)
		case "cuckoo":
			h, err = s.Cuckoo(in.Name)
		case "counting":
			h, err = s.Counting(in.Name)
		case "bitmap":
			h, err = s.Bitmap(in.Name)
		}
		must(t, err)
		one := mustInfo(t, h)
		var sum uint64
		for _, l := range one.LayerInfo {
			sum += l.Items
		}
		if in.Items != want[in.Name] || one.Items != in.Items || sum != in.Items {
			t.Errorf("%s: %s: List %d items, Info %d, its layers %d; want %d", when, in.Name, in.Items, one.Items, sum, want[in.Name])
		}
	}
}
