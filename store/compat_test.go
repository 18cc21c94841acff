package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/mmapbits"
)

// testdata/v3store is a store directory an earlier build wrote (file
// format version 3, catalog values of version 2, every Bloom and counting
// layer on the mix derivation), closed cleanly:
//
//	bloom     Capacity 300, 1% (three layers): "bloom-0" .. "bloom-999"
//	counting  Capacity 1000, 1%: "counting-0" .. "counting-999"
//	cuckoo    Capacity 1000: "cuckoo-0" .. "cuckoo-999"
//	bitmap    10000 bits: every seventh bit set
const v3Keys = 1000

// copyTree copies the directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fileHeader decodes the header of a layer file.
func fileHeader(t *testing.T, path string) mmapbits.Header {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := mmapbits.DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// checkV3Contents checks that every item testdata/v3store holds is
// there, and that absent keys are mostly absent: a derivation mixed up
// between the files and the code shows as missing keys.
func checkV3Contents(t *testing.T, s *Store, stage string) { checkV3Keys(t, s, stage, v3Keys) }

// checkV3Keys is checkV3Contents for the first n keys of each filter.
func checkV3Keys(t *testing.T, s *Store, stage string, n int) {
	t.Helper()
	k := func(p string, i int) []byte { return []byte(fmt.Sprintf("%s-%d", p, i)) }
	b, err := s.Bloom("bloom")
	if err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	c, err := s.Counting("counting")
	if err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	ck, err := s.Cuckoo("cuckoo")
	if err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	m, err := s.Bitmap("bitmap")
	if err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	fp := 0
	for i := range n {
		if !b.Has(k("bloom", i)) || !c.Has(k("counting", i)) || c.Count(k("counting", i)) < 1 || !ck.Has(k("cuckoo", i)) {
			t.Fatalf("%s: key %d missing (bloom %v, counting %v, cuckoo %v)", stage, i,
				b.Has(k("bloom", i)), c.Has(k("counting", i)), ck.Has(k("cuckoo", i)))
		}
		for _, has := range []func([]byte) bool{b.Has, c.Has, ck.Has} {
			if has(k("absent", i)) {
				fp++
			}
		}
	}
	if fp > 3*n/20 {
		t.Fatalf("%s: %d of %d absent keys found", stage, fp, 3*n)
	}
	for off := uint64(0); off < 10000; off++ {
		if m.Get(off) != (off%7 == 0) {
			t.Fatalf("%s: bitmap bit %d = %v", stage, off, m.Get(off))
		}
	}
}

// TestOpensVersion3Store opens a store an earlier build wrote, read-only
// and as a writer: its items are all there, its layers keep the mix
// derivation while new layers get the mul one, it checks clean, and a
// filter exported from it imports. Before CheckHeader accepted files of
// an older version than the one it writes, every layer here opened
// broken.
func TestOpensVersion3Store(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	copyTree(t, filepath.Join("testdata", "v3store"), dir)

	ro := mustOpen(t, dir, &Options{ReadOnly: true})
	checkV3Contents(t, ro, "read-only")
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	s := mustOpen(t, dir, nil)
	checkV3Contents(t, s, "writer")
	rep, err := s.Check()
	if err != nil || len(rep.Problems) != 0 || rep.Layers != 6 {
		t.Fatalf("Check: %+v, %v", rep, err)
	}
	// More keys grow the Bloom filter a layer; the counting and cuckoo
	// filters take adds and deletes on their old layers.
	b, _ := s.Bloom("bloom")
	for i := v3Keys; i < 3*v3Keys; i++ {
		if _, err := b.Add([]byte(fmt.Sprintf("bloom-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := s.Counting("counting")
	if err := c.Add([]byte("counting-new")); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Delete([]byte("counting-new")); !ok || err != nil {
		t.Fatalf("counting Delete: %v, %v", ok, err)
	}
	info, err := b.Info()
	if err != nil || info.Layers < 4 {
		t.Fatalf("Info: %d layers, %v; want at least 4", info.Layers, err)
	}
	var exp bytes.Buffer
	if _, err := b.WriteTo(&exp); err != nil {
		t.Fatal(err)
	}
	if err := s.Import("bloom-copy", &exp); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, dir, nil)
	defer s.Close()
	checkV3Contents(t, s, "reopened")
	for _, name := range []string{"bloom", "bloom-copy"} {
		f, err := s.Bloom(name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 * v3Keys {
			if !f.Has([]byte(fmt.Sprintf("bloom-%d", i))) {
				t.Fatalf("%s: key %d missing after reopen", name, i)
			}
		}
	}
	// The old layers are version 3 files on the mix derivation; the new
	// one is a version 6 file on the mul one (Bloom's newest).
	for _, tc := range []struct {
		file    string
		version uint32
		d       bloom.Derivation
	}{{"1-0.flt", 3, bloom.DeriveMix}, {"1-2.flt", 3, bloom.DeriveMix}, {"2-0.flt", 3, bloom.DeriveMix}, {"1-3.flt", mmapbits.FormatVersion, bloom.DeriveMul}} {
		h := fileHeader(t, filepath.Join(dir, "filters", tc.file))
		if h.Version != tc.version || bloom.Derivation(h.Derivation) != tc.d {
			t.Errorf("%s: version %d derivation %d, want %d and %v", tc.file, h.Version, h.Derivation, tc.version, tc.d)
		}
	}
	rep, err = s.Check()
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("Check after reopen: %+v, %v", rep, err)
	}
}

// testdata/v4store is a store directory the build before file format 5
// wrote (file format version 4, catalog values of version 3: Bloom and
// counting layers on the mul derivation, cuckoo layers on the mix one),
// closed cleanly, with v3store's keys:
//
//	bloom     Capacity 300, 1% (three layers): "bloom-0" .. "bloom-999"
//	counting  Capacity 1000, 1%: "counting-0" .. "counting-999"
//	cuckoo    Capacity 400 (three layers): "cuckoo-0" .. "cuckoo-999"
//	bitmap    10000 bits: every seventh bit set
//
// It was made by a throwaway test at commit 2972483 that opened a store,
// created the four filters with those configurations, added the keys in
// order (i = 0..999 to each of bloom, counting and cuckoo in turn), set
// the bitmap's bits and closed the store.
//
// TestOpensVersion4Store opens it read-only and as a writer: its items are
// all there, its cuckoo layers keep the mix derivation while a new cuckoo
// layer, a new cuckoo filter and no other file get the mul one, adds and
// deletes work on the old layers, an export of the old cuckoo filter
// imports with its layers' derivations, and Check finds no problem. With
// the cuckoo layers read on the mul derivation (the catalog's derivation
// ignored when a layer is opened) the read-only open misses keys.
func TestOpensVersion4Store(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	copyTree(t, filepath.Join("testdata", "v4store"), dir)
	for _, tc := range []struct {
		file    string
		version uint32
		d       uint32
	}{{"1-0.flt", 4, 1}, {"2-0.flt", 4, 1}, {"3-0.flt", 4, 0}, {"3-2.flt", 4, 0}} {
		h := fileHeader(t, filepath.Join(dir, "filters", tc.file))
		if h.Version != tc.version || h.Derivation != tc.d {
			t.Fatalf("testdata %s: version %d derivation %d, want %d and %d", tc.file, h.Version, h.Derivation, tc.version, tc.d)
		}
	}

	ro := mustOpen(t, dir, &Options{ReadOnly: true})
	checkV3Contents(t, ro, "read-only")
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	s := mustOpen(t, dir, nil)
	checkV3Contents(t, s, "writer")
	rep, err := s.Check()
	if err != nil || len(rep.Problems) != 0 || rep.Layers != 8 {
		t.Fatalf("Check: %+v, %v", rep, err)
	}
	ck, err := s.Cuckoo("cuckoo")
	must(t, err)
	k := func(p string, i int) []byte { return []byte(fmt.Sprintf("%s-%d", p, i)) }
	// Deletes and re-adds on the old (mix) layers, then enough keys to
	// grow a fourth layer.
	for i := range 100 {
		if ok, err := ck.Delete(k("cuckoo", i)); !ok || err != nil {
			t.Fatalf("Delete cuckoo-%d: %v, %v", i, ok, err)
		}
	}
	for i := range 100 {
		must(t, ck.Add(k("cuckoo", i)))
	}
	n, grown := growCuckoo(t, ck, v3Keys)
	n--
	nc, err := s.CreateCuckoo("cuckoo-new", CuckooConfig{Capacity: 1000})
	must(t, err)
	for i := range v3Keys {
		must(t, nc.Add(k("new", i)))
	}
	var exp bytes.Buffer
	if _, err := ck.WriteTo(&exp); err != nil {
		t.Fatal(err)
	}
	must(t, s.Import("cuckoo-copy", &exp))
	must(t, s.Close())

	s = mustOpen(t, dir, nil)
	defer s.Close()
	checkV3Contents(t, s, "reopened")
	for _, name := range []string{"cuckoo", "cuckoo-copy"} {
		f, err := s.Cuckoo(name)
		must(t, err)
		for i := range n + 1 {
			if !f.Has(k("cuckoo", i)) {
				t.Fatalf("%s: key %d missing after reopen", name, i)
			}
		}
		got, err := f.Info()
		if err != nil || got.Layers != grown {
			t.Fatalf("%s: %d layers, %v; want %d", name, got.Layers, err, grown)
		}
	}
	nc, err = s.Cuckoo("cuckoo-new")
	must(t, err)
	for i := range v3Keys {
		if !nc.Has(k("new", i)) {
			t.Fatalf("cuckoo-new: key %d missing after reopen", i)
		}
	}
	// The old layers are version 4 files on the mix derivation; the new
	// layer and the new filter are version 6 files on the local one, as
	// are the imported copy's layers on the derivations of the layers it
	// came from (files 6-*: ids 5 and 6 went to cuckoo-new and
	// cuckoo-copy).
	checkCuckooFiles(t, dir, []cuckooFile{{"3-0.flt", 4, cuckoo.DeriveMix}, {"3-2.flt", 4, cuckoo.DeriveMix}, {"3-3.flt", 6, cuckoo.DeriveLocal},
		{"5-0.flt", 6, cuckoo.DeriveLocal}, {"6-0.flt", 6, cuckoo.DeriveMix}, {"6-3.flt", 6, cuckoo.DeriveLocal}})
	rep, err = s.Check()
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("Check after reopen: %+v, %v", rep, err)
	}
}

// testdata/v5store is a store directory the build before file format 6
// wrote (commit c4707a5: file format version 5, catalog values of version
// 4: every Bloom, counting and cuckoo layer on the mul derivation), closed cleanly, with v4store's
// filters and keys and one more:
//
//	cuckoo-big  Capacity 500,000 (one layer of 139,262 buckets, two
//	            DeriveLocal blocks' worth, salt 0): the first 1000 keys
//	            "big-i" whose primary bucket is below 100 (bigKeys), so
//	            that most of them sit in their other bucket
//
// It was made by a throwaway test at that commit that opened a store,
// created the five filters, added the keys in order (i = 0..999 to each of
// bloom, counting and cuckoo in turn, then cuckoo-big's), set the
// bitmap's bits and closed the store.
//
// TestOpensVersion5Store opens it read-only and as a writer: every key is
// there, its cuckoo layers keep the mul derivation (cuckoo-big's, of two
// blocks, is where the local derivation would place keys elsewhere) while
// a new cuckoo layer and a new cuckoo filter get the local one, and Check
// finds no problem. With cuckoo-big's layer read on the local derivation
// (the catalog's derivation ignored when a layer is opened) the read-only
// open misses keys.
func TestOpensVersion5Store(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	copyTree(t, filepath.Join("testdata", "v5store"), dir)
	for _, f := range []string{"1-0.flt", "2-0.flt", "3-0.flt", "3-2.flt", "5-0.flt"} {
		if h := fileHeader(t, filepath.Join(dir, "filters", f)); h.Version != 5 || h.Derivation != 1 {
			t.Fatalf("testdata %s: version %d derivation %d, want 5 and mul", f, h.Version, h.Derivation)
		}
	}
	k := func(p string, i int) []byte { return []byte(fmt.Sprintf("%s-%d", p, i)) }
	var bigKeys [][]byte // cuckoo-big's: primary bucket (mul, salt 0) below 100
	for i := 0; len(bigKeys) < v3Keys; i++ {
		if i1, _ := bits.Mul64(Hash(k("big", i)), 139262); i1 < 100 {
			bigKeys = append(bigKeys, k("big", i))
		}
	}
	checkBig := func(s *Store, stage string) {
		t.Helper()
		big, err := s.Cuckoo("cuckoo-big")
		must(t, err)
		for _, key := range bigKeys {
			if !big.Has(key) {
				t.Fatalf("%s: cuckoo-big: key %q missing", stage, key)
			}
		}
		l := (*big.layers.Load())[0]
		if g := l.Geometry(); g.Derivation != cuckoo.DeriveMul || g.Buckets < 2*cuckoo.LocalBlock {
			t.Fatalf("%s: cuckoo-big's layer is %+v, want mul of two blocks' buckets", stage, g)
		}
	}
	ro := mustOpen(t, dir, &Options{ReadOnly: true})
	checkV3Contents(t, ro, "read-only")
	checkBig(ro, "read-only")
	must(t, ro.Close())

	s := mustOpen(t, dir, nil)
	checkV3Contents(t, s, "writer")
	checkBig(s, "writer")
	ck, err := s.Cuckoo("cuckoo")
	must(t, err)
	n, _ := growCuckoo(t, ck, v3Keys)
	nc, err := s.CreateCuckoo("cuckoo-new", CuckooConfig{Capacity: 1000})
	must(t, err)
	must(t, nc.Add(k("new", 0)))
	rep, err := s.Check()
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("Check: %+v, %v", rep, err)
	}
	must(t, s.Close())

	s = mustOpen(t, dir, nil)
	defer s.Close()
	checkV3Contents(t, s, "reopened")
	checkBig(s, "reopened")
	ck, err = s.Cuckoo("cuckoo")
	must(t, err)
	for i := range n {
		if !ck.Has(k("cuckoo", i)) {
			t.Fatalf("cuckoo: key %d missing after reopen", i)
		}
	}
	// The old layers stay version 5 files on the mul derivation; the new
	// layer (3-3) and the new filter (6-0) are version 6 files on the
	// local one.
	checkCuckooFiles(t, dir, []cuckooFile{{"3-0.flt", 5, cuckoo.DeriveMul}, {"3-2.flt", 5, cuckoo.DeriveMul}, {"5-0.flt", 5, cuckoo.DeriveMul},
		{"3-3.flt", 6, cuckoo.DeriveLocal}, {"6-0.flt", 6, cuckoo.DeriveLocal}})
}

// TestOpensVersion2Files: the layer files of testdata/v3store rewritten as
// format version 2 (the same header numbered 2, no checksum pages), as a
// store made before data checksums holds them, open and answer, and Check
// counts them as keeping no checksums. The build before format 4 opened
// every such layer broken: it held a file's header to the version it
// wrote.
func TestOpensVersion2Files(t *testing.T) {
	dir := v2StoreCopy(t)
	ro := mustOpen(t, dir, &Options{ReadOnly: true})
	checkV3Contents(t, ro, "read-only, version 2 files")
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir, nil)
	defer s.Close()
	checkV3Contents(t, s, "writer, version 2 files")
	rep, err := s.Check()
	if err != nil || len(rep.Problems) != 0 || rep.NoSums != 6 {
		t.Fatalf("Check: %+v, %v; want no problem and 6 layers without checksums", rep, err)
	}
}

// v2StoreCopy returns a copy of testdata/v3store whose six layer files
// are rewritten as version 2 files (no checksum pages).
func v2StoreCopy(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	copyTree(t, filepath.Join("testdata", "v3store"), dir)
	files, err := filepath.Glob(filepath.Join(dir, "filters", "*.flt"))
	if err != nil || len(files) != 6 {
		t.Fatalf("%d layer files, %v", len(files), err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := mmapbits.DecodeHeader(b)
		if err != nil || h.Version != 3 {
			t.Fatalf("%s: version %d, %v", p, h.Version, err)
		}
		fields := mmapbits.HeaderFields(2)
		crcAt := fields[len(fields)-1].Offset
		binary.LittleEndian.PutUint32(b[fields[1].Offset:], 2) // Version
		binary.LittleEndian.PutUint32(b[crcAt:], crc.Checksum(b[:crcAt]))
		b = b[:mmapbits.HeaderSize+h.DataPages*mmapbits.PageSize]
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testdata/v3crash is the state a power loss would leave of a store the
// build before format 4 wrote: v3store's filters, checkpointed, then 200
// more durable adds to each of bloom, counting and cuckoo ("bloom-1000"
// .. "bloom-1199" and so on) whose WAL records are on disk and whose pages
// are not (the layer files are the checkpoint's), and the SESSION marker
// of a writer that never closed. Recovery must replay the Bloom filter's
// records (key hashes) with the mix derivation its layers were written
// with; the counting and cuckoo records are word after-images.
const v3CrashKeys = 1200

// TestRecoversVersion3Crash opens testdata/v3crash read-only (the WAL
// read into the overlay) and as a writer (replayed into the files): every
// key acknowledged before the crash is there, and Check after a clean
// Close finds no problem.
func TestRecoversVersion3Crash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	copyTree(t, filepath.Join("testdata", "v3crash"), dir)
	ro := mustOpen(t, dir, &Options{ReadOnly: true})
	checkV3Keys(t, ro, "read-only", v3CrashKeys)
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir, nil)
	checkV3Keys(t, s, "recovered", v3CrashKeys)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	checkV3Keys(t, s, "reopened", v3CrashKeys)
	rep, err := s.Check()
	if err != nil || len(rep.Problems) != 0 || rep.Unsettled != 0 {
		t.Fatalf("Check: %+v, %v", rep, err)
	}
}

// TestNewLayersUseMulAndLocal: the layers of a Bloom filter the store
// creates and grows hold each key's bits where the mul derivation places
// them, a counting filter holds exactly the counters of a bloom.Counting
// of its blocks, k and salt on the mul derivation, the layers of a cuckoo
// filter it creates and grows (and of one of two DeriveLocal blocks)
// hold each key's fingerprint in one of the two buckets cuckoo's local
// derivation gives, before and after a reopen, and their files say so. A store that kept
// its geometries on the mix derivation while the headers said mul would
// be self-consistent (the power-loss tests pass with it) and wrong for
// every other reader of the files (inspect, an export).
func TestNewLayersUseMulAndLocal(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil) // SyncAlways: counters are in the mapping when Add returns
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 500, ErrorRate: 0.01})
	must(t, err)
	c, err := s.CreateCounting("c", BloomConfig{Capacity: 500, ErrorRate: 0.01})
	must(t, err)
	k, err := s.CreateCuckoo("k", CuckooConfig{Capacity: 500})
	must(t, err)
	kb, err := s.CreateCuckoo("kb", CuckooConfig{Capacity: 600_000}) // two blocks
	must(t, err)
	// kb's keys: the first 1200 whose primary bucket is below 50, so that
	// most sit in their other bucket, where the derivations differ.
	kbBuckets := (*kb.layers.Load())[0].Geometry().Buckets
	var kbKeys []int
	for i := 0; len(kbKeys) < 1200; i++ {
		if i1, _ := bits.Mul64(Hash(key(i)), kbBuckets); i1 < 50 {
			kbKeys = append(kbKeys, i)
		}
	}
	for i := range 1200 { // past the first layer's capacity: b and k grow
		_, err := b.Add(key(i))
		must(t, err)
		must(t, c.Add(key(i%500)))
		must(t, k.Add(key(i)))
		must(t, kb.Add(key(kbKeys[i])))
	}
	check := func(stage string) {
		t.Helper()
		bl, _ := s.Bloom("b")
		layers := *bl.layers.Load()
		if len(layers) < 2 {
			t.Fatalf("%s: %d layers, want a grown one", stage, len(layers))
		}
		// Every key went to the layer that was newest when it came: its
		// bits, as the mul derivation places them, are all set in one.
		for i := range 1200 {
			found := false
			for _, l := range layers {
				g := l.Geometry()
				if g.Derivation != bloom.DeriveMul {
					t.Fatalf("%s: a new layer's geometry is %v", stage, g.Derivation)
				}
				block, pos := g.Locate(bloom.Hash(key(i)), nil)
				all := true
				for _, p := range pos {
					if l.Words()[block*bloom.BlockWords+uint64(p/64)]&(1<<(p%64)) == 0 {
						all = false
					}
				}
				found = found || all
			}
			if !found {
				t.Fatalf("%s: key %d's mul bits are set in no layer", stage, i)
			}
		}
		cf, _ := s.Counting("c")
		g := cf.c.Geometry()
		g.Derivation = bloom.DeriveMul
		want, _ := bloom.NewCounting(g, nil)
		for i := range 1200 {
			want.AddHash(bloom.Hash(key(i % 500)))
		}
		if fmt.Sprint(cf.c.Words()[:g.Words()]) != fmt.Sprint(want.Words()) {
			t.Fatalf("%s: the counting filter's words are not those of the mul derivation", stage)
		}
		kf, _ := s.Cuckoo("k")
		kl := *kf.layers.Load()
		if len(kl) < 2 {
			t.Fatalf("%s: cuckoo: %d layers, want a grown one", stage, len(kl))
		}
		kbf, _ := s.Cuckoo("kb")
		kbl := *kbf.layers.Load()
		if g := kbl[0].Geometry(); len(kbl) != 1 || g.Split() == 0 {
			t.Fatalf("%s: kb: %d layers of %d buckets, want one of two blocks or more", stage, len(kbl), g.Buckets)
		}
		for f, layers := range [][]*cuckoo.Filter{kl, kbl} {
			for n := range 1200 {
				i := n
				if f == 1 {
					i = kbKeys[n]
				}
				found := false
				for _, l := range layers {
					g := l.Geometry()
					if g.Derivation != cuckoo.DeriveLocal {
						t.Fatalf("%s: a new cuckoo layer's geometry is %v", stage, g.Derivation)
					}
					// DeriveLocal as the cuckoo package doc draws it.
					x := Hash(key(i)) ^ g.Salt
					m := g.Buckets
					i1, _ := bits.Mul64(x, m)
					fp, _ := bits.Mul64(x*0xFF51AFD7ED558CCD, 1<<uint(g.FingerprintBits)-1)
					fp++
					z := (fp ^ g.Salt ^ 0xC2B2AE3D27D4EB4F) * 0x9E3779B97F4A7C15
					var split uint64 // first bucket of the last block
					if m >= 2<<16 {
						split = (m>>16 - 1) << 16
					}
					i2 := i1 ^ z>>48
					if i1 >= split {
						hf, _ := bits.Mul64(z, m-split)
						i2 = split + (hf+(m-split)-(i1-split))%(m-split)
					}
					for _, w := range []uint64{l.Words()[i1], l.Words()[i2]} {
						for j := range g.BucketSize {
							found = found || w>>(j*g.FingerprintBits)&(1<<g.FingerprintBits-1) == fp
						}
					}
				}
				if !found {
					t.Fatalf("%s: key %d's fingerprint is in neither local bucket of any cuckoo layer", stage, i)
				}
			}
		}
	}
	check("created")
	must(t, s.Close())
	for _, f := range []string{"1-0.flt", "1-1.flt", "2-0.flt", "3-0.flt", "3-1.flt", "4-0.flt"} {
		want := uint32(1) // mul
		if f[0] >= '3' {
			want = 2 // local
		}
		if h := fileHeader(t, filepath.Join(dir, "filters", f)); h.Version != 6 || h.Derivation != want {
			t.Errorf("%s: version %d derivation %d, want 6 and %d", f, h.Version, h.Derivation, want)
		}
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	check("reopened")
}

// cuckooFile is the format version and derivation a layer file must
// have (checkCuckooFiles).
type cuckooFile struct {
	file    string
	version uint32
	d       cuckoo.Derivation
}

// checkCuckooFiles fails t for each file of dir/filters whose header has
// another version or derivation than want says.
func checkCuckooFiles(t *testing.T, dir string, want []cuckooFile) {
	t.Helper()
	for _, tc := range want {
		h := fileHeader(t, filepath.Join(dir, "filters", tc.file))
		if h.Version != tc.version || cuckoo.Derivation(h.Derivation) != tc.d {
			t.Errorf("%s: version %d derivation %d, want %d and %v", tc.file, h.Version, h.Derivation, tc.version, tc.d)
		}
	}
}

// growCuckoo adds "cuckoo-i" for i = from, from+1, ... to ck until its
// chain has one more layer, and returns the first i not added and the
// layer count.
func growCuckoo(t *testing.T, ck *Cuckoo, from int) (next, layers int) {
	t.Helper()
	info, err := ck.Info()
	must(t, err)
	before, n := info.Layers, from
	for ; info.Layers == before; n++ {
		if n == 10*from {
			t.Fatalf("%d keys added and still %d layers", n, before)
		}
		must(t, ck.Add([]byte(fmt.Sprintf("cuckoo-%d", n))))
		if info, err = ck.Info(); err != nil {
			t.Fatal(err)
		}
	}
	return n, info.Layers
}
