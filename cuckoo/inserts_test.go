package cuckoo

import (
	"errors"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestInsertHashesMatchesLoop: InsertHashes, called on chunks of every
// size, leaves the words, count and moves a loop of InsertHash leaves, up
// to and past the point where the filter fills, and stops at the key the
// loop first fails on.
func TestInsertHashesMatchesLoop(t *testing.T) {
	r := testseed.New(t)
	for round := range 20 {
		g, err := Plan(500+r.Uint64N(3000), 2+r.IntN(3), 4+r.IntN(13))
		if err != nil {
			t.Fatal(err)
		}
		g.Salt = r.Uint64()
		loop, _ := New(g, nil)
		many, _ := New(g, nil)
		hs := make([]uint64, g.Slots()+100) // more than fit
		for i := range hs {
			hs[i] = r.Uint64()
		}
		failAt := -1
		for i, h := range hs {
			if err := loop.InsertHash(h); err != nil {
				if !errors.Is(err, ErrFull) {
					t.Fatal(err)
				}
				failAt = i
				break
			}
		}
		if failAt < 0 {
			t.Fatalf("round %d: %d keys fit in %d slots", round, len(hs), g.Slots())
		}
		at := 0
		for at < len(hs) {
			end := min(len(hs), at+1+r.IntN(3*batchSize))
			n, err := many.InsertHashes(hs[at:end])
			if err != nil {
				if !errors.Is(err, ErrFull) || at+n != failAt {
					t.Fatalf("round %d: InsertHashes stopped at key %d with %v; the loop failed at %d", round, at+n, err, failAt)
				}
				break
			}
			if n != end-at {
				t.Fatalf("round %d: InsertHashes inserted %d of %d keys with no error", round, n, end-at)
			}
			at = end
		}
		if !slices.Equal(loop.words, many.words) || loop.Count() != many.Count() || loop.moves.Load() != many.moves.Load() {
			t.Fatalf("round %d (%+v): InsertHashes left count %d, moves %d, words differing from the loop's (count %d, moves %d)",
				round, g, many.Count(), many.moves.Load(), loop.Count(), loop.moves.Load())
		}
	}
}

// BenchmarkInsertHashes inserts distinct hashes into a filter planned for
// size keys (b=4, f=16), from empty to full and again, by a loop of
// InsertHash, by InsertHashes over chunks of 4096, and by Build over the
// same chunks on GOMAXPROCS goroutines (run with -cpu 1,2); ns/op is per
// key.
func BenchmarkInsertHashes(b *testing.B) {
	for _, size := range benchSizes {
		f, hs := benchTable(b, size)
		for _, way := range []string{"loop", "batch", "build"} {
			b.Run(fmt.Sprintf("n=%d/%s", size, way), func(b *testing.B) {
				clear(f.words)
				f.SetCount(0)
				in := 0
				for i := 0; i < b.N; {
					if in == len(hs) {
						b.StopTimer()
						clear(f.words)
						f.SetCount(0)
						in = 0
						b.StartTimer()
					}
					n := min(chunkFor(way), b.N-i, len(hs)-in)
					switch way {
					case "loop":
						for _, h := range hs[in : in+n] {
							if err := f.InsertHash(h); err != nil {
								b.Fatal(err)
							}
						}
					case "batch":
						if _, err := f.InsertHashes(hs[in : in+n]); err != nil {
							b.Fatal(err)
						}
					default:
						if _, err := f.Build(hs[in:in+n], runtime.GOMAXPROCS(0)); err != nil {
							b.Fatal(err)
						}
					}
					in += n
					i += n
				}
			})
		}
	}
}

// benchTable returns an empty filter planned for size keys (b=4, f=16)
// and size distinct hashes to insert into it.
func benchTable(b *testing.B, size uint64) (*Filter, []uint64) {
	g, err := Plan(size, 4, 16)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := New(g, nil)
	hs := make([]uint64, size)
	for i := range hs {
		hs[i] = mix(uint64(i) + 1)
	}
	return f, hs
}

// fetchN replaces BenchmarkFetchMoves's sizes with one (-fetch.n 1e8).
var fetchN = flag.Uint64("fetch.n", 0, "keys of BenchmarkFetchMoves's one size (0: 1e6 and 1e7)")

// BenchmarkFetchMoves compares, in one process, InsertHashes from empty
// to full with the displacement search fetching each expanded bucket's
// destinations at once (fetch=on) and reading them one by one (off), at
// the sizes of BenchmarkInsertHashes; run it with -count to interleave.
func BenchmarkFetchMoves(b *testing.B) {
	defer func(m uint64) { fetchMovesBuckets = m }(fetchMovesBuckets)
	sizes := benchSizes
	if *fetchN > 0 {
		sizes = []uint64{*fetchN}
	}
	for _, size := range sizes {
		f, hs := benchTable(b, size)
		for _, fetch := range []string{"on", "off"} {
			b.Run(fmt.Sprintf("n=%d/fetch=%s", size, fetch), func(b *testing.B) {
				fetchMovesBuckets = 0
				if fetch == "off" {
					fetchMovesBuckets = MaxBuckets
				}
				for range b.N {
					b.StopTimer()
					clear(f.words)
					f.SetCount(0)
					b.StartTimer()
					for in := 0; in < len(hs); in += 4096 {
						if _, err := f.InsertHashes(hs[in:min(in+4096, len(hs))]); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size), "ns/key")
			})
		}
	}
}

// TestFetchMovesSameInserts: the displacement search fetching each
// expanded bucket's destinations at once (as in tables of
// fetchMovesBuckets or more) leaves the words, count and moves of the
// search reading them one by one, up to and past the point where the
// filter fills, through InsertHash and through InsertHashOwned (plain
// accesses, the same search).
func TestFetchMovesSameInserts(t *testing.T) {
	defer func(m uint64) { fetchMovesBuckets = m }(fetchMovesBuckets)
	r := testseed.New(t)
	for round := range 10 {
		g, err := Plan(500+r.Uint64N(3000), 1+r.IntN(8), 4+r.IntN(5))
		if err != nil {
			t.Fatal(err)
		}
		g.Salt = r.Uint64()
		hs := make([]uint64, g.Slots()+100) // more than fit
		for i := range hs {
			hs[i] = r.Uint64()
		}
		fill := func(minBuckets uint64, owned bool) (*Filter, int) {
			fetchMovesBuckets = minBuckets
			f, _ := New(g, nil)
			for i, h := range hs {
				insert := f.InsertHash
				if owned {
					insert = f.InsertHashOwned
				}
				if err := insert(h); err != nil {
					return f, i
				}
			}
			return f, len(hs)
		}
		off, offIn := fill(MaxBuckets, false)
		for _, owned := range []bool{false, true} {
			on, onIn := fill(0, owned)
			if onIn != offIn || !slices.Equal(on.Words(), off.Words()) || on.Count() != off.Count() || on.moves.Load() != off.moves.Load() {
				t.Fatalf("round %d (%+v), owned %v: fetching: %d inserted, count %d, %d moves; one by one: %d, %d, %d; words equal: %v",
					round, g, owned, onIn, on.Count(), on.moves.Load(), offIn, off.Count(), off.moves.Load(), slices.Equal(on.Words(), off.Words()))
			}
		}
	}
}

var buildChunkBench = flag.Int("build.chunk", 4096, "keys per Build call in BenchmarkInsertHashes")

func chunkFor(way string) int {
	if way == "build" {
		return *buildChunkBench
	}
	return 4096
}
