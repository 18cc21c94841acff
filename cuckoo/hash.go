package cuckoo

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Constants of the hash derivation. They are part of the file format: a
// filter written with one set of values cannot be read with another.
const (
	fpConst   = 0x9E3779B97F4A7C15 // xored into h before deriving the fingerprint
	altConst  = 0xC2B2AE3D27D4EB4F // xored into fp before deriving H(fp)
	saltConst = 0xD6E8FEB86659FD93 // layer i of a chain has Salt i*saltConst
	altMul    = 0x9E3779B97F4A7C15 // DeriveMul, DeriveLocal: fp^s^altConst times it is z
	fpMul     = 0xFF51AFD7ED558CCD // DeriveMul, DeriveLocal: (h^s) times it, then ranged, is fp - 1
)

// Hash returns the 64-bit hash of key that every hash-taking method expects:
// xxhash.Sum64 (XXH64, seed 0). Part of the file format.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// mix is the murmur3 64-bit finalizer: a cheap bijective remix.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// fastRange maps x uniformly onto [0, n) (Lemire's multiply-shift).
func fastRange(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}

// LayerSalt returns the salt of layer i of a chain: i*0xD6E8FEB86659FD93,
// so layer 0 has salt 0 and every layer a distinct one. Part of the file
// format.
func LayerSalt(i int) uint64 { return uint64(i) * saltConst }
