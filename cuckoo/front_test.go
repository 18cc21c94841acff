package cuckoo

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestFrontMatchesFilter: a Front's Has and HasHash give the Filter's
// answers for inserted and absent keys, for bucket sizes 1 to 8 and
// fingerprint widths 4 to 16 that fit a word; with its off flag set a Front answers true where
// the key is absent, and a SlowFront calls the functions it was given.
func TestFrontMatchesFilter(t *testing.T) {
	r := testseed.New(t)
	key := func(i uint64, salt uint64) []byte {
		var k [16]byte
		binary.LittleEndian.PutUint64(k[:], i)
		binary.LittleEndian.PutUint64(k[8:], salt)
		return k[:]
	}
	for i, b := range []int{1, 2, 3, 4, 8} {
		for j, fb := range []int{4, 8, 12, 16} {
			if b*fb > 64 {
				continue // one word per bucket
			}
			g, err := Plan(2000, b, fb)
			if err != nil {
				t.Fatal(err)
			}
			g.Salt = r.Uint64()
			g.Derivation = Derivation((i + j) % 2) // both, over the shapes
			f, err := New(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			salt := r.Uint64()
			var n uint64
			for ; n < 2000 && f.Insert(key(n, salt)) == nil; n++ {
			}
			var off atomic.Bool
			fr := NewFront(f, &off)
			if fr.Filter() != f {
				t.Fatal("Front.Filter is not the filter it looks up")
			}
			absent := 0
			for i := range n + 4000 {
				k := key(i, salt)
				want := f.Has(k)
				if i < n && !want {
					t.Fatalf("b=%d f=%d: Filter.Has(inserted key %d) = false", b, fb, i)
				}
				got := fmt.Sprint(f.HasHash(Hash(k)), fr.Has(k), fr.HasHash(Hash(k)))
				if w := fmt.Sprint(want, want, want); got != w {
					t.Fatalf("b=%d f=%d key %d: Filter.HasHash, Front.Has, Front.HasHash = %s, want %s", b, fb, i, got, w)
				}
				if !want {
					absent++
					off.Store(true)
					if !fr.Has(k) || !fr.HasHash(Hash(k)) {
						t.Fatalf("b=%d f=%d key %d: a Front with off set answered absent", b, fb, i)
					}
					off.Store(false)
				}
			}
			if absent < 1000 {
				t.Fatalf("b=%d f=%d: only %d of 4000 absent keys answered absent", b, fb, absent)
			}
		}
	}
	var calls []string
	s := SlowFront(func(k []byte) bool { calls = append(calls, "has "+string(k)); return true },
		func(h uint64) bool { calls = append(calls, fmt.Sprint("hash ", h)); return false })
	if s.Filter() != nil || !s.Has([]byte("k")) || s.HasHash(7) || fmt.Sprint(calls) != "[has k hash 7]" {
		t.Fatalf("SlowFront: Filter %v, calls %v", s.Filter(), calls)
	}
}
