// Package cuckoo implements cuckoo filters whose buckets are single uint64
// words, laid out so that a file-backed filter can be mapped and read in
// place, with lock-free lookups and a chain of expansion layers.
//
// The package knows nothing about files or the write-ahead log: a Filter
// works on a plain []uint64 that the store backs with a mapped file, and
// every mutation goes through the Words interface so the store can capture
// the after-image of each changed word for its WAL before applying it.
//
// # Bucket layout (part of the file format; never change it)
//
// One bucket is one little-endian uint64 word holding b slots of f-bit
// fingerprints (1 <= b <= 16, 4 <= f <= 16, b*f <= 64; default b=4, f=16).
// Slot j occupies bits [j*f, (j+1)*f); bits at and above b*f are zero.
// Fingerprint 0 means "empty slot", so stored fingerprints are 1..2^f-1.
//
//	bit 63                                                      bit 0
//	+----------------+----------------+----------------+----------------+
//	|     slot 3     |     slot 2     |     slot 1     |     slot 0     |   b=4, f=16
//	+----------------+----------------+----------------+----------------+
//	 [48,64)          [32,48)          [16,32)          [0,16)
//
//	+--------+--------+--------+--------+--------+--------+---------------+
//	| slot 5 | slot 4 | slot 3 | slot 2 | slot 1 | slot 0 |   (unused, 0) |  b=6, f=9 ...
//	(unused bits are the top 64-b*f bits)
//
// Bucket i is word i of the filter's data, so 512 buckets fill one 4 KiB
// page and no bucket straddles a page: a lookup reads two words, i1 and
// i2, and therefore touches at most two pages of a cold filter.
//
//	page 0                  page 1
//	+----+----+-----+-----+ +-----+-----+-----+------+
//	| b0 | b1 | ... |b511 | |b512 |b513 | ... |b1023 | ...
//	+----+----+-----+-----+ +-----+-----+-----+------+
//
// # Hashing (part of the file format; never change it)
//
// A key hashes to h = xxhash.Sum64(key) (XXH64, seed 0). With m buckets,
// f fingerprint bits and the layer's salt s (kept in the file header),
// a geometry's Derivation (recorded per layer by the store: file format
// version 5 for DeriveMul, 6 for DeriveLocal; every cuckoo layer of a file
// of versions 1 to 4 is DeriveMix) says how h gives the primary bucket
// i1, the fingerprint fp and the alternate bucket i2:
//
//	range(x, n) = high 64 bits of the 128-bit product x*n   (fast range, in [0,n))
//	x = h ^ s
//
//	DeriveLocal (what Plan chooses) and DeriveMul (what it chose before):
//	i1 = range(x, m)                                        (x's high bits)
//	fp = range(x * 0xFF51AFD7ED558CCD mod 2^64, 2^f-1) + 1  (in [1, 2^f-1])
//	z  = (fp ^ s ^ 0xC2B2AE3D27D4EB4F) * 0x9E3779B97F4A7C15 mod 2^64
//
//	DeriveMul:
//	i2 = (range(z, m) - i1) mod m
//
//	DeriveLocal, with blocks of L = 65536 buckets (LocalBlock), the last
//	block from split = (floor(m/L) - 1) * L to m (L to 2L-1 buckets), or
//	split = 0 (one block, DeriveMul's i2) if m < 2L:
//	i2 = i1 xor (z >> 48)                                   if i1 < split
//	i2 = split + (range(z, m-split) - (i1-split)) mod (m-split)   otherwise
//
//	DeriveMix (every filter written before DeriveMul):
//	mix(x)  = murmur3 fmix64(x)
//	i1 = range(mix(x), m)
//	fp = range(mix(x ^ 0x9E3779B97F4A7C15), 2^f-1) + 1     (in [1, 2^f-1])
//	i2 = (range(mix(fp ^ s ^ 0xC2B2AE3D27D4EB4F), m) - i1) mod m
//
// DeriveMul trusts h: XXH64's bits are uniform, so i1 (x's high bits) is
// uniform, and fp, the high bits of x times an odd constant, is uniform
// and independent of i1 for any bucket count: hashes that share a bucket
// differ in x's lower bits, which the multiply carries into the high ones
// (TestFingerprintIndependentOfBucket, up to 2^48 buckets; a fingerprint
// cut from x's low bits would share bits with the bucket past 2^32). The
// fingerprint's bucket hash is one multiply by another odd constant
// (Fibonacci hashing, whose high bits spread consecutive values) and a
// range reduction. It costs five multiplies, three deep, and no shift-xor
// rounds before both buckets' addresses are known, where DeriveMix costs
// nine multiplies and nine shift-xors, two finalizers deep
// (TestFPRBothDerivations and TestLoadFactor hold all three to the same
// false positive rate and fill). A caller of the ...Hash methods must pass
// Hash(key), not a hash of its own.
//
// DeriveLocal keeps both buckets of a key in one block of 512 KiB of
// words, so every displacement does too, and a table's blocks fill
// independently: Build gives each goroutine blocks of its own, with no
// lock, compare-and-swap or second phase. Its fill and false positive rate
// are DeriveMul's (TestLoadFactor, TestFPRBothDerivations): i1 is
// uniform, so a block's load is binomial, with a standard deviation of
// 0.2% at Plan's load for b = 4 (about 236,000 keys a block; by that
// estimate the fullest of a billion-key table's 4,240 blocks holds some
// 0.7% more than the average, where inserts fail past about 96%).
//
// i2's rule is an involution for every m (applied to i2 and fp it gives
// i1 back: xor in a block, reflection about the hash in the last block or
// the table), so the bucket count need not be a power of two, and a
// stored fingerprint can always be moved to its other bucket without the
// key. i1 may equal i2.
//
// # Inserts and concurrent lookups
//
// An insert writes into a free slot of i1 or i2 if there is one. Otherwise it
// first searches, without writing, a breadth-first path of displacements
// (each bucket at most once on a path) to a bucket with a free slot,
// examining at most MaxIterations buckets, and then applies the moves from
// the end of the path backwards: the last victim is copied into the free
// slot, then its old slot is overwritten by the previous victim, and so on,
// and the new fingerprint is written last. Each step is one atomic store of
// one word, so at every instant every stored fingerprint is in at least one
// of its two buckets (a reader may briefly see a duplicate).
//
// That alone does not make a two-word lookup safe: a reader could read i1
// just before a fingerprint is copied from i2 into i1 and read i2 just after
// it is overwritten there. Displacements are therefore bracketed by a
// move-sequence counter (odd while moves are being applied). A lookup that
// finds the fingerprint answers at once; a lookup that misses re-reads the
// counter and retries if it was odd or changed. Lookups take no lock and
// allocate nothing; the retry only happens when a miss overlaps a
// displacement.
//
// The counter is a private word of the Filter unless ShareSeq points it at
// a word every reader can see: the store passes the layer file's
// move-sequence word (mmapbits.Region.Seq, in the file's header page), so
// that lookups through any mapping of the file, in any process, retry
// while the writer process moves entries. Apply, the moves of InsertTo,
// and every lookup (HasHash, HasHashIn, CountHash, CountHashIn) use it.
//
// Retries are bounded. A writer that dies in the middle of a move leaves
// the shared counter odd for good, and a writer may in principle keep it
// moving; a lookup that misses and still sees the counter odd or moving
// after a few dozen retries starts reading the clock, and after about 10 ms
// gives the safe answer: HasHash and HasHashIn report true ("maybe
// present"), CountHash and CountHashIn return CountUnknown (math.MaxUint64).
// A lookup that waited so while the counter held one odd value marks that
// value stuck: later lookups that miss give the safe answer at once while
// the counter holds it, rather than 10 ms each. The fast path reads no
// clock. The next writer to move an entry finds the
// counter odd and steps it past the dead writer's move, so it is even again
// once that move is done.
//
// # Deletes
//
// Delete removes one copy of the key's fingerprint from i1 or i2. Within one
// filter this never loses another inserted item: an entry matching key x
// (same fingerprint, in one of x's buckets) has, since alt depends only on
// the bucket and the fingerprint, the same bucket pair as x, so all keys
// matching it are indistinguishable and removing any one copy leaves each of
// them present as long as copies remain. Delete only keys that were
// inserted: deleting an absent key that collides removes another key's copy.
// In a chain the layers have different salts, so a key can falsely match in
// a layer that does not hold its copy; see Chain.DeleteHash. Count counts
// matching fingerprints: at least the number of copies of the key.
//
// # Expansion chains
//
// A Chain is a list of layers. Adds go to the newest layer; when it is full
// (no path within MaxIterations) and Expansion > 0, a new layer of capacity
// Capacity*Expansion^i with its own salt is added; with Expansion 0 the add
// fails with ErrFull. Lookups check every layer, newest first; the layer
// list is published through an atomic pointer to an immutable slice.
//
// # Concurrency
//
// All lookups are safe for concurrent use with each other and with one
// writer, in this process or, through a shared counter (ShareSeq), in
// another. Mutations of one Filter or Chain must be serialized: the plain
// methods (Insert, Delete, Chain.Add, ...) do it with a mutex; callers of
// InsertTo and DeleteFrom serialize themselves. InsertOwned takes no lock
// and writes plainly: it is for a filter one goroutine builds before it
// shares it, and runs beside no other method of the filter.
package cuckoo
