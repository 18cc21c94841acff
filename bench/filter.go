// Package bench compares filterstore's filters with peer Go filter libraries
// through one interface, Filter, with one adapter per library and
// configuration (Libs). The cmd/compare program runs them all in one process,
// round-robin; the Go benchmarks in this package run the same adapters at 1e6
// keys for benchstat.
//
// It is a separate module (its own go.mod) so that the peers never become
// dependencies of filterstore itself.
package bench

import (
	"fmt"
	"math"

	"github.com/filterstore/filterstore/cuckoo"
)

// Filter is the one interface every adapter implements.
type Filter interface {
	// Add adds key. It reports false when the filter refused the key (a
	// full cuckoo filter); the key may then be absent.
	Add(key []byte) bool
	// Has reports whether key may have been added.
	Has(key []byte) bool
	// BitsPerKey is the size of the filter's data in bits divided by the
	// n it was configured for (headers, pages of a mapped file beyond the
	// data, and Go object overhead are not counted).
	BitsPerKey() float64
	// Close releases the filter (a store closes and removes its files).
	Close() error
}

// Builder is implemented by filters with a bulk build path (a static filter
// that cannot Add, a store's Load). Build adds every key of keys; Add is
// then not used.
type Builder interface {
	Build(keys *Keys) (failed int, err error)
}

// Batcher is implemented by filters with a batch lookup.
type Batcher interface {
	// HasMany writes Has(keys[i]) to out[i] and returns out[:len(keys)].
	HasMany(keys [][]byte, out []bool) []bool
}

// Config is what every adapter is configured for.
type Config struct {
	N   uint64  // keys to be added
	FPR float64 // target false-positive rate
	Dir string  // an empty directory for adapters that keep files
}

// Lib is one library in one configuration.
type Lib struct {
	Name string // unique, used by -libs and in tables
	// Note says how the library was configured for the target, where it
	// could not be configured exactly.
	Note string
	// New returns an empty filter configured for cfg. A static filter
	// (built once from all keys) implements Builder and refuses Add.
	New func(cfg Config) (Filter, error)
}

// Build adds every key of keys to f, through Builder if f has one, and
// returns the number of keys f refused.
func Build(f Filter, keys *Keys) (failed int, err error) {
	if b, ok := f.(Builder); ok {
		return b.Build(keys)
	}
	for i := range keys.Len() {
		if !f.Add(keys.At(i)) {
			failed++
		}
	}
	return failed, nil
}

// CuckooFingerprintBits is the fingerprint width giving a cuckoo filter of
// bucket size b a false-positive rate of at most fpr: 2b/2^f <= fpr, that
// is f = ceil(log2(2b/fpr)), clamped to [4, 16].
func CuckooFingerprintBits(b int, fpr float64) int {
	f := int(math.Ceil(math.Log2(2 * float64(b) / fpr)))
	return max(4, min(16, f))
}

// CuckooShape returns the bucket size b and fingerprint width f of the
// smallest filterstore cuckoo filter meeting fpr: for each b with
// f = CuckooFingerprintBits(b, fpr) and b*f <= 64 (a bucket is one 64-bit
// word), the one with the fewest bits per key at cuckoo.TargetLoad(b).
func CuckooShape(fpr float64) (b, f int) {
	best := math.Inf(1)
	for bb := 2; bb <= 16; bb++ {
		ff := CuckooFingerprintBits(bb, fpr)
		if bb*ff > 64 {
			continue
		}
		bits := 64 / (float64(bb) * float64(cuckoo.TargetLoad(bb)) / 1000)
		if bits < best {
			best, b, f = bits, bb, ff
		}
	}
	if b == 0 { // fpr too low for any b: the widest fingerprints
		return 4, 16
	}
	return b, f
}

// LibByName returns the library named name.
func LibByName(name string) (Lib, error) {
	for _, l := range Libs() {
		if l.Name == name {
			return l, nil
		}
	}
	return Lib{}, fmt.Errorf("bench: no library %q", name)
}
