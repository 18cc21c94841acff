package bench

import (
	"iter"
	"math/rand/v2"

	"github.com/cespare/xxhash/v2"
)

// KeySize is the length of every benchmark key.
const KeySize = 16

// Keys is a set of random KeySize-byte keys held in one flat slice, so that
// 1e8 keys cost 1.6 GB and no per-key slice header.
type Keys struct {
	flat []byte
}

// NewKeys returns n random keys drawn from a PCG generator seeded with seed
// and stream. Keys of distinct streams are distinct with overwhelming
// probability (128 random bits each), so a second stream serves as absent
// keys.
func NewKeys(n uint64, seed, stream uint64) *Keys {
	r := rand.New(rand.NewPCG(seed, stream))
	flat := make([]byte, n*KeySize)
	for i := 0; i+8 <= len(flat); i += 8 {
		v := r.Uint64()
		flat[i+0] = byte(v)
		flat[i+1] = byte(v >> 8)
		flat[i+2] = byte(v >> 16)
		flat[i+3] = byte(v >> 24)
		flat[i+4] = byte(v >> 32)
		flat[i+5] = byte(v >> 40)
		flat[i+6] = byte(v >> 48)
		flat[i+7] = byte(v >> 56)
	}
	return &Keys{flat: flat}
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.flat) / KeySize }

// At returns key i, a slice of the flat storage (capacity limited to the
// key, so an append cannot clobber the next one).
func (k *Keys) At(i int) []byte {
	return k.flat[i*KeySize : (i+1)*KeySize : (i+1)*KeySize]
}

// Prefix returns the first n keys (sharing storage).
func (k *Keys) Prefix(n int) *Keys {
	return &Keys{flat: k.flat[:n*KeySize]}
}

// All yields every key.
func (k *Keys) All() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for i := range k.Len() {
			if !yield(k.At(i)) {
				return
			}
		}
	}
}

// Slices returns the keys as a slice of slices (24 bytes each on top of
// the keys), for batch lookups.
func (k *Keys) Slices() [][]byte {
	s := make([][]byte, k.Len())
	for i := range s {
		s[i] = k.At(i)
	}
	return s
}

// Hashes returns the XXH64 (seed 0) of every key, the hash the adapters
// of hash-taking libraries use.
func (k *Keys) Hashes() []uint64 {
	h := make([]uint64, k.Len())
	for i := range h {
		h[i] = xxhash.Sum64(k.At(i))
	}
	return h
}
