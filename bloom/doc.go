// Package bloom implements blocked Bloom filters over plain word slices: a
// single filter (Filter), a scalable chain of filters (Scalable), a counting
// filter with 4-bit saturating counters (Counting), and the sizing math that
// plans them (Plan, PlanCounting, EstimateFPR).
//
// The package knows nothing about files or the write-ahead log: a filter
// works on a []uint64 that the store backs with a memory-mapped file, or
// that New allocates. All methods are safe for concurrent use but the
// owned adds (AddOwned, AddHashOwned, AddHashesOwned: plain writes, for a
// filter or a range of its blocks that one goroutine owns meanwhile);
// lookups take no lock and read words with atomic loads.
//
// # Memory layout
//
// Everything below is part of the file format and must never change for
// existing files: the hash, the mixing constants, the derivation of the
// block and of the positions, the bit and nibble order.
//
// A filter is Blocks blocks of 512 bits. A block is 8 uint64 words, 64 bytes,
// one cache line; 64 blocks fill a 4 KiB page, and since the store maps the
// words page-aligned, no block straddles a page: a lookup touches one cache
// line and, in a cold filter, reads one page.
//
//	words:  | w0 w1 ... w7 | w8 ... w15 | ... | w(8B-8) ... w(8B-1) |
//	        |   block 0    |  block 1   | ... |     block B-1       |
//	page:   | block 0 .. block 63 | block 64 .. block 127 | ...      |   4096 bytes each
//
//	block b = words[8b : 8b+8]; word j of the block, bit i of the word:
//	        bit position p = 64*j + i, 0 <= p < 512 (bit i = 1<<i, LSB first)
//	        On disk each word is 8 bytes little-endian, so position p is bit
//	        p%8 of byte 64*b + p/8.
//
// # Hash derivation
//
// A geometry's Derivation says which of two derivations its words follow;
// the store records it per layer (file format version 4; files of
// versions 1 to 3 use DeriveMix).
//
//	h     = XXH64(key, seed 0)                          Hash(key)
//	x     = h ^ Salt
//
//	DeriveMul (what Plan and PlanCounting choose):
//	block = hi64(x * Blocks)                            fast range: uniform in [0, Blocks)
//	r_1   = x * 0x9e3779b97f4a7c15 (mod 2^64)
//	s_1   = x
//
//	DeriveMix (every filter written before DeriveMul):
//	y     = mix64(x)                                    splitmix64 finalizer
//	block = hi64(y * Blocks)
//	s_1   = y + 0x9e3779b97f4a7c15, r_1 = mix64(s_1)
//
//	both: s_d = s_(d-1) + 0x9e3779b97f4a7c15, r_d = mix64(s_d)   draw d = 2, 3, ...
//
//	Bloom (9-bit positions, 7 per draw):
//	        r_1: | pos0 bits 0-8 | pos1 9-17 | ... | pos6 54-62 | unused 63 |
//	        r_2: pos7 .. pos13, and so on until K positions
//	Counting (7-bit positions, 9 per draw):
//	        r_1: | pos0 bits 0-6 | pos1 7-13 | ... | pos8 56-62 | unused 63 |
//
//	mix64(z) = z ^= z>>30; z *= 0xbf58476d1ce4e5b9; z ^= z>>27;
//	           z *= 0x94d049bb133111eb; z ^= z>>31
//
// The K positions are uniform draws and may repeat. A key is present when
// all K bits of its block are set. DeriveMul trusts h: XXH64's bits are
// uniform, so the block (x's high bits through the multiply) and the
// first positions (bits 0..62 of x times an odd constant, whose low 9j+9
// bits are a bijection of x's) are uniform and independent of each other;
// it costs one multiply before the block's address is known, where
// DeriveMix costs three (TestFilterFPR measures both within 2.5% of the
// planned rate). A caller of the ...Hash methods must pass Hash(key), not
// a hash of its own. Layer i of a Scalable filter uses Salt = LayerSalt(i)
// = mix64((i+1) * 0x9e3779b97f4a7c15); a plain Filter made by Plan uses
// Salt 0. Geometry (Blocks, K, Salt, Derivation) is recorded by the store;
// Plan's choice of Blocks and K for a given capacity is not part of the
// format.
//
// # Counting filter
//
// The same blocks hold 128 four-bit counters each, 16 per word, counter c of
// the block in word c/16 at bits 4*(c%16) .. 4*(c%16)+3 (counter 0 is the
// low nibble of the block's first word):
//
//	word j of a block:  | c(16j+15) | ... | c(16j+1) | c(16j) |
//	                     bits 63-60          7-4        3-0
//
// A key increments its K counters (a repeated position once per
// occurrence) up to 15, where a counter saturates and stays forever. Delete
// decrements them the same way, skipping saturated counters, and only if no
// counter would go below zero, so Add followed by Delete restores the words
// exactly, but for a counter the Add drove to 15: it stays saturated (and a
// key whose Count it was then counts one more). Count is the minimum of a
// key's counters.
//
// # Sizing
//
// Blocking raises the false-positive rate above the classic formula, since
// blocks receive unequal numbers of keys. Plan sizes with the blocked
// formula, a Poisson mixture over the per-block load:
//
//	FPR(n, B, k) = sum_i Poisson(i; n/B) * E[(X_i/P)^k]
//
// with P = 512 positions per block (P = 128 for Counting) and X_i the
// positions the i keys of a block set (k draws each, uniform, with
// repeats): the exact chance that a lookup's k positions, drawn the same
// way, are all set. It picks the k that needs the fewest blocks. (The
// classic (1 - (1 - 1/P)^(k*i))^k in place of E[(X_i/P)^k], which earlier
// builds used, leaves out that positions repeat and bunch: their filters
// came out at up to 1.12x the rate at 1e-8, counting filters 1.35x.) At
// 1% a filter of 1e5 keys takes 9.92 bits a key (a counting one 43.4)
// against 9.90 (43.0) before.
package bloom
