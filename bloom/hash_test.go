package bloom

import (
	"encoding/binary"
	"fmt"
	"math/big"
	"sync/atomic"
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

// TestLocateGolden pins the derivations of the block and the bit and
// counter positions: they are part of the file format, and a change must
// fail here.
func TestLocateGolden(t *testing.T) {
	type golden struct {
		key      string
		block    uint64
		bits     string
		ctrBlock uint64
		counters string
	}
	for _, c := range []struct {
		d     Derivation
		cases []golden
	}{
		{DeriveMix, []golden{
			{"", 384280, "[272 105 50 486 427 177 358 410 31 357]", 384280, "[16 38 35 6 115 87 14 75 89 26]"},
			{"hello", 436592, "[189 174 334 477 303 226 13 441 205 511]", 436592, "[61 57 101 105 110 95 20 46 3 57]"},
			{"filterstore", 282853, "[341 497 384 360 91 300 88 412 257 172]", 282853, "[85 70 15 48 52 55 97 18 22 28]"},
		}},
		{DeriveMul, []golden{
			{"", 912150, "[398 362 369 444 56 119 339 459 15 169]", 912150, "[14 43 27 46 94 113 56 103 84 75]"},
			{"hello", 125059, "[348 469 22 107 443 98 334 422 435 224]", 125059, "[92 86 110 66 53 118 22 70 83 38]"},
			{"filterstore", 700630, "[397 371 146 73 421 70 310 177 19 69]", 700630, "[13 79 43 82 36 74 54 68 77 49]"},
		}},
	} {
		g := Geometry{Blocks: 1000003, K: 10, Salt: LayerSalt(2), Derivation: c.d}
		for _, tc := range c.cases {
			h := Hash([]byte(tc.key))
			block, pos := g.Locate(h, nil)
			if block != tc.block || fmt.Sprint(pos) != tc.bits {
				t.Errorf("%v: Locate(%q) = %d %v, want %d %s", c.d, tc.key, block, pos, tc.block, tc.bits)
			}
			block, pos = g.LocateCounters(h, nil)
			if block != tc.ctrBlock || fmt.Sprint(pos) != tc.counters {
				t.Errorf("%v: LocateCounters(%q) = %d %v, want %d %s", c.d, tc.key, block, pos, tc.ctrBlock, tc.counters)
			}
		}
	}
	salts := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	for i, want := range salts {
		if got := LayerSalt(i); got != want {
			t.Errorf("LayerSalt(%d) = %#016x, want %#016x", i, got, want)
		}
	}
}

// TestLocateMulSpec restates DeriveMul from the package doc, with math/big
// for the block, and holds Locate and LocateCounters to it.
func TestLocateMulSpec(t *testing.T) {
	r := testseed.New(t)
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	splitmix := func(z uint64) uint64 {
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	// positions cuts k positions of width bits, per draws of them, from
	// the first draw x*gamma and then splitmix64(x + d*gamma), d = 1, 2...
	positions := func(x uint64, k uint32, width uint, per uint32) string {
		var out []uint64
		draw, s := x*0x9e3779b97f4a7c15, x
		for j := uint32(0); j < k; j++ {
			if j > 0 && j%per == 0 {
				s += 0x9e3779b97f4a7c15
				draw = splitmix(s)
			}
			out = append(out, draw>>(uint(j%per)*width)&(1<<width-1))
		}
		return fmt.Sprint(out)
	}
	for range 2000 {
		g := Geometry{Blocks: 1 + r.Uint64N(MaxBlocks), K: 1 + r.Uint32N(MaxK), Salt: r.Uint64(), Derivation: DeriveMul}
		if r.IntN(4) == 0 {
			g.Blocks = 1 + r.Uint64N(100)
		}
		h := r.Uint64()
		x := h ^ g.Salt
		prod := new(big.Int).Mul(new(big.Int).SetUint64(x), new(big.Int).SetUint64(g.Blocks))
		wantBlock := prod.Div(prod, two64).Uint64()
		block, pos := g.Locate(h, nil)
		if want := positions(x, g.K, 9, 7); block != wantBlock || fmt.Sprint(pos) != want {
			t.Fatalf("g=%+v h=%#x: Locate = %d %v, want %d %s", g, h, block, pos, wantBlock, want)
		}
		block, pos = g.LocateCounters(h, nil)
		if want := positions(x, g.K, 7, 9); block != wantBlock || fmt.Sprint(pos) != want {
			t.Fatalf("g=%+v h=%#x: LocateCounters = %d %v, want %d %s", g, h, block, pos, wantBlock, want)
		}
	}
}

// TestFilterMatchesLocate cross-checks the inlined hot paths of Filter and
// Counting (adds, and both lookups) against the reference derivation in
// Locate, for every k from 1 to MaxK under both derivations (the lookups
// are written out per position up to k = 7 and 9), six random geometries
// and keys each.
func TestFilterMatchesLocate(t *testing.T) {
	r := testseed.New(t)
	for i := range 2 * MaxK * 6 {
		k, d := uint32(i/6%MaxK)+1, Derivation(i/(6*MaxK))
		g := Geometry{Blocks: 1 + r.Uint64N(50), K: k, Salt: r.Uint64(), Derivation: d}
		f, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCounting(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		var kb [16]byte
		binary.LittleEndian.PutUint64(kb[:], r.Uint64())
		binary.LittleEndian.PutUint64(kb[8:], r.Uint64())
		h := Hash(kb[:])
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
		// Has and HasHash, and a Front's, read the same positions: found
		// with all of them set, not found with any one cleared (unless the
		// Front's off flag is set).
		var off atomic.Bool
		fr := NewFront(f, &off)
		found := func() string {
			return fmt.Sprint(f.HasHash(h), f.Has(kb[:]), fr.HasHash(h), fr.Has(kb[:]))
		}
		if got := found(); got != "true true true true" {
			t.Fatalf("g=%+v h=%#x: HasHash, Has, Front.HasHash, Front.Has %s on the words Locate gives", g, h, got)
		}
		for _, p := range pos {
			w := &f.Words()[block*BlockWords+uint64(p/64)]
			*w &^= 1 << (p % 64)
			if got := found(); got != "false false false false" {
				t.Fatalf("g=%+v h=%#x: HasHash, Has, Front.HasHash, Front.Has %s with position %d cleared", g, h, got, p)
			}
			off.Store(true)
			if !fr.HasHash(h) || !fr.Has(kb[:]) {
				t.Fatalf("g=%+v h=%#x: a Front with off set answered absent with position %d cleared", g, h, p)
			}
			off.Store(false)
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
		// The counting lookups, and a CountingFront's, read the same
		// counters: found with all of them nonzero, not found with any one
		// zeroed (unless the front's off flag is set).
		cfr := NewCountingFront(c, &off)
		cfound := func() string {
			return fmt.Sprint(c.HasHash(h), c.Has(kb[:]), cfr.HasHash(h), cfr.Has(kb[:]))
		}
		if got := cfound(); got != "true true true true" {
			t.Fatalf("g=%+v h=%#x: Counting HasHash, Has, CountingFront.HasHash, CountingFront.Has %s on the words LocateCounters gives", g, h, got)
		}
		for _, p := range pos {
			w := &c.Words()[block*BlockWords+uint64(p/16)]
			old := *w
			*w &^= 15 << (p % 16 * 4)
			if got := cfound(); got != "false false false false" {
				t.Fatalf("g=%+v h=%#x: Counting HasHash, Has, CountingFront.HasHash, CountingFront.Has %s with counter %d zeroed", g, h, got, p)
			}
			off.Store(true)
			if !cfr.HasHash(h) || !cfr.Has(kb[:]) {
				t.Fatalf("g=%+v h=%#x: a CountingFront with off set answered absent with counter %d zeroed", g, h, p)
			}
			off.Store(false)
			*w = old
		}
	}
}

// TestWordsGolden pins the words of small filters after fixed adds, under
// each derivation: any change of layout or derivation fails here.
func TestWordsGolden(t *testing.T) {
	for _, c := range []struct {
		d            Derivation
		wantF, wantC string
	}{
		{DeriveMix,
			"[0x22122501000008 0x1001480100c2005 0x80020000e020408a 0x4000000020000010 0x2410000a04000000 0x100401000228280 0x8000001405001101 0x100400510000008 " +
				"0x408000000a000000 0x200004008210086 0x80026040010 0x8004004020181040 0x802004000000014 0x242200011080 0xa1000 0x10140082001000 " +
				"0x8004008 0x1001000010 0x20000002000040 0xc0000000000000 0x20000008400020 0x1004001000008008 0x408000001 0x80000010000040]",
			"[0x2100011002000230 0x20001110200103 0x1002011000101 0x20001010000010 0x10010010111 0x1100001001101 0x1000021000010011 0x1111000100001012 " +
				"0x1110011000 0x1010121100000101 0x102000111 0x1001001000100 0x20102100100010 0x100001100101 0x1120000002010000 0x1102000010000 " +
				"0x10100211000000 0x1000100000000010 0x10000100 0x100000000200000 0x1010001000011001 0x10010000000 0x211000000000002 0x0]"},
		{DeriveMul,
			"[0x8000000004008 0x220101100804010 0x40000000480800 0x1c880010000 0x4000800000 0x260008004000000 0x10802100604002 0x400400008000080 " +
				"0x4001400010008803 0x8000008800800000 0x2050008000c0 0x5308000a00040084 0x2000100010000 0x50040080 0x8080402000808 0x402000000080209 " +
				"0x420000000410040 0x4000080010004051 0x1c000084000803 0xc010000008180100 0x80400000800002 0x2420080000020 0x8b000060004 0x8810008000002000]",
			"[0x10111010001001 0x1100000100000 0x2000001000000 0x10110000100000 0x130200011000010 0x1002000101000001 0x100011000 0x1010100000111100 " +
				"0x2000021021000011 0x1102010000100112 0x100200000010000 0x1000000000001011 0x1000000110000110 0x2101000001001000 0x10100000011001 0x1100010200000000 " +
				"0x10220000003101 0x1110010001001010 0x10000000021001 0x2000001000000000 0x10000010 0x2012002000100 0x11001000000 0x2000110011111110]"},
	} {
		g := Geometry{Blocks: 3, K: 7, Salt: LayerSalt(0), Derivation: c.d}
		f, _ := New(g, nil)
		cf, _ := NewCounting(g, nil)
		var b [8]byte
		for i := range uint64(20) {
			f.Add(key(&b, i))
			cf.Add(key(&b, i))
		}
		if got := fmt.Sprintf("%#x", f.Words()); got != c.wantF {
			t.Errorf("%v: Filter words:\n got %s\nwant %s", c.d, got, c.wantF)
		}
		if got := fmt.Sprintf("%#x", cf.Words()); got != c.wantC {
			t.Errorf("%v: Counting words:\n got %s\nwant %s", c.d, got, c.wantC)
		}
	}
}
