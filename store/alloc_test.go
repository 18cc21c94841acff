package store

import "testing"

// TestHandleLookupsDoNotAllocate: a lookup through any handle of a
// writer store allocates nothing.
func TestHandleLookupsDoNotAllocate(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bl, err := s.CreateBloom("b", BloomConfig{Capacity: 1000, ErrorRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	if err != nil {
		t.Fatal(err)
	}
	cn, err := s.CreateCounting("n", BloomConfig{Capacity: 1000, ErrorRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	bm, err := s.CreateBitmap("m", 1<<12)
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("key")
	if _, err := bl.Add(k); err != nil {
		t.Fatal(err)
	}
	if err := ck.Add(k); err != nil {
		t.Fatal(err)
	}
	if err := cn.Add(k); err != nil {
		t.Fatal(err)
	}
	if _, err := bm.Set(7); err != nil {
		t.Fatal(err)
	}
	h := Hash(k)
	for name, fn := range map[string]func(){
		"Bloom.HasHash":      func() { bl.HasHash(h); h++ },
		"Cuckoo.HasHash":     func() { ck.HasHash(h); h++ },
		"Cuckoo.CountHash":   func() { ck.CountHash(h); h++ },
		"Counting.HasHash":   func() { cn.HasHash(h); h++ },
		"Counting.CountHash": func() { cn.CountHash(h); h++ },
		"Bitmap.Get":         func() { bm.Get(h % (1 << 12)); h++ },
	} {
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Errorf("%s: %.1f allocations per call, want 0", name, n)
		}
	}
}
