package cuckoo

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

func TestFilterBasic(t *testing.T) {
	g, err := Plan(1000, 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("k")
	if f.Has(key) || f.CountKey(key) != 0 {
		t.Fatal("empty filter has key")
	}
	for n := uint64(1); n <= 3; n++ {
		if err := f.Insert(key); err != nil {
			t.Fatal(err)
		}
		if !f.Has(key) || f.CountKey(key) != n || f.Count() != n {
			t.Fatalf("after %d inserts: Has %v CountKey %d Count %d", n, f.Has(key), f.CountKey(key), f.Count())
		}
	}
	for n := uint64(2); n+1 > 0; n-- {
		if !f.Delete(key) {
			t.Fatal("Delete = false")
		}
		if f.CountKey(key) != n || f.Count() != n {
			t.Fatalf("CountKey %d Count %d, want %d", f.CountKey(key), f.Count(), n)
		}
		if n == 0 {
			break
		}
	}
	if f.Has(key) || f.Delete(key) {
		t.Fatal("deleted key still present")
	}
	f.SetCount(42)
	if f.Count() != 42 {
		t.Fatal("SetCount")
	}
}

// TestSameKeyFillsBothBuckets: 2b copies of one key fit (both buckets), the
// next fails with ErrFull and changes nothing.
func TestSameKeyFillsBothBuckets(t *testing.T) {
	f, _ := New(Geometry{Buckets: 1000, BucketSize: 4, FingerprintBits: 16}, nil)
	h := uint64(12345)
	i1, _, i2 := f.g.Locate(h)
	want := 8
	if i1 == i2 {
		want = 4
	}
	for k := 0; k < want; k++ {
		if err := f.InsertHash(h); err != nil {
			t.Fatal(k, err)
		}
	}
	before := slices.Clone(f.words)
	if err := f.InsertHash(h); !errors.Is(err, ErrFull) {
		t.Fatalf("err = %v, want ErrFull", err)
	}
	if !slices.Equal(before, f.words) || f.Count() != uint64(want) || f.CountHash(h) != uint64(want) {
		t.Fatal("failed insert changed the filter")
	}
}

// TestPlanHoldsCapacity: a filter sized by Plan takes Capacity random items
// without ErrFull, for many small and some larger capacities.
func TestPlanHoldsCapacity(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	caps := []uint64{1, 2, 3, 4, 5, 7, 10, 100_000, 300_001}
	for c := uint64(8); c < 400; c += 3 {
		caps = append(caps, c)
	}
	trials := 4
	if racedetect.Enabled && testing.Short() {
		trials = 1 // the code under the race detector; the plain run counts failures over four
	}
	for _, b := range []int{2, 4, 8} {
		failed := 0
		for _, c := range caps {
			for range trials {
				g, err := Plan(c, b, min(16, 64/b))
				if err != nil {
					t.Fatal(err)
				}
				g.Salt = r.Uint64()
				f, _ := New(g, nil)
				for k := uint64(0); k < c; k++ {
					if err := f.InsertHash(r.Uint64()); err != nil {
						failed++
						t.Logf("b=%d capacity=%d buckets=%d: failed after %d", b, c, g.Buckets, k)
						break
					}
				}
			}
		}
		if b >= 4 && failed > 0 || failed > 1 {
			t.Errorf("b=%d: %d filters failed before capacity", b, failed)
		}
	}
}

// overlay is a Words that captures after-images without applying them, as
// the store does.
type overlay struct {
	base []uint64
	m    map[uint64]uint64
	idx  []uint64
	vals []uint64
}

func newOverlay(base []uint64) *overlay { return &overlay{base: base, m: map[uint64]uint64{}} }

func (o *overlay) Load(i uint64) uint64 {
	if v, ok := o.m[i]; ok {
		return v
	}
	return o.base[i]
}

func (o *overlay) Store(i, v uint64) {
	o.m[i] = v
	o.idx = append(o.idx, i)
	o.vals = append(o.vals, v)
}

func (o *overlay) reset() { clear(o.m); o.idx, o.vals = o.idx[:0], o.vals[:0] }

// TestOverlayAndMoveOrder inserts through a capturing Words at high load:
// the filter's words stay untouched until Apply, and applying the captured
// stores one by one never leaves a previously inserted hash in neither of
// its buckets (the moves run from the end of the path backwards).
func TestOverlayAndMoveOrder(t *testing.T) {
	g := Geometry{Buckets: 2003, BucketSize: 4, FingerprintBits: 16, Salt: 1}
	if racedetect.Enabled && testing.Short() {
		// One goroutine, and every insert rechecks every key before it:
		// a quarter of the buckets is a sixteenth of the work.
		g.Buckets = 503
	}
	f, _ := New(g, nil)
	r := rand.New(rand.NewPCG(7, 8))
	o := newOverlay(f.words)
	var in []uint64
	present := func(h uint64) bool { // bucket-level check, no sequence counter
		i1, fp, i2 := g.Locate(h)
		return f.match(f.load(i1), fp) || f.match(f.load(i2), fp)
	}
	kicked := 0
	for {
		h := r.Uint64()
		before := slices.Clone(f.words)
		err := f.InsertTo(o, h, 0)
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(before, f.words) {
			t.Fatal("InsertTo through an overlay wrote the filter's words")
		}
		if !f.HasHashIn(o, h) {
			t.Fatal("HasHashIn misses pending insert")
		}
		if len(o.idx) > 1 {
			kicked++
		}
		for k := range o.idx {
			if err := f.Apply(o.idx[k:k+1], o.vals[k:k+1]); err != nil {
				t.Fatal(err)
			}
			if k%4 == 0 || k == len(o.idx)-1 {
				for _, x := range in {
					if !present(x) {
						t.Fatalf("after store %d of %d: %#x in neither bucket", k+1, len(o.idx), x)
					}
				}
			}
		}
		o.reset()
		in = append(in, h)
		if !f.HasHash(h) {
			t.Fatal("miss after Apply")
		}
	}
	t.Logf("%d inserts, %d with displacements, load %.3f", len(in), kicked, f.Occupancy())
	if kicked < 50 {
		t.Fatalf("only %d inserts displaced anything", kicked)
	}
}

// TestUsedSlots cross-checks UsedSlots with a slot-by-slot count, at every
// bucket size and fingerprint width that fit a word.
func TestUsedSlots(t *testing.T) {
	words := []uint64{0, 1, 0xf, 0x10, 1 << 63, ^uint64(0), 0x0123456789abcdef, 0x00ff00ff00ff00ff}
	for b := MinBucketSize; b <= MaxBucketSize; b++ {
		for f := MinFingerprintBits; f <= MaxFingerprintBits && b*f <= 64; f++ {
			g := Geometry{Buckets: 1, BucketSize: b, FingerprintBits: f}
			for _, v := range words {
				want := 0
				for j := 0; j < b; j++ {
					if v>>(j*f)&(1<<f-1) != 0 {
						want++
					}
				}
				if got := g.UsedSlots(v); got != want {
					t.Errorf("b=%d f=%d UsedSlots(%#x) = %d, want %d", b, f, v, got, want)
				}
			}
		}
	}
}

// TestFPRBothDerivations: a filter Plan sizes for 100,000 keys (DeriveLocal:
// 1,000,000, so that the table has several blocks), filled with them
// (16-byte keys through Hash), finds every one, and answers "present" for
// absent keys at about the rate partial-key cuckoo hashing gives,
// 2b*load/(2^f-1), under every derivation: a derivation whose
// fingerprint leaned on the bucket index at this size (about 26,000
// buckets) or spread few values would show here as a higher rate, or as
// failed inserts (TestFingerprintIndependentOfBucket covers bucket counts
// past 2^32).
func TestFPRBothDerivations(t *testing.T) {
	probes := 400_000
	raceShort := racedetect.Enabled && testing.Short()
	if raceShort {
		probes = 100_000 // one goroutine's code under the race detector; the plain run measures the rate
	}
	r := testseed.New(t)
	for _, d := range []Derivation{DeriveMix, DeriveMul, DeriveLocal} {
		n := uint64(100_000)
		if d == DeriveLocal {
			n = 1_000_000 // two blocks or more for every shape
			if raceShort {
				n = 540_000 // two blocks for the one shape (b=4, f=16) run
			}
		}
		for k, shape := range []struct{ b, f int }{{4, 16}, {4, 8}, {5, 10}, {2, 12}} {
			if testing.Short() && d == DeriveLocal && k%2 == 1 {
				continue // two of the shapes at a million keys
			}
			if raceShort && k > 0 {
				continue // one shape a derivation under the race detector; the plain run takes all
			}
			g, err := Plan(n, shape.b, shape.f)
			if err != nil {
				t.Fatal(err)
			}
			g.Derivation, g.Salt = d, r.Uint64()
			f, err := New(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			salt := r.Uint64()
			key := func(i uint64) []byte {
				var k [16]byte
				binary.LittleEndian.PutUint64(k[:], i)
				binary.LittleEndian.PutUint64(k[8:], salt)
				return k[:]
			}
			for i := range uint64(n) {
				if err := f.Insert(key(i)); err != nil {
					t.Fatalf("%v b=%d f=%d: insert %d: %v", d, shape.b, shape.f, i, err)
				}
			}
			for i := range uint64(n) {
				if !f.Has(key(i)) {
					t.Fatalf("%v b=%d f=%d: key %d missing", d, shape.b, shape.f, i)
				}
			}
			pos := 0
			for i := range uint64(probes) {
				if f.Has(key(n + i)) {
					pos++
				}
			}
			load := float64(n) / float64(g.Slots())
			want := 2 * float64(shape.b) * load / float64(uint64(1)<<shape.f-1)
			got := float64(pos) / float64(probes)
			t.Logf("%v b=%d f=%d: load %.3f, FPR %.5f (expected %.5f)", d, shape.b, shape.f, load, got, want)
			// 1.25x the expectation plus four standard deviations of the count.
			if limit := 1.25*want + 4*math.Sqrt(want/float64(probes)); got > limit {
				t.Errorf("%v b=%d f=%d: FPR %.5f above %.5f", d, shape.b, shape.f, got, limit)
			}
		}
	}
}
