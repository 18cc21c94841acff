package bench

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/FastFilter/xorfilter"
	bbloom "github.com/bits-and-blooms/bloom/v3"
	"github.com/cespare/xxhash/v2"
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/greatroar/blobloom"
	linvon "github.com/linvon/cuckoo-filter"
	panmari "github.com/panmari/cuckoofilter"
	seiflotfy "github.com/seiflotfy/cuckoofilter"
)

// Libs returns every library and configuration the comparison runs, in
// their default order.
func Libs() []Lib {
	return []Lib{
		{Name: "fs-bloom", Note: "filterstore bloom.Filter on heap words, bloom.Plan(n, fpr) (the mul derivation, file format 4)", New: newFSBloom(bloom.DeriveMul)},
		{Name: "fs-bloom-owned", Note: "fs-bloom built with AddOwned (plain writes, for a filter one goroutine builds before sharing it): the like-for-like peer of blobloom's Filter.Add; its lookups are fs-bloom's", New: newFSBloomOwned},
		{Name: "fs-bloom-mix", Note: "fs-bloom on the mix derivation of file formats 1-3, which older filters keep", New: newFSBloom(bloom.DeriveMix)},
		{Name: "fs-store-bloom", Note: "store.Bloom in a mapped file, non-scaling, Load then Has", New: newStoreBloom},
		{Name: "blobloom", Note: "greatroar/blobloom NewOptimized(n, fpr), keys hashed with xxhash", New: newBlobloom},
		{Name: "blobloom-sync", Note: "greatroar/blobloom NewSyncOptimized(n, fpr): its filter safe for concurrent adds (atomic ORs), as filterstore's are", New: newBlobloomSync},
		{Name: "bitsbloom", Note: "bits-and-blooms/bloom/v3 NewWithEstimates(n, fpr)", New: newBitsBloom},
		{Name: "fs-cuckoo-f16", Note: "filterstore cuckoo.Filter, b=4 f=16, cuckoo.Plan(n) (the local derivation, file format 6)", New: newFSCuckoo(16, cuckoo.DeriveLocal)},
		{Name: "fs-cuckoo-f16-mul", Note: "fs-cuckoo-f16 on the mul derivation of file format 5, which cuckoo filters made then keep", New: newFSCuckoo(16, cuckoo.DeriveMul)},
		{Name: "fs-cuckoo-f16-owned", Note: "fs-cuckoo-f16 built with InsertOwned (no lock, plain writes, for a filter one goroutine builds before sharing it): the like-for-like peer of panmari's and linvon's inserts; its lookups are fs-cuckoo-f16's", New: newFSCuckooOwned},
		{Name: "fs-cuckoo-f16-mix", Note: "fs-cuckoo-f16 on the mix derivation of file formats 1-4, which older cuckoo filters keep", New: newFSCuckoo(16, cuckoo.DeriveMix)},
		{Name: "fs-cuckoo-f16-pow2", Note: "filterstore cuckoo.Filter, b=4 f=16, panmari's bucket count (nextpow2(n/4)): the same load factor and size as panmari's", New: newFSCuckooPow2},
		{Name: "fs-cuckoo-f16-pow2-owned", Note: "fs-cuckoo-f16-pow2 built with InsertOwned: filterstore's insert, at panmari's table size and without locks, against panmari's", New: newFSCuckooPow2Owned},
		{Name: "fs-cuckoo-fopt", Note: "filterstore cuckoo.Filter, (b, f) = CuckooShape(fpr): fewest bits/key with b*f <= 64 (b=5 f=10 at 1%)", New: newFSCuckoo(0, cuckoo.DeriveLocal)},
		{Name: "fs-store-cuckoo", Note: "store.Cuckoo in a mapped file, b=4 f=16, Load then Has", New: newStoreCuckoo},
		{Name: "panmari", Note: "panmari/cuckoofilter, fixed b=4 f=16 (FPR not configurable), power-of-two buckets", New: newPanmari},
		{Name: "panmari+fs-derive", Note: "panmari with filterstore's hash and bucket derivation (cuckoo.Hash, Geometry.Locate at fs-cuckoo-f16-pow2's geometry) computed beside each op, no memory touched: what that arithmetic alone adds (a diagnostic, not a library)", New: newPanmariDerive},
		{Name: "seiflotfy", Note: "seiflotfy/cuckoofilter, fixed b=4 f=8 (FPR not configurable), nextpow2(n) slots", New: newSeiflotfy},
		{Name: "linvon-f16", Note: "linvon/cuckoo-filter single table, b=4 f=16", New: newLinvon(16)},
		{Name: "linvon-fopt", Note: "linvon/cuckoo-filter single table, b=4 f=ceil(log2(8/fpr))", New: newLinvon(0)},
		{Name: "xor-fuse8", Note: "FastFilter/xorfilter BinaryFuse8 (static, ~0.4% FPR fixed), built from xxhash of all keys", New: newFuse8},
	}
}

// filterstore bloom on heap words.

type fsBloom struct {
	f *bloom.Filter
	n uint64
}

// newFSBloom returns the constructor of a filter of bloom.Plan's
// geometry on derivation d.
func newFSBloom(d bloom.Derivation) func(Config) (Filter, error) {
	return func(cfg Config) (Filter, error) {
		g, err := bloom.Plan(cfg.N, cfg.FPR)
		if err != nil {
			return nil, err
		}
		g.Derivation = d
		f, err := bloom.New(g, nil)
		if err != nil {
			return nil, err
		}
		return &fsBloom{f: f, n: cfg.N}, nil
	}
}

func (a *fsBloom) Add(key []byte) bool { a.f.Add(key); return true }
func (a *fsBloom) Has(key []byte) bool { return a.f.Has(key) }
func (a *fsBloom) BitsPerKey() float64 { return float64(a.f.Geometry().Bits()) / float64(a.n) }
func (a *fsBloom) Close() error        { a.f = nil; return nil }

// fsBloomOwned is fsBloom with adds through AddOwned.
type fsBloomOwned struct{ fsBloom }

func newFSBloomOwned(cfg Config) (Filter, error) {
	f, err := newFSBloom(bloom.DeriveMul)(cfg)
	if err != nil {
		return nil, err
	}
	return &fsBloomOwned{*f.(*fsBloom)}, nil
}

func (a *fsBloomOwned) Add(key []byte) bool { a.f.AddOwned(key); return true }

// HasMany implements Batcher.
func (a *fsBloom) HasMany(keys [][]byte, out []bool) []bool { return a.f.HasMany(keys, out) }

// filterstore cuckoo on heap words.

type fsCuckoo struct {
	f *cuckoo.Filter
	n uint64
}

// newFSCuckoo returns the constructor of a b=4 filter with fpBits-bit
// fingerprints (0: the shape CuckooShape(fpr) picks) on derivation d.
func newFSCuckoo(fpBits int, d cuckoo.Derivation) func(Config) (Filter, error) {
	return func(cfg Config) (Filter, error) {
		b, fb := 4, fpBits
		if fb == 0 {
			b, fb = CuckooShape(cfg.FPR)
		}
		g, err := cuckoo.Plan(cfg.N, b, fb)
		if err != nil {
			return nil, err
		}
		g.Derivation = d
		f, err := cuckoo.New(g, nil)
		if err != nil {
			return nil, err
		}
		return &fsCuckoo{f: f, n: cfg.N}, nil
	}
}

// fsCuckooOwned is fsCuckoo with inserts through InsertOwned.
type fsCuckooOwned struct{ fsCuckoo }

func newFSCuckooOwned(cfg Config) (Filter, error) {
	f, err := newFSCuckoo(16, cuckoo.DeriveLocal)(cfg)
	if err != nil {
		return nil, err
	}
	return &fsCuckooOwned{*f.(*fsCuckoo)}, nil
}

func (a *fsCuckooOwned) Add(key []byte) bool { return a.f.InsertOwned(key) == nil }

// newFSCuckooPow2 sizes the filter as panmari sizes its own (b=4, f=16,
// the next power of two of n/4 buckets), so that both fill to the same
// load factor: what filterstore's cuckoo adds cost without its smaller
// table (cuckoo.Plan fills to about 95% of the slots).
func newFSCuckooPow2(cfg Config) (Filter, error) {
	f, err := cuckoo.New(pow2Geometry(cfg.N), nil)
	if err != nil {
		return nil, err
	}
	return &fsCuckoo{f: f, n: cfg.N}, nil
}

func newFSCuckooPow2Owned(cfg Config) (Filter, error) {
	f, err := newFSCuckooPow2(cfg)
	if err != nil {
		return nil, err
	}
	return &fsCuckooOwned{*f.(*fsCuckoo)}, nil
}

// pow2Geometry is fs-cuckoo-f16-pow2's geometry for n keys.
func pow2Geometry(n uint64) cuckoo.Geometry {
	buckets := uint64(1)
	for buckets < (n+3)/4 {
		buckets <<= 1
	}
	return cuckoo.Geometry{Buckets: buckets, BucketSize: 4, FingerprintBits: 16, Salt: 0x9e3779b97f4a7c15, Derivation: cuckoo.DeriveLocal}
}

func (a *fsCuckoo) Add(key []byte) bool { return a.f.Insert(key) == nil }
func (a *fsCuckoo) Has(key []byte) bool { return a.f.Has(key) }
func (a *fsCuckoo) BitsPerKey() float64 {
	return float64(64*a.f.Geometry().Words()) / float64(a.n)
}
func (a *fsCuckoo) Close() error { a.f = nil; return nil }

// greatroar/blobloom, keys hashed with XXH64 as its README suggests.

type blobloomF struct {
	f *blobloom.Filter
	n uint64
}

func newBlobloom(cfg Config) (Filter, error) {
	return &blobloomF{f: blobloom.NewOptimized(blobloom.Config{Capacity: cfg.N, FPRate: cfg.FPR}), n: cfg.N}, nil
}

func (a *blobloomF) Add(key []byte) bool { a.f.Add(xxhash.Sum64(key)); return true }
func (a *blobloomF) Has(key []byte) bool { return a.f.Has(xxhash.Sum64(key)) }
func (a *blobloomF) BitsPerKey() float64 { return float64(a.f.NumBits()) / float64(a.n) }
func (a *blobloomF) Close() error        { a.f = nil; return nil }

// greatroar/blobloom's SyncFilter: adds with atomic ORs, so that
// goroutines may add and look up at once, as filterstore's Bloom filters
// allow; the like-for-like peer of fs-bloom's Add.

type blobloomSync struct {
	f     *blobloom.SyncFilter
	n     uint64
	nbits uint64 // as NewSyncOptimized sizes it (SyncFilter has no NumBits)
}

func newBlobloomSync(cfg Config) (Filter, error) {
	c := blobloom.Config{Capacity: cfg.N, FPRate: cfg.FPR}
	nbits, _ := blobloom.Optimize(c)
	return &blobloomSync{f: blobloom.NewSyncOptimized(c), n: cfg.N, nbits: nbits}, nil
}

func (a *blobloomSync) Add(key []byte) bool { a.f.Add(xxhash.Sum64(key)); return true }
func (a *blobloomSync) Has(key []byte) bool { return a.f.Has(xxhash.Sum64(key)) }
func (a *blobloomSync) BitsPerKey() float64 { return float64(a.nbits) / float64(a.n) }
func (a *blobloomSync) Close() error        { a.f = nil; return nil }

// bits-and-blooms/bloom/v3 (classic Bloom, murmur3 inside).

type bitsBloom struct {
	f *bbloom.BloomFilter
	n uint64
}

func newBitsBloom(cfg Config) (Filter, error) {
	return &bitsBloom{f: bbloom.NewWithEstimates(uint(cfg.N), cfg.FPR), n: cfg.N}, nil
}

func (a *bitsBloom) Add(key []byte) bool { a.f.Add(key); return true }
func (a *bitsBloom) Has(key []byte) bool { return a.f.Test(key) }
func (a *bitsBloom) BitsPerKey() float64 { return float64(a.f.Cap()) / float64(a.n) }
func (a *bitsBloom) Close() error        { a.f = nil; return nil }

// panmari/cuckoofilter: b=4, f=16 fixed.

type panmariF struct {
	f *panmari.Filter
	n uint64
}

func newPanmari(cfg Config) (Filter, error) {
	return &panmariF{f: panmari.NewFilter(uint(cfg.N)), n: cfg.N}, nil
}

func (a *panmariF) Add(key []byte) bool { return a.f.Insert(key) }
func (a *panmariF) Has(key []byte) bool { return a.f.Lookup(key) }
func (a *panmariF) BitsPerKey() float64 { return float64(PanmariBits(a.n)) / float64(a.n) }
func (a *panmariF) Close() error        { a.f = nil; return nil }

// panmari with filterstore's derivation beside it.

type panmariDerive struct {
	panmariF
	g cuckoo.Geometry
}

func newPanmariDerive(cfg Config) (Filter, error) {
	return &panmariDerive{panmariF: panmariF{f: panmari.NewFilter(uint(cfg.N)), n: cfg.N}, g: pow2Geometry(cfg.N)}, nil
}

func (a *panmariDerive) Add(key []byte) bool { return a.f.Insert(key) != a.derived(key) }
func (a *panmariDerive) Has(key []byte) bool { return a.f.Lookup(key) != a.derived(key) }

// derived computes what filterstore's cuckoo lookup computes before it
// reads a bucket and folds it into an answer that is always false.
func (a *panmariDerive) derived(key []byte) bool {
	i1, fp, i2 := a.g.Locate(cuckoo.Hash(key))
	return i1^fp^i2 == ^uint64(0)
}

// PanmariBits is the data size in bits of panmari.NewFilter(n), computed as
// its NewFilter sizes the bucket array (its Encode, which would tell, writes
// one fingerprint at a time through binary.Write and takes seconds at 1e8).
// A test checks it against Encode.
func PanmariBits(n uint64) uint64 {
	buckets := nextPow2(n / 4)
	if float64(n)/float64(buckets*4) > 0.96 {
		buckets <<= 1
	}
	buckets = max(buckets, 1)
	return buckets * 4 * 16
}

// seiflotfy/cuckoofilter: b=4, f=8 fixed.

type seiflotfyF struct {
	f *seiflotfy.Filter
	n uint64
}

func newSeiflotfy(cfg Config) (Filter, error) {
	return &seiflotfyF{f: seiflotfy.NewFilter(uint(cfg.N)), n: cfg.N}, nil
}

func (a *seiflotfyF) Add(key []byte) bool { return a.f.Insert(key) }
func (a *seiflotfyF) Has(key []byte) bool { return a.f.Lookup(key) }
func (a *seiflotfyF) BitsPerKey() float64 { return float64(SeiflotfyBits(a.n)) / float64(a.n) }
func (a *seiflotfyF) Close() error        { a.f = nil; return nil }

// SeiflotfyBits is the data size in bits of seiflotfy.NewFilter(n), as its
// NewFilter sizes it: nextpow2(n)/4 buckets of four 8-bit fingerprints. A
// test checks it against Encode.
func SeiflotfyBits(n uint64) uint64 {
	return max(nextPow2(n)/4, 1) * 4 * 8
}

func nextPow2(n uint64) uint64 {
	if n <= 1 {
		return n
	}
	return 1 << bits.Len64(n-1)
}

// linvon/cuckoo-filter, single table.

type linvonF struct {
	f *linvon.Filter
	n uint64
}

// newLinvon returns the constructor of a b=4 single-table filter with
// fpBits-bit fingerprints; 0 means CuckooFingerprintBits(4, fpr).
func newLinvon(fpBits int) func(Config) (Filter, error) {
	return func(cfg Config) (Filter, error) {
		fb := fpBits
		if fb == 0 {
			fb = CuckooFingerprintBits(4, cfg.FPR)
		}
		if cfg.N > math.MaxUint32 {
			return nil, fmt.Errorf("bench: linvon: n %d too large", cfg.N)
		}
		return &linvonF{f: linvon.NewFilter(4, uint(fb), uint(cfg.N), linvon.TableTypeSingle), n: cfg.N}, nil
	}
}

func (a *linvonF) Add(key []byte) bool { return a.f.Add(key) }
func (a *linvonF) Has(key []byte) bool { return a.f.Contain(key) }
func (a *linvonF) BitsPerKey() float64 { return float64(8*a.f.SizeInBytes()) / float64(a.n) }
func (a *linvonF) Close() error        { a.f = nil; return nil }

// FastFilter/xorfilter BinaryFuse8: static, built from all key hashes.

type fuse8 struct {
	f *xorfilter.BinaryFuse8
	n uint64
}

func newFuse8(cfg Config) (Filter, error) { return &fuse8{n: cfg.N}, nil }

// Add refuses: a binary fuse filter is static (see Build).
func (a *fuse8) Add([]byte) bool { return false }

// Build implements Builder: hash every key, then populate.
func (a *fuse8) Build(keys *Keys) (int, error) {
	f, err := xorfilter.PopulateBinaryFuse8(keys.Hashes())
	if err != nil {
		return 0, fmt.Errorf("bench: xorfilter: %w", err)
	}
	a.f = f
	return 0, nil
}

func (a *fuse8) Has(key []byte) bool { return a.f.Contains(xxhash.Sum64(key)) }
func (a *fuse8) BitsPerKey() float64 { return float64(8*len(a.f.Fingerprints)) / float64(a.n) }
func (a *fuse8) Close() error        { a.f = nil; return nil }
