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
	// MaxIterationsLimit is the largest bound an insert accepts (Config,
	// InsertTo), the top of the range Redis takes for a cuckoo filter's
	// maximum iterations (cf-max-iterations). The search keeps every
	// bucket it examines, 16 bytes each, and an insert that finds no path
	// examines them all: this bounds one failing insert to about 1 MiB.
	MaxIterationsLimit = 65535
)

// Derivation says how a geometry turns a key's hash into its buckets and
// fingerprint (drawn in the package doc). The store records it per layer
// (file format version 5; DeriveLocal from version 6); files of versions 1
// to 4 hold DeriveMix. Part of the file format: values never change.
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
	// DeriveLocal is DeriveMul with the alternate bucket kept in the
	// primary's block of LocalBlock buckets (the last block takes the
	// remainder, so it holds LocalBlock to 2*LocalBlock-1): the
	// fingerprint's bucket hash picks the offset xored into the bucket's,
	// or, in the last block, reflected about. A table of fewer than
	// 2*LocalBlock buckets is one block and derives as DeriveMul. Every
	// displacement stays in its block, so a build can give each goroutine
	// blocks of its own (Build). Plan chooses it (file format version 6).
	DeriveLocal Derivation = 2
)

// LocalBlock is the number of buckets in a DeriveLocal block (512 KiB of
// words): part of the file format. Its keys' count varies from block to
// block by about 0.2% at Plan's load (b = 4), so that no block of even a
// billion-key filter is filled much past the table's average.
const LocalBlock = 1 << localShift

// localShift is log2(LocalBlock).
const localShift = 16

// String returns "mix", "mul" or "local".
func (d Derivation) String() string {
	switch d {
	case DeriveMix:
		return "mix"
	case DeriveMul:
		return "mul"
	case DeriveLocal:
		return "local"
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
	if g.Derivation > DeriveLocal {
		errs = append(errs, fmt.Errorf("cuckoo: %w: Derivation must be %d (mix), %d (mul) or %d (local), got %d", ErrInvalid, DeriveMix, DeriveMul, DeriveLocal, g.Derivation))
	}
	return errors.Join(errs...)
}

// Locate returns the primary bucket, the fingerprint and the alternate
// bucket of hash h (see the package doc). g must be valid.
func (g Geometry) Locate(h uint64) (i1, fp, i2 uint64) {
	if g.Derivation == DeriveMix {
		return g.locateMix(h)
	}
	i1, fp, z := g.mulParts(h)
	return i1, fp, altIn(i1, z, g.Buckets, g.Split())
}

// Split returns the first bucket of a DeriveLocal table's last block:
// below it, a bucket's alternate is in its own block of LocalBlock; from
// it on, in the last block. 0 for a table of one block and for the other
// derivations (the whole table is one block).
func (g Geometry) Split() uint64 {
	if g.Derivation != DeriveLocal || g.Buckets < 2*LocalBlock {
		return 0
	}
	return (g.Buckets>>localShift - 1) << localShift
}

// mulParts returns, for DeriveMul and DeriveLocal, the primary bucket,
// the fingerprint and the fingerprint's hash word z, from which altIn
// takes the alternate bucket. Small enough to inline, as altIn is: the
// hot lookup paths call the two directly, with the filter's Split.
func (g *Geometry) mulParts(h uint64) (i1, fp, z uint64) {
	x := h ^ g.Salt
	i1, _ = bits.Mul64(x, g.Buckets)
	fp, _ = bits.Mul64(x*fpMul, 1<<uint(g.FingerprintBits)-1)
	fp++
	return i1, fp, (fp ^ g.Salt ^ altConst) * altMul
}

// altIn returns the alternate of bucket i, of m, for a fingerprint whose
// hash word is z, in a table split at split (Geometry.Split): below it,
// i xor z's top localShift bits (within i's block); from it on,
// (H - (i - split)) mod s + split, where s = m - split and H is z ranged
// onto [0, s) (with split 0: DeriveMul's (H(fp) - i) mod m). Either way an
// involution.
func altIn(i, z, m, split uint64) uint64 {
	if i < split {
		return i ^ z>>(64-localShift)
	}
	s := m - split
	hf, _ := bits.Mul64(z, s)
	o := i - split
	if hf < o {
		hf += s
	}
	return split + hf - o // < m since hf, o < s
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
	if g.Derivation != DeriveMix {
		i1, _ = bits.Mul64(x, g.Buckets)
		fp, _ = bits.Mul64(x*fpMul, 1<<uint(g.FingerprintBits)-1)
		return i1, fp + 1
	}
	return fastRange(mix(x), g.Buckets), fastRange(mix(x^fpConst), 1<<uint(g.FingerprintBits)-1) + 1
}

// Alt returns the other bucket of fingerprint fp stored in bucket i:
// (H(fp) - i) mod Buckets, or for DeriveLocal the other bucket in i's
// block (see the package doc). Alt(Alt(i, fp), fp) == i for every
// i < Buckets.
func (g Geometry) Alt(i, fp uint64) uint64 {
	if g.Derivation == DeriveMix {
		return g.altMix(i, fp)
	}
	return altIn(i, (fp^g.Salt^altConst)*altMul, g.Buckets, g.Split())
}

// altMix is Alt for DeriveMix.
func (g *Geometry) altMix(i, fp uint64) uint64 {
	hf, _ := bits.Mul64(mix(fp^g.Salt^altConst), g.Buckets)
	return alt(i, hf, g.Buckets)
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
// Fingerprints of 4 or 5 bits fail early at any b: a bucket's alternates
// are the 2^f - 1 buckets its fingerprints point to, too few to spread
// displacements over. An adversarial review's filters met their first
// ErrFull at 62-64% of Capacity for b=2, f=4 (200k and 1M items), 86-91%
// for b=2, f=5, and 94-99% for b=4..16, f=4. Use f >= 6 for a filter that
// must hold its Capacity, or a chain with expansion.
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
	if q >= MaxBuckets {
		// Before the rounding and the slack, which could wrap past 2^64.
		return Geometry{}, fmt.Errorf("cuckoo: %w: Capacity %d needs more than %d buckets", ErrInvalid, capacity, uint64(MaxBuckets))
	}
	if r != 0 {
		q++
	}
	// Small filters need relative slack: with few buckets the bucket pairs
	// of a few items overlap far more than the average load suggests.
	q += isqrt(q) + 1
	g.Buckets = q
	g.Derivation = DeriveLocal
	if q > MaxBuckets || q > math.MaxInt {
		return Geometry{}, fmt.Errorf("cuckoo: %w: Capacity %d needs %d buckets, more than %d", ErrInvalid, capacity, q, uint64(min(MaxBuckets, math.MaxInt)))
	}
	return g, nil
}

// isqrt returns floor(sqrt(x)), exactly, for any x: the root is at most
// 2^32-1, whose square fits in 64 bits, and no square computed passes it.
func isqrt(x uint64) uint64 {
	r := min(uint64(math.Sqrt(float64(x))), math.MaxUint32)
	for r*r > x {
		r--
	}
	for r < math.MaxUint32 && (r+1)*(r+1) <= x {
		r++
	}
	return r
}

// locate is f.g.Locate(h) with the filter's split: no copy of the
// geometry, no Split per call (the lookups' fast paths inline its two
// halves instead).
func (f *Filter) locate(h uint64) (i1, fp, i2 uint64) {
	if f.g.Derivation == DeriveMix {
		return f.g.locateMix(h)
	}
	i1, fp, z := f.g.mulParts(h)
	return i1, fp, altIn(i1, z, f.g.Buckets, f.split)
}

// alt is f.g.Alt(i, fp), with the DeriveMul and DeriveLocal cases inline
// (the displacement searches call it for every slot they examine).
func (f *Filter) alt(i, fp uint64) uint64 {
	if f.g.Derivation == DeriveMix {
		return f.g.altMix(i, fp)
	}
	return altIn(i, (fp^f.g.Salt^altConst)*altMul, f.g.Buckets, f.split)
}
