package bench

import (
	"flag"
	"fmt"
	"math/bits"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/greatroar/blobloom"
)

var (
	hotN      = flag.String("hot.n", "1e7", "BenchmarkHotBloom: comma-separated key counts")
	hotRounds = flag.Int("hot.rounds", 1, "BenchmarkHotBloom: rounds over every case, interleaved (names get /rN past the first)")
)

// BenchmarkHotBloom times the filters' own lookup code on precomputed
// hashes (bloom.Hash of random 16-byte keys; no key hashing in the loop):
// blobloom's Has, filterstore's bloom.Filter.HasHash on words in the Go
// heap, in anonymous memory with and without transparent huge pages
// (mmapbits.AnonWords), and store.Bloom.HasHash on the store's mapped
// file (4 KiB pages). The same code on the three kinds of memory shows
// what the page size costs; the heap against blobloom shows what the
// lookup code costs. fs-heap-mix is fs-heap on the mix derivation that
// files of formats 1-3 keep, and blobloom+fs-derive (blobloom's lookup
// plus that derivation's arithmetic, with no further memory access) what
// of fs-heap-mix's cost is the derivation. Lookups go over 2^20 (or, below that, the largest power of
// two of the n) added keys (hit) or 2^20 absent ones (miss) in turn.
func BenchmarkHotBloom(b *testing.B) {
	for _, ns := range strings.Split(*hotN, ",") {
		nf, err := strconv.ParseFloat(ns, 64)
		if err != nil {
			b.Fatalf("-hot.n %q: %v", ns, err)
		}
		n := int(nf)
		if n < 1 {
			b.Fatalf("-hot.n %q: want at least one key", ns)
		}
		keys := NewKeys(uint64(n), 11, 1)
		hs := keys.Hashes()
		miss := NewKeys(1<<20, 11, 2).Hashes()
		g, err := bloom.Plan(uint64(n), 0.01)
		if err != nil {
			b.Fatal(err)
		}
		type impl struct {
			name string
			has  func(uint64) bool
		}
		var impls []impl
		bl := blobloom.NewOptimized(blobloom.Config{Capacity: uint64(n), FPRate: 0.01})
		for _, h := range hs {
			bl.Add(h)
		}
		impls = append(impls, impl{"blobloom", bl.Has})
		// blobloom's lookup with filterstore's mix derivation of the
		// block and positions computed beside it and folded into the
		// answer, no memory touched: what that derivation alone adds to
		// a lookup.
		impls = append(impls, impl{"blobloom+fs-derive", func(h uint64) bool {
			found := bl.Has(h)
			block, draw := derive(h, g.Salt, g.Blocks)
			return found != (block^draw == 1)
		}})
		for _, mem := range []string{"heap", "heap-mix", "anon-huge", "anon-4k"} {
			g := g
			if mem == "heap-mix" {
				g.Derivation = bloom.DeriveMix
			}
			var words []uint64
			if !strings.HasPrefix(mem, "heap") {
				w, free, err := mmapbits.AnonWords(g.Words(), mem == "anon-huge")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { free() })
				words = w
			}
			f, err := bloom.New(g, words)
			if err != nil {
				b.Fatal(err)
			}
			for _, h := range hs {
				f.AddHash(h)
			}
			impls = append(impls, impl{"fs-" + mem, f.HasHash})
		}
		sf, err := CreateStore(Config{N: uint64(n), FPR: 0.01, Dir: filepath.Join(b.TempDir(), "store")}, "bloom")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sf.Close() })
		if _, err := Build(sf, keys); err != nil {
			b.Fatal(err)
		}
		impls = append(impls, impl{"fs-store-file", sf.bf.HasHash})
		for round := range max(1, *hotRounds) {
			for _, probe := range []struct {
				name string
				keys []uint64
			}{{"hit", hs[:1<<(bits.Len(uint(min(n, 1<<20)))-1)]}, {"miss", miss}} {
				keys := probe.keys
				mask := len(keys) - 1 // a power of two
				for _, im := range impls {
					name := fmt.Sprintf("n=%s/%s/%s", ns, probe.name, im.name)
					if round > 0 {
						name += fmt.Sprintf("/r%d", round)
					}
					b.Run(name, func(b *testing.B) {
						found := 0
						for i := 0; i < b.N; i++ {
							if im.has(keys[i&mask]) {
								found++
							}
						}
						if probe.name == "hit" && b.N >= len(keys) && found < b.N {
							b.Fatalf("%d of %d added keys not found", b.N-found, b.N)
						}
						hotSink = found
					})
				}
			}
		}
		hs, keys = nil, nil
	}
}

var hotSink int

// derive is the arithmetic of filterstore's Bloom lookup on the mix
// derivation before it reads the block (bloom's package doc, "Hash
// derivation"): the block of h and the draw its first seven positions are
// cut from. TestDeriveMatchesLocate holds it to bloom.Geometry.Locate.
func derive(h, salt, blocks uint64) (block, draw uint64) {
	x := splitmix(h ^ salt)
	block, _ = bits.Mul64(x, blocks)
	return block, splitmix(x + 0x9e3779b97f4a7c15)
}

// splitmix is the splitmix64 finalizer.
func splitmix(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}

// TestDeriveMatchesLocate: derive gives Locate's block and, 9 bits at a
// time, its positions.
func TestDeriveMatchesLocate(t *testing.T) {
	for _, n := range []uint64{1000, 1e6, 1e9} {
		g, err := bloom.Plan(n, 0.01)
		if err != nil {
			t.Fatal(err)
		}
		g.Derivation = bloom.DeriveMix
		for _, h := range NewKeys(1000, 11, 3).Hashes() {
			block, draw := derive(h, g.Salt, g.Blocks)
			wantBlock, pos := g.Locate(h, nil)
			if block != wantBlock {
				t.Fatalf("n=%d h=%#x: block %d, Locate's %d", n, h, block, wantBlock)
			}
			for j, p := range pos[:min(len(pos), 7)] {
				if got := uint16(draw >> (9 * j) & 511); got != p {
					t.Fatalf("n=%d h=%#x: position %d is %d, Locate's %d", n, h, j, got, p)
				}
			}
		}
	}
}
