package catalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/fserr"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
)

func testMeta(id uint64) *format.FilterMeta {
	return &format.FilterMeta{ID: id, Kind: mmapbits.KindBitmap, Capacity: 64, Bits: 64, NonScaling: true,
		Layers: []format.LayerMeta{{Capacity: 64, Size: 64, DataPages: 1, Items: id}}}
}

// bigCatalog writes a catalog whose filters bucket spans several leaf
// pages under a branch page and whose freelist is not empty: 400 filters,
// then every third dropped.
func bigCatalog(t testing.TB, dir string) *Catalog {
	t.Helper()
	c := New(dir)
	c.NoSync = true // durability is not the subject
	if err := c.Create(1); err != nil {
		t.Fatal(err)
	}
	metas := make(map[string]*format.FilterMeta)
	for i := 1; i <= 400; i++ {
		metas[fmt.Sprintf("filter-with-a-long-name-%04d", i)] = testMeta(uint64(i))
	}
	if err := c.PutFilters(401, metas); err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= 400; i += 3 {
		if err := c.DeleteFilter(fmt.Sprintf("filter-with-a-long-name-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// boltPages returns, from bbolt's own account of the healthy file at path,
// the ids of its pages of each type ("branch", "leaf", "freelist", "free",
// "meta"), and the page size.
func boltPages(t *testing.T, path string) (map[string][]uint64, int) {
	t.Helper()
	db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := make(map[string][]uint64)
	err = db.View(func(tx *bolt.Tx) error {
		for id := 0; ; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p == nil {
				return nil
			}
			out[p.Type] = append(out[p.Type], uint64(p.ID))
			id += p.OverflowCount
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, db.Info().PageSize
}

// TestVerifyCatalogRejectsBadPointers: each kind of damage that would send
// bbolt outside the file or outside a page is found before bbolt reads it,
// by the read-only Load and the writer's update alike, and named.
func TestVerifyCatalogRejectsBadPointers(t *testing.T) {
	dir := t.TempDir()
	c := bigCatalog(t, dir)
	good, err := os.ReadFile(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPages(good, os.Getpagesize()); err != nil {
		t.Fatalf("the healthy catalog fails the check: %v", err)
	}
	pages, ps := boltPages(t, c.Path)
	if len(pages["branch"]) == 0 || len(pages["leaf"]) < 2 || len(pages["freelist"]) != 1 || len(pages["free"]) < 3 {
		t.Fatalf("the catalog lacks a page kind the cases need: %v", pages)
	}
	var m boltMeta
	m0, _ := readMeta(good, 0)
	m1, _ := readMeta(good, ps)
	if m = m0; m1.txid > m0.txid {
		m = m1
	}
	le := binary.LittleEndian
	branch, leaf, freelist := pages["branch"][0], pages["leaf"][len(pages["leaf"])-1], pages["freelist"][0]
	at := func(id uint64, off int) int { return int(id)*ps + off }
	// The root bucket's page holds the "meta" bucket inline.
	root := m.root
	inline := -1
	if rootElems, err := elements(good[at(root, 0):at(root+1, 0)], le.Uint16(good[at(root, 10):]), true, nil, nil); err == nil {
		for i, e := range rootElems {
			if e.flags&bucketLeafFlag != 0 && le.Uint64(e.value) == 0 {
				inline = at(root, 0) + int(pageHeaderSize+uint64(i)*elementSize)
			}
		}
	}
	if inline < 0 {
		t.Fatal("no inline bucket on the root bucket's page")
	}
	// The inline page of that bucket: the element's pos and ksize (its
	// 2nd and 3rd fields) lead to its value, a bucket header and the page.
	inlinePage := func(b []byte) int {
		pos, ksize := int(le.Uint32(b[inline+4:])), int(le.Uint32(b[inline+8:]))
		return inline + pos + ksize + bucketHeaderSize
	}

	for _, tc := range []struct {
		name, want string
		damage     func(b []byte)
	}{
		{"branch child past the page count", "outside pages", func(b []byte) { le.PutUint64(b[at(branch, 16+8):], m.pgid+5) }},
		{"branch child far past the file", "outside pages", func(b []byte) { le.PutUint64(b[at(branch, 16+8):], 1<<50) }},
		{"branch without elements", "has no elements", func(b []byte) { le.PutUint16(b[at(branch, 10):], 0) }},
		{"branch that is its own child", "reached twice", func(b []byte) { le.PutUint64(b[at(branch, 16+8):], branch) }},
		{"too many branch elements", "do not fit", func(b []byte) { le.PutUint16(b[at(branch, 10):], 0xFFF0) }},
		{"leaf key past its page", "past its", func(b []byte) { le.PutUint32(b[at(leaf, 16+4):], 1<<31) }},
		{"leaf value past its page", "past its", func(b []byte) { le.PutUint32(b[at(leaf, 16+12):], 1<<30) }},
		{"page header naming another page", "header says", func(b []byte) { le.PutUint64(b[at(leaf, 0):], leaf+1) }},
		{"leaf overflowing the file", "overflow", func(b []byte) { le.PutUint32(b[at(leaf, 12):], 1<<20) }},
		{"page of the wrong type", "flags", func(b []byte) { le.PutUint16(b[at(leaf, 8):], freelistPageFlag) }},
		{"freelist count past its page", "lists", func(b []byte) {
			le.PutUint16(b[at(freelist, 10):], 0xFFFF)
			le.PutUint64(b[at(freelist, 16):], 1<<40)
		}},
		{"freelist listing a page in use", "in use", func(b []byte) {
			le.PutUint16(b[at(freelist, 10):], 1)
			le.PutUint64(b[at(freelist, 16):], leaf)
		}},
		// The freelist [a b c ...] made [a c c ...]: bbolt gives c to a
		// leaf and again to its parent branch, and panics (CI's fuzzing
		// found it: "write: circular dependency occurred").
		{"freelist listing a page twice", "twice", func(b []byte) { copy(b[at(freelist, 16+8):], b[at(freelist, 16+16):at(freelist, 16+24)]) }},
		{"freelist listing a meta page", "outside pages", func(b []byte) {
			le.PutUint16(b[at(freelist, 10):], 1)
			le.PutUint64(b[at(freelist, 16):], 1)
		}},
		{"inline bucket with too many elements", "do not fit", func(b []byte) { le.PutUint16(b[inlinePage(b)+10:], 0x7FFF) }},
		{"inline bucket page that is a branch", "not a leaf", func(b []byte) { le.PutUint16(b[inlinePage(b)+8:], branchPageFlag) }},
		{"inline bucket's key past the page", "past its", func(b []byte) { le.PutUint32(b[inlinePage(b)+16+4:], 1<<31) }},
		{"bucket value shorter than a header", "shorter than a bucket header", func(b []byte) { le.PutUint32(b[inline+12:], 8) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := append([]byte(nil), good...)
			tc.damage(bad)
			err := checkPages(bad, os.Getpagesize())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check: %v, want an error saying %q", err, tc.want)
			}
			if err := os.WriteFile(c.Path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Load(); !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want ErrCorrupt saying %q", err, tc.want)
			}
			if err := c.DeleteFilter("filter-with-a-long-name-0001"); !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("an update: %v, want ErrCorrupt saying %q", err, tc.want)
			}
			if got, _ := os.ReadFile(c.Path); string(got) != string(bad) {
				t.Error("the failed calls changed the file")
			}
		})
	}
	if err := os.WriteFile(c.Path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(); err != nil {
		t.Fatalf("the restored catalog: %v", err)
	}
}

// TestVerifyCatalogAcceptsHealthy: catalogs of every shape a store's
// changes make pass the check, and bbolt's own consistency check agrees.
func TestVerifyCatalogAcceptsHealthy(t *testing.T) {
	rng := testseed.New(t)
	dir := t.TempDir()
	c := New(dir)
	c.NoSync = true // durability is not the subject
	if err := c.Create(1); err != nil {
		t.Fatal(err)
	}
	names := map[string]uint64{}
	next := uint64(1)
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	for round := 0; round < rounds; round++ {
		switch op := rng.IntN(4); {
		case op < 2 || len(names) == 0:
			metas := map[string]*format.FilterMeta{}
			for n := rng.IntN(100); n >= 0; n-- {
				name := fmt.Sprintf("f-%s-%d", strings.Repeat("x", rng.IntN(180)), next)
				names[name] = next
				metas[name] = testMeta(next)
				next++
			}
			if err := c.PutFilters(next, metas); err != nil {
				t.Fatal(err)
			}
		case op == 2:
			for name := range names {
				if rng.IntN(3) == 0 {
					if err := c.DeleteFilter(name); err != nil {
						t.Fatal(err)
					}
					delete(names, name)
				}
			}
		default:
			for name, id := range names {
				to := fmt.Sprintf("r-%d-%d", round, id)
				if err := c.RenameFilter(name, to); err != nil {
					t.Fatal(err)
				}
				delete(names, name)
				names[to] = id
				break
			}
		}
		data, err := os.ReadFile(c.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPages(data, os.Getpagesize()); err != nil {
			t.Fatalf("round %d: a healthy catalog of %d filters fails the check: %v", round, len(names), err)
		}
		st, err := c.Load()
		if err != nil {
			t.Fatalf("round %d: Load: %v", round, err)
		}
		if len(st.Filters) != len(names) {
			t.Fatalf("round %d: Load: %d filters, want %d", round, len(st.Filters), len(names))
		}
	}
	db, err := bolt.Open(c.Path, 0o644, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("bbolt's check of the final catalog: %v", err)
	}
}

// TestVerifyCatalogRandomDamage: bytes changed at random past the meta
// pages either fail the check or leave a file whose every reachable page
// and element bbolt can read; Load never crashes on either. Under the
// race detector (CI runs it) a read of bbolt's outside the file would be
// reported, as it was before the check existed.
func TestVerifyCatalogRandomDamage(t *testing.T) {
	rng := testseed.New(t)
	dir := t.TempDir()
	c := bigCatalog(t, dir)
	good, err := os.ReadFile(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	rejected := 0
	const rounds = 300
	for round := 0; round < rounds; round++ {
		bad := append([]byte(nil), good...)
		for n := 1 + rng.IntN(16); n > 0; n-- {
			bad[2*ps+rng.IntN(len(bad)-2*ps)] = byte(rng.Uint32())
		}
		if checkPages(bad, ps) != nil {
			rejected++
		}
		if err := os.WriteFile(c.Path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		c.Load()
	}
	t.Logf("%d of %d damaged catalogs rejected by the page check", rejected, rounds)
	if rejected == 0 {
		t.Fatal("no damage was ever found: the check does not reach the pages")
	}
}

// BenchmarkVerifyCatalog measures the check every catalog open now runs
// (reading the file and walking its pages) on catalogs of 100 and 10,000
// filters.
func BenchmarkVerifyCatalog(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("filters=%d", n), func(b *testing.B) {
			c := catalogOf(b, n)
			st, err := os.Stat(c.Path)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.Size()), "file-bytes")
			for b.Loop() {
				if err := verifyCatalogPath(c.Path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCatalogLoad measures a whole read-only Load (bbolt open, the
// check, the decode of every entry) for comparison with the check alone.
func BenchmarkCatalogLoad(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("filters=%d", n), func(b *testing.B) {
			c := catalogOf(b, n)
			for b.Loop() {
				if _, err := c.Load(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// catalogOf writes a catalog of n filters for the benchmarks.
func catalogOf(b *testing.B, n int) *Catalog {
	c := New(b.TempDir())
	c.NoSync = true
	if err := c.Create(1); err != nil {
		b.Fatal(err)
	}
	metas := make(map[string]*format.FilterMeta)
	for i := 1; i <= n; i++ {
		metas[fmt.Sprintf("filter-%06d", i)] = testMeta(uint64(i))
	}
	if err := c.PutFilters(uint64(n+1), metas); err != nil {
		b.Fatal(err)
	}
	return c
}
