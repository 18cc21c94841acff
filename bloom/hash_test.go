package bloom

import (
	"fmt"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestHashGolden pins Hash: it is part of the file format.
func TestHashGolden(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want uint64
	}{
		{"", 0xef46db3751d8e999}, // the published XXH64 test vectors
		{"a", 0xd24ec4f1a98c6e5b},
		{"hello", 0x26c7827d889f6da3},
		{"filterstore", 0xb5983c7bde21c6d6},
	} {
		if got := Hash([]byte(tc.key)); got != tc.want {
			t.Errorf("Hash(%q) = %#016x, want %#016x", tc.key, got, tc.want)
		}
	}
}

// TestLocateGolden pins the derivation of the block and the bit and counter
// positions: it is part of the file format, and a change must fail here.
func TestLocateGolden(t *testing.T) {
	g := Geometry{Blocks: 1000003, K: 10, Salt: LayerSalt(2)}
	for _, tc := range []struct {
		key      string
		block    uint64
		bits     string
		ctrBlock uint64
		counters string
	}{
		{"", 384280, "[272 105 50 486 427 177 358 410 31 357]", 384280, "[16 38 35 6 115 87 14 75 89 26]"},
		{"hello", 436592, "[189 174 334 477 303 226 13 441 205 511]", 436592, "[61 57 101 105 110 95 20 46 3 57]"},
		{"filterstore", 282853, "[341 497 384 360 91 300 88 412 257 172]", 282853, "[85 70 15 48 52 55 97 18 22 28]"},
	} {
		h := Hash([]byte(tc.key))
		block, pos := g.Locate(h, nil)
		if block != tc.block || fmt.Sprint(pos) != tc.bits {
			t.Errorf("Locate(%q) = %d %v, want %d %s", tc.key, block, pos, tc.block, tc.bits)
		}
		block, pos = g.LocateCounters(h, nil)
		if block != tc.ctrBlock || fmt.Sprint(pos) != tc.counters {
			t.Errorf("LocateCounters(%q) = %d %v, want %d %s", tc.key, block, pos, tc.ctrBlock, tc.counters)
		}
	}
	salts := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	for i, want := range salts {
		if got := LayerSalt(i); got != want {
			t.Errorf("LayerSalt(%d) = %#016x, want %#016x", i, got, want)
		}
	}
}

// TestFilterMatchesLocate cross-checks the inlined hot paths of Filter and
// Counting (adds, and the Filter's lookup for every k) against the
// reference derivation in Locate.
func TestFilterMatchesLocate(t *testing.T) {
	r := testseed.New(t)
	for range 200 {
		g := Geometry{Blocks: 1 + r.Uint64N(50), K: 1 + r.Uint32N(MaxK), Salt: r.Uint64()}
		f, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCounting(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := r.Uint64()
		f.AddHash(h)
		c.AddHash(h)
		block, pos := g.Locate(h, nil)
		want := make([]uint64, g.Words())
		for _, p := range pos {
			want[block*BlockWords+uint64(p/64)] |= 1 << (p % 64)
		}
		if fmt.Sprint(f.Words()) != fmt.Sprint(want) {
			t.Fatalf("g=%+v h=%#x: Filter words %x, want %x", g, h, f.Words(), want)
		}
		// Has reads the same positions: found with all of them set, not
		// found with any one cleared.
		if !f.HasHash(h) {
			t.Fatalf("g=%+v h=%#x: HasHash false on the words Locate gives", g, h)
		}
		for _, p := range pos {
			w := &f.Words()[block*BlockWords+uint64(p/64)]
			*w &^= 1 << (p % 64)
			if f.HasHash(h) {
				t.Fatalf("g=%+v h=%#x: HasHash true with position %d cleared", g, h, p)
			}
			*w |= 1 << (p % 64)
		}
		block, pos = g.LocateCounters(h, nil)
		clear(want)
		for _, p := range pos {
			w := &want[block*BlockWords+uint64(p/16)]
			if *w>>(p%16*4)&15 != 15 {
				*w += 1 << (p % 16 * 4)
			}
		}
		if fmt.Sprint(c.Words()) != fmt.Sprint(want) {
			t.Fatalf("g=%+v h=%#x: Counting words %x, want %x", g, h, c.Words(), want)
		}
	}
}

// TestWordsGolden pins the words of small filters after fixed adds: any
// change of layout or derivation fails here.
func TestWordsGolden(t *testing.T) {
	g := Geometry{Blocks: 3, K: 7, Salt: LayerSalt(0)}
	f, _ := New(g, nil)
	c, _ := NewCounting(g, nil)
	var b [8]byte
	for i := range uint64(20) {
		f.Add(key(&b, i))
		c.Add(key(&b, i))
	}
	const wantF = "[0x22122501000008 0x1001480100c2005 0x80020000e020408a 0x4000000020000010 0x2410000a04000000 0x100401000228280 0x8000001405001101 0x100400510000008 " +
		"0x408000000a000000 0x200004008210086 0x80026040010 0x8004004020181040 0x802004000000014 0x242200011080 0xa1000 0x10140082001000 " +
		"0x8004008 0x1001000010 0x20000002000040 0xc0000000000000 0x20000008400020 0x1004001000008008 0x408000001 0x80000010000040]"
	const wantC = "[0x2100011002000230 0x20001110200103 0x1002011000101 0x20001010000010 0x10010010111 0x1100001001101 0x1000021000010011 0x1111000100001012 " +
		"0x1110011000 0x1010121100000101 0x102000111 0x1001001000100 0x20102100100010 0x100001100101 0x1120000002010000 0x1102000010000 " +
		"0x10100211000000 0x1000100000000010 0x10000100 0x100000000200000 0x1010001000011001 0x10010000000 0x211000000000002 0x0]"
	if got := fmt.Sprintf("%#x", f.Words()); got != wantF {
		t.Errorf("Filter words:\n got %s\nwant %s", got, wantF)
	}
	if got := fmt.Sprintf("%#x", c.Words()); got != wantC {
		t.Errorf("Counting words:\n got %s\nwant %s", got, wantC)
	}
}
