package cuckoo

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Limits of a Geometry.
const (
	MinBucketSize      = 1
	MaxBucketSize      = 16
	MinFingerprintBits = 4
	MaxFingerprintBits = 16
	// MaxBuckets bounds Buckets so that the data size in bytes (8 per
	// bucket) never overflows.
	MaxBuckets = 1 << 56
)

// Defaults used by Config when a field is zero.
const (
	DefaultBucketSize      = 4
	DefaultFingerprintBits = 16
	// MaxIterations is the default bound on the buckets an insert examines
	// while searching a displacement path.
	MaxIterations = 500
)

// Derivation says how a geometry turns a key's hash into its buckets and
// fingerprint (drawn in the package doc). The store records it per layer
// (file format version 5); files of versions 1 to 4 hold DeriveMix. Part
// of the file format: values never change.
type Derivation uint32

const (
	// DeriveMix takes the primary bucket, the fingerprint and the
	// fingerprint's bucket hash each from a murmur3 finalizer (two
	// multiplies and three shift-xors) and a range multiply. The zero
	// value: every filter written before DeriveMul existed uses it, and a
	// Geometry built by hand without the field keeps meaning what it
	// meant.
	DeriveMix Derivation = 0
	// DeriveMul takes the primary bucket from the high bits of x =
	// h^Salt (one multiply), the fingerprint from the high bits of x
	// times an odd constant (two multiplies, independent of the first),
	// and the fingerprint's bucket hash from one multiply by another odd
	// constant and a range multiply. It relies on h being XXH64 (Hash),
	// whose every bit is uniform. Plan chooses it.
	DeriveMul Derivation = 1
)

// String returns "mix" or "mul".
func (d Derivation) String() string {
	switch d {
	case DeriveMix:
		return "mix"
	case DeriveMul:
		return "mul"
	}
	return fmt.Sprintf("derivation(%d)", uint32(d))
}

// Geometry is everything needed to interpret a filter's words. The store
// keeps it in the layer file's header.
type Geometry struct {
	Buckets         uint64     // number of buckets (= words), >= 1, any value
	BucketSize      int        // slots per bucket b, 1..16
	FingerprintBits int        // bits per fingerprint f, 4..16, b*f <= 64
	Salt            uint64     // mixed into every derived value; distinct per layer
	Derivation      Derivation // how the buckets and fingerprint follow from the hash
}

// Words returns the number of uint64 words the filter's data occupies: one
// per bucket.
func (g Geometry) Words() uint64 { return g.Buckets }

// UsedSlots returns how many of the BucketSize slots of bucket word v hold
// a fingerprint (are not zero).
func (g Geometry) UsedSlots(v uint64) int {
	mask := uint64(1)<<uint(g.FingerprintBits) - 1
	n := 0
	for j := 0; j < g.BucketSize; j++ {
		if v>>(uint(j)*uint(g.FingerprintBits))&mask != 0 {
			n++
		}
	}
	return n
}

// Slots returns the total number of fingerprint slots, Buckets*BucketSize.
func (g Geometry) Slots() uint64 { return g.Buckets * uint64(g.BucketSize) }

// Validate reports every invalid field at once; each error wraps ErrInvalid
// and names the field.
func (g Geometry) Validate() error {
	var errs []error
	if g.Buckets < 1 || g.Buckets > MaxBuckets {
		errs = append(errs, fmt.Errorf("cuckoo: %w: Buckets must be in 1..%d, got %d", ErrInvalid, uint64(MaxBuckets), g.Buckets))
	} else if g.Buckets > math.MaxInt {
		errs = append(errs, fmt.Errorf("cuckoo: %w: Buckets %d does not fit in an int on this platform", ErrInvalid, g.Buckets))
	}
	bOK := g.BucketSize >= MinBucketSize && g.BucketSize <= MaxBucketSize
	fOK := g.FingerprintBits >= MinFingerprintBits && g.FingerprintBits <= MaxFingerprintBits
	if !bOK {
		errs = append(errs, fmt.Errorf("cuckoo: %w: BucketSize must be in %d..%d, got %d", ErrInvalid, MinBucketSize, MaxBucketSize, g.BucketSize))
	}
	if !fOK {
		errs = append(errs, fmt.Errorf("cuckoo: %w: FingerprintBits must be in %d..%d, got %d", ErrInvalid, MinFingerprintBits, MaxFingerprintBits, g.FingerprintBits))
	}
	if bOK && fOK && g.BucketSize*g.FingerprintBits > 64 {
		errs = append(errs, fmt.Errorf("cuckoo: %w: bucket size * fingerprint bits must be <= 64, got %d*%d", ErrInvalid, g.BucketSize, g.FingerprintBits))
	}
	if g.Derivation > DeriveMul {
		errs = append(errs, fmt.Errorf("cuckoo: %w: Derivation must be %d (mix) or %d (mul), got %d", ErrInvalid, DeriveMix, DeriveMul, g.Derivation))
	}
	return errors.Join(errs...)
}

// Locate returns the primary bucket, the fingerprint and the alternate
// bucket of hash h (see the package doc). g must be valid.
func (g Geometry) Locate(h uint64) (i1, fp, i2 uint64) {
	if g.Derivation == DeriveMul {
		return g.locateMul(h)
	}
	return g.locateMix(h)
}

// locateMul is Locate for DeriveMul, small enough to inline: the hot
// lookup paths call it directly and Locate only for DeriveMix.
func (g *Geometry) locateMul(h uint64) (i1, fp, i2 uint64) {
	x, m := h^g.Salt, g.Buckets
	i1, _ = bits.Mul64(x, m)
	fp, _ = bits.Mul64(x*fpMul, 1<<uint(g.FingerprintBits)-1)
	fp++
	hf, _ := bits.Mul64((fp^g.Salt^altConst)*altMul, m)
	if hf < i1 {
		hf += m
	}
	return i1, fp, hf - i1
}

// locateMix is Locate for DeriveMix.
func (g *Geometry) locateMix(h uint64) (i1, fp, i2 uint64) {
	x := h ^ g.Salt
	i1 = fastRange(mix(x), g.Buckets)
	fp = fastRange(mix(x^fpConst), 1<<uint(g.FingerprintBits)-1) + 1
	return i1, fp, alt(i1, fastRange(mix(fp^g.Salt^altConst), g.Buckets), g.Buckets)
}

// primary returns Locate's i1 and fp, without the alternate bucket (an
// insert computes that only when the first bucket is full).
func (g Geometry) primary(h uint64) (i1, fp uint64) {
	x := h ^ g.Salt
	if g.Derivation == DeriveMul {
		i1, _ = bits.Mul64(x, g.Buckets)
		fp, _ = bits.Mul64(x*fpMul, 1<<uint(g.FingerprintBits)-1)
		return i1, fp + 1
	}
	return fastRange(mix(x), g.Buckets), fastRange(mix(x^fpConst), 1<<uint(g.FingerprintBits)-1) + 1
}

// Alt returns the other bucket of fingerprint fp stored in bucket i:
// (H(fp) - i) mod Buckets. Alt(Alt(i, fp), fp) == i for every i < Buckets.
func (g Geometry) Alt(i, fp uint64) uint64 {
	z := fp ^ g.Salt ^ altConst
	if g.Derivation == DeriveMul {
		z *= altMul
	} else {
		z = mix(z)
	}
	hf, _ := bits.Mul64(z, g.Buckets)
	if hf < i {
		hf += g.Buckets
	}
	return hf - i // < Buckets since hf, i < Buckets
}

// alt returns (hf - i) mod m for hf, i < m.
func alt(i, hf, m uint64) uint64 {
	if hf >= i {
		return hf - i
	}
	return hf + m - i // 0 < result < m since hf < i < m
}

// TargetLoad returns the load factor, in per mille of the slots, that Plan
// sizes a filter of bucket size b for. The figures sit well below the load
// at which the first insert fails with MaxIterations = 500 (TestLoadFactor
// measures about 0.46-0.49 for b=1, 0.87 for b=2, 0.96 for b=4, 0.99 for
// b=8), so that Capacity inserts succeed with high probability:
//
//	b=1: 0.30   b=2: 0.78   b=3: 0.86   b=4: 0.90   b=5..7: 0.92   b>=8: 0.94
//
// b=1 is a poor choice: partial-key cuckoo hashing with one slot per bucket
// fails early when fingerprints are short (about 0.5% of b=1, f=8 filters
// fail before Capacity even at 0.30); use b >= 2, or a chain with expansion.
func TargetLoad(b int) (perMille uint64) {
	switch {
	case b <= 1:
		return 300
	case b == 2:
		return 780
	case b == 3:
		return 860
	case b == 4:
		return 900
	case b < 8:
		return 920
	default:
		return 940
	}
}

// Plan returns the geometry (salt 0) of a filter that holds capacity items:
// q = ceil(capacity / (b * TargetLoad(b))), computed exactly in integers,
// plus floor(sqrt(q)) + 1 buckets of slack, which only matters for small
// filters (whose few bucket pairs overlap much more than the average load
// suggests; without it about 1 in 7000 b=4 filters of capacity < 200 failed
// before capacity).
func Plan(capacity uint64, bucketSize, fpBits int) (Geometry, error) {
	g := Geometry{Buckets: 1, BucketSize: bucketSize, FingerprintBits: fpBits}
	var errs []error
	if capacity < 1 {
		errs = append(errs, fmt.Errorf("cuckoo: %w: Capacity must be >= 1, got 0", ErrInvalid))
	}
	if err := g.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Geometry{}, errors.Join(errs...)
	}
	// buckets = ceil(capacity*1000 / (b*load)), with a 128-bit numerator.
	den := uint64(bucketSize) * TargetLoad(bucketSize)
	hi, lo := bits.Mul64(capacity, 1000)
	if hi >= den {
		return Geometry{}, fmt.Errorf("cuckoo: %w: Capacity %d too large", ErrInvalid, capacity)
	}
	q, r := bits.Div64(hi, lo, den)
	if r != 0 {
		q++
	}
	// Small filters need relative slack: with few buckets the bucket pairs
	// of a few items overlap far more than the average load suggests.
	q += isqrt(q) + 1
	g.Buckets = q
	g.Derivation = DeriveMul
	if q > MaxBuckets || q > math.MaxInt {
		return Geometry{}, fmt.Errorf("cuckoo: %w: Capacity %d needs %d buckets, more than %d", ErrInvalid, capacity, q, uint64(min(MaxBuckets, math.MaxInt)))
	}
	return g, nil
}

// isqrt returns floor(sqrt(x)), exactly.
func isqrt(x uint64) uint64 {
	r := uint64(math.Sqrt(float64(x)))
	for r*r > x {
		r--
	}
	for (r+1)*(r+1) <= x {
		r++
	}
	return r
}
