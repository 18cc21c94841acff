package cuckoo

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestHashGolden pins Hash: it is part of the file format.
func TestHashGolden(t *testing.T) {
	for _, c := range []struct {
		key  string
		want uint64
	}{
		{"", 0xef46db3751d8e999}, // XXH64 of the empty input, seed 0
		{"a", 0xd24ec4f1a98c6e5b},
		{"filterstore", 0xb5983c7bde21c6d6},
		{"hello, world", 0xb33a384e6d1b1242},
	} {
		if got := Hash([]byte(c.key)); got != c.want {
			t.Errorf("Hash(%q) = %#x, want %#x", c.key, got, c.want)
		}
	}
}

// TestLocateGolden pins the derivation of i1, fp and i2: part of the file
// format. A failure here means existing files would be misread.
func TestLocateGolden(t *testing.T) {
	g := Geometry{Buckets: 1_000_003, BucketSize: 4, FingerprintBits: 16, Salt: LayerSalt(1)}
	g0 := Geometry{Buckets: 4099, BucketSize: 2, FingerprintBits: 12}
	checkLocate(t, []locateCase{
		{g, 0x0, 894854, 0x2226, 275064},
		{g0, 0x0, 0, 0x9ca, 3277},
		{g, 0x1, 621947, 0x2539, 795867},
		{g0, 0x1, 2887, 0x25c, 2475},
		{g, 0xdeadbeefcafebabe, 812839, 0x38ce, 420931},
		{g0, 0xdeadbeefcafebabe, 1801, 0xad8, 3662},
		{g, 0xb5983c7bde21c6d6, 802533, 0xb4f0, 553490},
		{g0, 0xb5983c7bde21c6d6, 1256, 0x85d, 3085},
	})
	if LayerSalt(0) != 0 || LayerSalt(3) != 0x84bafc29330df8b9 {
		t.Errorf("LayerSalt changed")
	}
}

// TestLocateGoldenMul pins DeriveMul (file format 5): the values below were
// computed from the package doc's formulas by a separate program (Python,
// arbitrary-precision integers), not by this code. Hashes 0 and 1 share
// a primary bucket: DeriveMul trusts h to be XXH64's, whose bits are
// uniform.
func TestLocateGoldenMul(t *testing.T) {
	g := Geometry{Buckets: 1_000_003, BucketSize: 4, FingerprintBits: 16, Salt: LayerSalt(1), Derivation: DeriveMul}
	g0 := Geometry{Buckets: 4099, BucketSize: 2, FingerprintBits: 12, Derivation: DeriveMul}
	checkLocate(t, []locateCase{
		{g, 0x0, 839495, 0xf04a, 520708},
		{g0, 0x0, 0, 0x1, 1398},
		{g, 0x1, 839495, 0xf0f8, 64832},
		{g0, 0x1, 0, 0xff5, 2344},
		{g, 0xdeadbeefcafebabe, 32306, 0xb8f9, 354791},
		{g0, 0xdeadbeefcafebabe, 3565, 0xafd, 441},
		{g, 0xb5983c7bde21c6d6, 388440, 0xc1e5, 244083},
		{g0, 0xb5983c7bde21c6d6, 2907, 0x26d, 20},
	})
	if err := (Geometry{Buckets: 1, BucketSize: 4, FingerprintBits: 16, Derivation: 3}).Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Derivation") {
		t.Errorf("Validate of derivation 3: %v, want ErrInvalid naming Derivation", err)
	}
	if DeriveMix.String() != "mix" || DeriveMul.String() != "mul" || DeriveLocal.String() != "local" || Derivation(7).String() != "derivation(7)" {
		t.Errorf("Derivation names: %v %v %v %v", DeriveMix, DeriveMul, DeriveLocal, Derivation(7))
	}
}

// TestLocateGoldenLocal pins DeriveLocal (file format 6): the values below
// were computed from the package doc's formulas by a separate program
// (Python, arbitrary-precision integers), not by this code. g has 15
// blocks, the last from bucket 917504 to 1000002 (the last two cases);
// g0 and g2 are tables of one block, where DeriveLocal is DeriveMul (g0's
// values are TestLocateGoldenMul's), and of exactly two.
func TestLocateGoldenLocal(t *testing.T) {
	g := Geometry{Buckets: 1_000_003, BucketSize: 4, FingerprintBits: 16, Salt: LayerSalt(1), Derivation: DeriveLocal}
	g0 := Geometry{Buckets: 4099, BucketSize: 2, FingerprintBits: 12, Derivation: DeriveLocal}
	g2 := Geometry{Buckets: 1 << 17, BucketSize: 8, FingerprintBits: 8, Derivation: DeriveLocal}
	checkLocate(t, []locateCase{
		{g, 0x0, 839495, 0xf04a, 824177},
		{g, 0x1, 839495, 0xf0f8, 796870},
		{g, 0xdeadbeefcafebabe, 32306, 0xb8f9, 7466},
		{g, 0xb5983c7bde21c6d6, 388440, 0xc1e5, 347316},
		{g, 0xfedcba9876543210, 157047, 0x2685, 154883},
		{g, 0xffffffffffffffff, 160507, 0x1064, 174058},
		{g, 0x6f1901479a6602c6, 726351, 0x4980, 743228},
		{g, 0x2a17f2ad1e8b6f3f, 988269, 0x1e5e, 920317},
		{g0, 0x0, 0, 0x1, 1398},
		{g0, 0x1, 0, 0xff5, 2344},
		{g0, 0xdeadbeefcafebabe, 3565, 0xafd, 441},
		{g0, 0xb5983c7bde21c6d6, 2907, 0x26d, 20},
		{g2, 0x0123456789abcdef, 582, 100, 46982},
		{g2, 0x8000000000000000, 65536, 128, 69962},
	})
	if g.Split() != 14<<16 || g0.Split() != 0 || g2.Split() != 1<<16 || (Geometry{Buckets: 1 << 20, Derivation: DeriveMul}).Split() != 0 {
		t.Errorf("Split: %d %d %d", g.Split(), g0.Split(), g2.Split())
	}
	if p, err := Plan(1000, 4, 16); err != nil || p.Derivation != DeriveLocal {
		t.Errorf("Plan: derivation %v, %v; want local", p.Derivation, err)
	}
	if _, g, err := LayerParams(Config{Capacity: 1000, Expansion: 2}, 3); err != nil || g.Derivation != DeriveLocal {
		t.Errorf("LayerParams: derivation %v, %v; want local", g.Derivation, err)
	}
}

// TestLayoutGolden pins the bucket packing: slot j at bits [j*f, (j+1)*f).
func TestLayoutGolden(t *testing.T) {
	g := Geometry{Buckets: 1, BucketSize: 3, FingerprintBits: 12}
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for j, h := range []uint64{10, 20, 30} {
		_, fp, _ := g.Locate(h)
		want |= fp << (12 * j)
		if err := f.InsertHash(h); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Words()[0]; got != want || got>>36 != 0 {
		t.Fatalf("word = %#x, want %#x", got, want)
	}
	f.DeleteHash(20)
	if got := f.Words()[0]; got != want&^(0xfff<<12) {
		t.Fatalf("after delete word = %#x", got)
	}
}

// TestAltInvolution checks alt(alt(i)) == i and the ranges of i1, fp, i2
// for many bucket counts, including 1, 2 and primes.
func TestAltInvolution(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, m := range []uint64{1, 2, 3, 7, 511, 512, 513, 4099, 2*LocalBlock - 1, 2 * LocalBlock, 2*LocalBlock + 1, 3*LocalBlock + 5, 1 << 20, 1_000_003, MaxBuckets} {
		for _, fb := range []int{4, 8, 16} {
			g := Geometry{Buckets: m, BucketSize: 64 / fb, FingerprintBits: fb, Salt: r.Uint64(), Derivation: Derivation(r.IntN(3))}
			f := &Filter{g: g, split: g.Split()} // alt reads only these
			split := g.Split()
			for k := 0; k < 2000; k++ {
				i1, fp, i2 := g.Locate(r.Uint64())
				if i1 >= m || i2 >= m || fp == 0 || fp >= 1<<fb {
					t.Fatalf("m=%d f=%d: i1=%d fp=%d i2=%d out of range", m, fb, i1, fp, i2)
				}
				if g.Alt(i2, fp) != i1 {
					t.Fatalf("m=%d: alt(alt(%d, %d)) = %d", m, i1, fp, g.Alt(i2, fp))
				}
				i := r.Uint64N(m)
				a := g.Alt(i, fp)
				if g.Alt(a, fp) != i {
					t.Fatalf("m=%d: alt not an involution at %d", m, i)
				}
				if f.alt(i, fp) != a {
					t.Fatalf("m=%d %v: filter alt(%d) = %d, geometry %d", m, g.Derivation, i, f.alt(i, fp), a)
				}
				// DeriveLocal: the alternate is in the bucket's block.
				if block := func(i uint64) uint64 { return min(i, split) >> localShift }; split > 0 && block(a) != block(i) {
					t.Fatalf("m=%d: alt(%d) = %d, in another block", m, i, a)
				}
			}
		}
	}
}

// TestMatchCrossCheck cross-checks the SWAR slot match against the simple
// per-slot loop for every geometry.
func TestMatchCrossCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for b := MinBucketSize; b <= MaxBucketSize; b++ {
		for fb := MinFingerprintBits; fb <= MaxFingerprintBits && b*fb <= 64; fb++ {
			f, err := New(Geometry{Buckets: 1, BucketSize: b, FingerprintBits: fb}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 3000; k++ {
				// Words with few distinct values so matches are common.
				var v uint64
				for j := 0; j < b; j++ {
					v = f.setSlot(v, j, r.Uint64N(4)*r.Uint64N(1<<fb))
				}
				fp := 1 + r.Uint64N(1<<fb-1)
				if k%3 == 0 {
					fp = f.slot(v, r.IntN(b))
					if fp == 0 {
						fp = 1
					}
				}
				if got, want := f.match(v, fp), f.countIn(v, fp) > 0; got != want {
					t.Fatalf("b=%d f=%d v=%#x fp=%#x: match %v, loop %v", b, fb, v, fp, got, want)
				}
			}
		}
	}
}

// TestFingerprintIndependentOfBucket: two hashes with the same primary
// bucket have the same fingerprint about as often as any two (2^-f),
// however many buckets: a derivation that took the fingerprint from bits
// the bucket also depends on would, past 2^32 buckets, make keys of one
// bucket share fingerprint bits and raise the false-positive rate (the
// first DeriveMul, which took fp from x's low 32 bits, gave 4e-3 at 2^40
// buckets and 0.67 at 2^48). With m buckets a hash has only 64 - log2(m)
// bits left beyond its bucket, so the bound adds 2^(log2(m)-64). Pairs
// are drawn from one bucket's range of h^salt, which DeriveMul's primary
// bucket is (its high bits); DeriveMix's, a finalizer away, is not tested
// this way.
func TestFingerprintIndependentOfBucket(t *testing.T) {
	r := testseed.New(t)
	const pairs = 1 << 20
	for _, c := range []struct {
		m uint64
		d Derivation
	}{
		{1 << 20, DeriveMul}, {1<<33 + 12345, DeriveMul}, {1 << 40, DeriveMul}, {1<<48 + 3, DeriveMul},
	} {
		g := Geometry{Buckets: c.m, BucketSize: 4, FingerprintBits: 16, Salt: r.Uint64(), Derivation: c.d}
		width := ^uint64(0)/c.m + 1 // hashes x in [k*width, (k+1)*width) share a bucket, about
		same, n := 0, 0
		for n < pairs {
			x := r.Uint64()
			y := x - x%width + r.Uint64N(width)
			if x == y {
				continue
			}
			i1, fp1, _ := g.Locate(x ^ g.Salt)
			j1, fp2, _ := g.Locate(y ^ g.Salt)
			if i1 != j1 {
				continue
			}
			n++
			if fp1 == fp2 {
				same++
			}
		}
		want := float64(pairs) * (1.0/65535 + float64(c.m)/(1<<63)/2)
		t.Logf("%v m=%d: %d of %d same-bucket pairs share a fingerprint (chance %.1f)", c.d, c.m, same, pairs, want)
		if float64(same) > 3*want+20 {
			t.Errorf("%v m=%d: %d of %d same-bucket pairs share a fingerprint, chance is %.1f", c.d, c.m, same, pairs, want)
		}
	}
}

// locateCase is a golden vector: hash h of geometry g has primary bucket
// i1, fingerprint fp and alternate bucket i2.
type locateCase struct {
	g          Geometry
	h          uint64
	i1, fp, i2 uint64
}

// checkLocate fails t for each case that Locate, primary, Geometry.Alt
// (both ways) or a filter's alt or locate answers otherwise.
func checkLocate(t *testing.T, cases []locateCase) {
	t.Helper()
	for _, c := range cases {
		i1, fp, i2 := c.g.Locate(c.h)
		if i1 != c.i1 || fp != c.fp || i2 != c.i2 {
			t.Errorf("%+v.Locate(%#x) = %d, %#x, %d; want %d, %#x, %d", c.g, c.h, i1, fp, i2, c.i1, c.fp, c.i2)
		}
		if p1, pfp := c.g.primary(c.h); p1 != c.i1 || pfp != c.fp {
			t.Errorf("%+v.primary(%#x) = %d, %#x; want %d, %#x", c.g, c.h, p1, pfp, c.i1, c.fp)
		}
		if a, b := c.g.Alt(c.i1, c.fp), c.g.Alt(c.i2, c.fp); a != c.i2 || b != c.i1 {
			t.Errorf("%+v.Alt(%d, %#x) = %d, Alt(%d) = %d; want %d, %d", c.g, c.i1, c.fp, a, c.i2, b, c.i2, c.i1)
		}
		f := &Filter{g: c.g, split: c.g.Split()} // alt and locate read only these
		if a := f.alt(c.i2, c.fp); a != c.i1 {
			t.Errorf("%+v: filter alt(%d, %#x) = %d, want %d", c.g, c.i2, c.fp, a, c.i1)
		}
		if i1, fp, i2 := f.locate(c.h); i1 != c.i1 || fp != c.fp || i2 != c.i2 {
			t.Errorf("%+v: filter locate(%#x) = %d, %#x, %d", c.g, c.h, i1, fp, i2)
		}
	}
}
