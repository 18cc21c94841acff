package cuckoo

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestHasManyMatchesHas: HasMany and HasManyHash answer exactly what Has
// and HasHash do, for batches across the batch and chunk boundaries (16,
// 256), present and absent keys, and with room in out allocate nothing.
func TestHasManyMatchesHas(t *testing.T) {
	r := testseed.New(t)
	for _, d := range []Derivation{DeriveMix, DeriveMul, DeriveLocal} {
		t.Run(d.String(), func(t *testing.T) { testHasManyMatchesHas(t, r, d) })
	}
}

func testHasManyMatchesHas(t *testing.T, r *rand.Rand, d Derivation) {
	buckets := uint64(5003)
	if d == DeriveLocal {
		buckets += 2 * LocalBlock // of three blocks
	}
	f, err := New(Geometry{Buckets: buckets, BucketSize: 4, FingerprintBits: 12, Salt: r.Uint64(), Derivation: d}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := func(i uint64) []byte { return []byte{byte(i), byte(i >> 8), byte(i >> 16), 'k'} }
	stored := buckets * 4 * 9 / 10 // about 90% of the slots
	for i := range stored {
		if err := f.Insert(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]bool, 0, 2000)
	for _, n := range []int{0, 1, 15, 16, 17, 255, 256, 257, 1000, 2000} {
		keys := make([][]byte, n)
		hs := make([]uint64, n)
		for i := range keys {
			keys[i] = key(r.Uint64N(2 * stored)) // half present
			hs[i] = Hash(keys[i])
		}
		got := f.HasMany(keys, out)
		gotH := f.HasManyHash(hs, nil)
		if len(got) != n || len(gotH) != n {
			t.Fatalf("n=%d: HasMany gave %d answers, HasManyHash %d", n, len(got), len(gotH))
		}
		for i, k := range keys {
			if want := f.Has(k); got[i] != want || gotH[i] != want {
				t.Fatalf("n=%d: key %d: HasMany %v, HasManyHash %v, Has %v", n, i, got[i], gotH[i], want)
			}
		}
		if a := testing.AllocsPerRun(10, func() { f.HasMany(keys, out); f.HasManyHash(hs, out) }); a != 0 {
			t.Fatalf("n=%d: %v allocations with room in out, want 0", n, a)
		}
	}
}

// TestHasManyDuringMoves: batched lookups of keys that stay in the filter
// never miss while a writer at full load keeps displacing fingerprints:
// the batch retries its misses when the move-sequence counter moved.
func TestHasManyDuringMoves(t *testing.T) {
	seed := testseed.Seed(t)
	f, err := New(Geometry{Buckets: 4001, BucketSize: 4, FingerprintBits: 16, Salt: seed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hash := func(i uint64) uint64 { return mix(i + seed) }
	var n uint64
	for ; ; n++ {
		if err := f.InsertHash(hash(n)); err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	stable := n * 3 / 4 // keys below are never deleted
	var stop atomic.Bool
	var checks, misses atomic.Uint64
	var wg sync.WaitGroup
	for g := range uint64(2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, g))
			hs := make([]uint64, 100)
			out := make([]bool, len(hs))
			for !stop.Load() {
				for i := range hs {
					hs[i] = hash(r.Uint64N(stable))
				}
				for _, ok := range f.HasManyHash(hs, out) {
					checks.Add(1)
					if !ok {
						misses.Add(1)
					}
				}
			}
		}()
	}
	moved := f.moves.Load()
	rounds := 30
	if testing.Short() {
		rounds = 5
	}
	lo, hi := stable, n
	for range rounds {
		for i := lo; i < hi; i++ {
			if !f.DeleteHash(hash(i)) {
				stop.Store(true)
				t.Fatalf("delete %d failed", i)
			}
		}
		for lo = hi; f.InsertHash(hash(hi)) == nil; hi++ {
		}
	}
	stop.Store(true)
	wg.Wait()
	moved = f.moves.Load() - moved
	t.Logf("%d fingerprints moved, %d batched checks, %d false negatives", moved, checks.Load(), misses.Load())
	if misses.Load() != 0 {
		t.Fatalf("%d false negatives", misses.Load())
	}
	if moved < 1000 || checks.Load() < 1000 {
		t.Fatalf("test did not exercise moves under lookups: %d moves, %d checks", moved, checks.Load())
	}
}

// TestHasManyDeadWriter: with the move-sequence counter stuck odd (a writer
// died in the middle of a move), HasManyHash answers "maybe present" for
// absent keys too, as HasHash does, after its bounded retries.
func TestHasManyDeadWriter(t *testing.T) {
	f, err := New(Geometry{Buckets: 64, BucketSize: 4, FingerprintBits: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.InsertHash(1); err != nil {
		t.Fatal(err)
	}
	if got := f.HasManyHash([]uint64{1, 2, 3}, nil); !got[0] || got[1] && got[2] {
		t.Fatalf("before: HasManyHash = %v, want [true false false] (up to false positives)", got)
	}
	seq := uint64(7)
	f.ShareSeq(&seq)
	for i, ok := range f.HasManyHash([]uint64{1, 2, 3}, nil) {
		if !ok {
			t.Fatalf("counter stuck odd: answer %d is absent, want maybe present", i)
		}
	}
}
