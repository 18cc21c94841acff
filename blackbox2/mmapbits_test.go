package blackbox2_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func testHeader() mmapbits.Header {
	return mmapbits.Header{Kind: mmapbits.KindBloom, DataPages: 3, FilterID: 9, Layer: 1, K: 7, Salt: 0x1234,
		Size: 3 * 64, Capacity: 1000, ErrorRate: 0.01, StoreID: 0xfeed, Derivation: 1}
}

// TestMmapbitsHeaderLayout checks the version 6 table in the package doc:
// magic at 0, version at 8, kind 12, data pages 16, filter id 24, layer 32,
// k 36, salt 40, size 48, bucket size 56, fingerprint bits 60, capacity 64,
// error rate 72, store id 80, derivation 88, CRC-32C of bytes 0..91 at 92,
// and HeaderFields(6) agreeing with it.
func TestMmapbitsHeaderLayout(t *testing.T) {
	h := testHeader()
	b := h.Append(nil)
	if len(b) != 4096 {
		t.Fatalf("Append wrote %d bytes", len(b))
	}
	le := binary.LittleEndian
	if string(b[:8]) != mmapbits.Magic || le.Uint32(b[8:]) != 6 || le.Uint32(b[12:]) != 1 || le.Uint64(b[16:]) != 3 ||
		le.Uint64(b[24:]) != 9 || le.Uint32(b[32:]) != 1 || le.Uint32(b[36:]) != 7 || le.Uint64(b[40:]) != 0x1234 ||
		le.Uint64(b[48:]) != 192 || le.Uint64(b[64:]) != 1000 || math.Float64frombits(le.Uint64(b[72:])) != 0.01 ||
		le.Uint64(b[80:]) != 0xfeed || le.Uint32(b[88:]) != 1 || le.Uint32(b[92:]) != crc32.Checksum(b[:92], castagnoli) {
		t.Errorf("encoded header does not follow the documented table")
	}
	for i := 96; i < 4096; i++ {
		if b[i] != 0 {
			t.Fatalf("reserved byte %d = %d", i, b[i])
		}
	}
	want := map[string][2]int{"Magic": {0, 8}, "Version": {8, 4}, "Kind": {12, 4}, "DataPages": {16, 8}, "FilterID": {24, 8}, "Layer": {32, 4},
		"K": {36, 4}, "Salt": {40, 8}, "Size": {48, 8}, "BucketSize": {56, 4}, "FingerprintBits": {60, 4}, "Capacity": {64, 8},
		"ErrorRate": {72, 8}, "StoreID": {80, 8}, "Derivation": {88, 4}, "CRC": {92, 4}}
	fields := mmapbits.HeaderFields(6)
	if len(fields) != len(want) || fields[len(fields)-1].Name != "CRC" {
		t.Errorf("HeaderFields(6) = %+v", fields)
	}
	for _, f := range fields {
		if w, ok := want[f.Name]; !ok || w[0] != f.Offset || w[1] != f.Size {
			t.Errorf("field %+v, doc %v", f, w)
		}
	}
	if f1 := mmapbits.HeaderFields(1); len(f1) == 0 || f1[len(f1)-1].Offset != 80 {
		t.Errorf("HeaderFields(1) = %+v (doc: CRC at 80)", f1)
	}
	if f3 := mmapbits.HeaderFields(3); len(f3) == 0 || f3[len(f3)-1].Offset != 88 {
		t.Errorf("HeaderFields(3) = %+v (doc: CRC at 88)", f3)
	}
	if mmapbits.HeaderFields(0) != nil || mmapbits.HeaderFields(7) != nil {
		t.Error("HeaderFields of an unknown version not nil")
	}
	got, rest, err := mmapbits.DecodeHeader(append(b, 1, 2))
	h.Version = 6
	if err != nil || got != h || len(rest) != 2 {
		t.Errorf("DecodeHeader = %+v, %d rest, %v; want %+v", got, len(rest), err, h)
	}
}

// TestMmapbitsDecodeErrors checks DecodeHeader's "Every failure wraps
// ErrCorrupt through one of ErrShortHeader, ErrBadMagic (ErrZeroHeader for a
// page of zeros), ErrBadVersion, ErrBadChecksum or ErrBadSize; a *FieldError
// names the byte offset of the failing field", "the result never depends on
// the seq word at SeqOffset", and FieldError's Error format.
func TestMmapbitsDecodeErrors(t *testing.T) {
	good := testHeader().Append(nil)
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	recrc := func(b []byte) { binary.LittleEndian.PutUint32(b[92:], crc32.Checksum(b[:92], castagnoli)) }
	cases := []struct {
		name   string
		b      []byte
		target error
		off    int64
	}{
		{"short", good[:4095], mmapbits.ErrShortHeader, -1},
		{"zero", make([]byte, 4096), mmapbits.ErrZeroHeader, 0},
		{"magic", edit(func(b []byte) { b[0] = 'X' }), mmapbits.ErrBadMagic, 0},
		{"version", edit(func(b []byte) { b[8] = 9; recrc(b) }), mmapbits.ErrBadVersion, 8},
		{"crc", edit(func(b []byte) { b[50] ^= 1 }), mmapbits.ErrBadChecksum, 92},
		{"kind", edit(func(b []byte) { b[12] = 9; recrc(b) }), mmapbits.ErrCorrupt, -1},
		{"derivation", edit(func(b []byte) { b[88] = 3; recrc(b) }), mmapbits.ErrCorrupt, -1},
		{"bloom derivation 2", edit(func(b []byte) { b[88] = 2; recrc(b) }), mmapbits.ErrCorrupt, -1},
		{"datapages", edit(func(b []byte) { binary.LittleEndian.PutUint64(b[16:], mmapbits.MaxDataPages+1); recrc(b) }), mmapbits.ErrBadSize, -1},
	}
	for _, c := range cases {
		var err error
		noPanic(t, c.name, func() { _, _, err = mmapbits.DecodeHeader(c.b) })
		if !errors.Is(err, c.target) || !errors.Is(err, mmapbits.ErrCorrupt) {
			t.Errorf("%s: %v, want %v", c.name, err, c.target)
			continue
		}
		var fe *mmapbits.FieldError
		if c.off >= 0 {
			if !errors.As(err, &fe) || fe.Offset != c.off {
				t.Errorf("%s: FieldError %+v, want offset %d", c.name, fe, c.off)
			} else if fe.Error() != sprintf("%v at offset %d: %s", fe.Err, fe.Offset, fe.Reason) {
				t.Errorf("%s: Error() = %q", c.name, fe.Error())
			}
		}
	}
	seq := edit(func(b []byte) { binary.LittleEndian.PutUint64(b[mmapbits.SeqOffset:], 12345) })
	if _, _, err := mmapbits.DecodeHeader(seq); err != nil {
		t.Errorf("seq word made the header invalid: %v", err)
	}
	if !errors.Is(mmapbits.ErrZeroHeader, mmapbits.ErrBadMagic) {
		t.Error("ErrZeroHeader does not wrap ErrBadMagic")
	}
}

// TestMmapbitsHeaderHelpers checks DataWords, FileSize ("the header page, the
// data pages and the checksum pages"), SumPages ("one per SumsPerPage data
// pages"), SumOffset, PagesFor, PageSum ("a zeroed page sums to 0") and Kind.
func TestMmapbitsHeaderHelpers(t *testing.T) {
	h := mmapbits.Header{Kind: mmapbits.KindBitmap, DataPages: 1025, Size: 1025 * 4096 * 8}
	if h.DataWords() != 1025*512 || h.SumPages() != 2 || h.FileSize() != 4096*(1+1025+2) || !h.HasSums() {
		t.Errorf("DataWords %d SumPages %d FileSize %d HasSums %v", h.DataWords(), h.SumPages(), h.FileSize(), h.HasSums())
	}
	if h.SumOffset(0) != 4096*(1+1025) || h.SumOffset(1024) != 4096*(1+1025+1) {
		t.Errorf("SumOffset %d %d", h.SumOffset(0), h.SumOffset(1024))
	}
	h2 := h
	h2.Version = 2
	if h2.HasSums() || h2.SumPages() != 0 || h2.FileSize() != 4096*1026 {
		t.Errorf("v2: HasSums %v SumPages %d", h2.HasSums(), h2.SumPages())
	}
	if mmapbits.PagesFor(0) != 0 || mmapbits.PagesFor(1) != 1 || mmapbits.PagesFor(512) != 1 || mmapbits.PagesFor(513) != 2 {
		t.Error("PagesFor")
	}
	if mmapbits.PageSum(make([]uint64, 512)) != 0 {
		t.Error("PageSum of zeros not 0")
	}
	page := make([]uint64, 512)
	page[3] = 77
	raw := make([]byte, 4096)
	binary.LittleEndian.PutUint64(raw[24:], 77)
	if mmapbits.PageSum(page) != crc32.Checksum(raw, castagnoli)^crc32.Checksum(make([]byte, 4096), castagnoli) {
		t.Error("PageSum formula")
	}
	for k, s := range map[mmapbits.Kind]string{1: "bloom", 3: "cuckoo", 4: "bitmap"} {
		if k.String() != s || !k.Valid() {
			t.Errorf("Kind %d: %q %v", k, k.String(), k.Valid())
		}
	}
	if mmapbits.Kind(0).Valid() || mmapbits.Kind(5).Valid() {
		t.Error("invalid kinds valid")
	}
}

// TestMmapbitsNewMem checks NewMem ("a region of h.DataPages zeroed pages
// held only in memory. Sync and Touch do nothing") and ErrInvalid's "a
// header with no kind".
func TestMmapbitsNewMem(t *testing.T) {
	r, err := mmapbits.NewMem(mmapbits.Header{Kind: mmapbits.KindBloom, DataPages: 2, Size: 128, K: 3})
	must(t, err)
	if len(r.Words()) != 1024 || r.NumWords() != 1024 {
		t.Errorf("words %d", len(r.Words()))
	}
	r.Words()[5] = 9
	if w, ok := r.Word(5); !ok || w != 9 {
		t.Error("Word(5)")
	}
	if _, ok := r.Word(1024); ok {
		t.Error("Word out of range ok")
	}
	must(t, r.Sync())
	if pc := r.CheckPage(0); pc.HasSum {
		t.Errorf("memory region has sums: %+v", pc)
	}
	if n, err := r.UpdateSums(true); n != 0 || err != nil {
		t.Errorf("UpdateSums %d %v", n, err)
	}
	must(t, r.Close())
	if _, ok := r.Word(5); ok {
		t.Error("Word after Close ok")
	}
	var e error
	noPanic(t, "NewMem", func() { _, e = mmapbits.NewMem(mmapbits.Header{DataPages: 1}) })
	wantIs(t, "NewMem with no kind", e, mmapbits.ErrInvalid)
}

// TestMmapbitsOSFiles checks OS: Create "fails if path exists", leaves no
// path+".tmp", the file size is FileSize(), Open/OpenView/OpenRead "after
// checking its header and size", OpenRead's "Sync fails with ErrReadOnly",
// Stamp/SetStamp through Sync, Remove "Removing a missing file is not an
// error", List "A missing dir has no files", View.Close "Further calls fail
// with ErrClosed or report false".
func TestMmapbitsOSFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.flt")
	var m mmapbits.OS
	h := testHeader()
	r, err := m.Create(p, h)
	must(t, err)
	if _, err := os.Stat(p + ".tmp"); err == nil {
		t.Error("tmp file left")
	}
	if fi, _ := os.Stat(p); fi.Size() != h.FileSize() {
		t.Errorf("size %d, FileSize %d", fi.Size(), h.FileSize())
	}
	if _, err := m.Create(p, h); err == nil {
		t.Error("Create over an existing path succeeded")
	}
	r.Words()[10] = 0xabc
	r.Touch(10, 11)
	r.SetStamp(55)
	if n, err := r.UpdateSums(false); n != 1 || err != nil {
		t.Errorf("UpdateSums %d %v", n, err)
	}
	must(t, r.Sync())
	if pc := r.CheckPage(0); !pc.HasSum || pc.Stale || pc.Stored != pc.Computed {
		t.Errorf("CheckPage %+v", pc)
	}
	must(t, r.Close())
	if err := r.Sync(); !errors.Is(err, mmapbits.ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	v, err := m.OpenView(p)
	must(t, err)
	if w, ok := v.Word(10); !ok || w != 0xabc || v.Stamp() != 55 || v.Header().FilterID != 9 {
		t.Errorf("view: %#x %v stamp %d", w, ok, v.Stamp())
	}
	must(t, v.Close())
	if _, ok := v.Word(10); ok {
		t.Error("Word after view Close")
	}
	if err := v.Close(); err != nil && !errors.Is(err, mmapbits.ErrClosed) {
		t.Errorf("second Close %v", err)
	}
	ro, err := m.OpenRead(p)
	must(t, err)
	if err := ro.Sync(); !errors.Is(err, mmapbits.ErrReadOnly) {
		t.Errorf("OpenRead Sync: %v", err)
	}
	if _, err := ro.UpdateSums(true); !errors.Is(err, mmapbits.ErrReadOnly) {
		t.Errorf("OpenRead UpdateSums: %v", err)
	}
	if ro.Words()[10] != 0xabc {
		t.Error("OpenRead words")
	}
	ro.Close()
	names, err := m.List(dir)
	if err != nil || len(names) != 1 || names[0] != "a.flt" {
		t.Errorf("List %v %v", names, err)
	}
	if names, err := m.List(filepath.Join(dir, "missing")); err != nil || len(names) != 0 {
		t.Errorf("List(missing) %v %v", names, err)
	}
	must(t, m.Remove(p))
	must(t, m.Remove(p))
	if _, err := m.Open(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a removed file: %v", err)
	}
}

// TestMmapbitsOpenDamaged checks that Open/OpenView/OpenRead check "header and
// size": a truncated or extended file is ErrBadSize, a short one
// ErrShortHeader, a directory or empty file an error, never a panic.
func TestMmapbitsOpenDamaged(t *testing.T) {
	dir := t.TempDir()
	var m mmapbits.OS
	p := filepath.Join(dir, "a.flt")
	r, err := m.Create(p, testHeader())
	must(t, err)
	r.Close()
	data, _ := os.ReadFile(p)
	write := func(name string, b []byte) string {
		q := filepath.Join(dir, name)
		os.WriteFile(q, b, 0o644)
		return q
	}
	cases := map[string]struct {
		path   string
		target error
	}{
		"truncated": {write("t.flt", data[:len(data)-4096]), mmapbits.ErrBadSize},
		"extended":  {write("e.flt", append(append([]byte(nil), data...), make([]byte, 4096)...)), mmapbits.ErrBadSize},
		"short":     {write("s.flt", data[:100]), mmapbits.ErrShortHeader},
		"empty":     {write("z.flt", nil), mmapbits.ErrShortHeader},
		"text":      {write("x.flt", []byte("hello world, not a filter file at all\n")), mmapbits.ErrCorrupt},
		"dir":       {dir, nil},
	}
	for name, c := range cases {
		for op, open := range map[string]func(string) (any, error){
			"Open":     func(p string) (any, error) { return m.Open(p) },
			"OpenView": func(p string) (any, error) { return m.OpenView(p) },
			"OpenRead": func(p string) (any, error) { return m.OpenRead(p) },
		} {
			var err error
			noPanic(t, op+" "+name, func() { _, err = open(c.path) })
			if err == nil {
				t.Errorf("%s(%s) succeeded", op, name)
			} else if c.target != nil && !errors.Is(err, c.target) {
				t.Errorf("%s(%s): %v, want %v", op, name, err, c.target)
			}
		}
	}
}

// TestMmapbitsEvict checks Evicter: "A missing file returns an error wrapping
// fs.ErrNotExist; a path that is not a regular file is refused", and a file
// mapped by a region returns ErrBusy (unless on tmpfs: nil).
func TestMmapbitsEvict(t *testing.T) {
	dir := t.TempDir()
	var m mmapbits.OS
	if err := m.Evict(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Evict(missing): %v", err)
	}
	if err := m.Evict(dir); err == nil {
		t.Error("Evict(dir) accepted")
	}
	p := filepath.Join(dir, "a.flt")
	r, err := m.Create(p, testHeader())
	must(t, err)
	r.Words()[0] = 1
	r.Touch(0, 1)
	err = m.Evict(p)
	if err != nil && !errors.Is(err, mmapbits.ErrBusy) {
		t.Errorf("Evict of a mapped file: %v", err)
	}
	r.Close()
	if err := m.Evict(p); err != nil {
		t.Errorf("Evict of an unmapped file: %v", err)
	}
}

// TestMmapbitsSim checks Sim: "A Sync that fails (SetInjector) writes nothing
// and ... marks every dirty page of the file clean: the page is lost. It
// keeps its memory image", Crash ("a lost page keeps its disk image"), Kill
// ("nothing is lost"), Paths, and "An injected Create failure creates
// nothing".
func TestMmapbitsSim(t *testing.T) {
	s := mmapbits.NewSim()
	h := testHeader()
	r, err := s.Create("/d/a.flt", h)
	must(t, err)
	r.Words()[0] = 1
	r.Touch(0, 1)
	must(t, r.Sync())
	r.Words()[600] = 2 // page 1
	r.Touch(600, 601)
	boom := errors.New("io error")
	s.SetInjector(func(op mmapbits.Op, path string) error {
		if op == mmapbits.OpSync || op == mmapbits.OpCreate {
			return boom
		}
		return nil
	})
	if err := r.Sync(); !errors.Is(err, boom) {
		t.Errorf("injected Sync: %v", err)
	}
	if _, err := s.Create("/d/b.flt", h); !errors.Is(err, boom) {
		t.Errorf("injected Create: %v", err)
	}
	s.SetInjector(nil)
	if p := s.Paths(); len(p) != 1 || p[0] != "/d/a.flt" {
		t.Errorf("Paths %v", p)
	}
	if r.Words()[600] != 2 {
		t.Error("lost page's memory image gone")
	}
	must(t, r.Sync()) // lost page stays lost: not rewritten
	st := s.Crash(rand.New(rand.NewPCG(1, 1)))
	_ = st
	r2, err := s.Open("/d/a.flt")
	must(t, err)
	if r2.Words()[0] != 1 || r2.Words()[600] != 0 {
		t.Errorf("after crash: word0 %d word600 %d (want 1, 0: lost page keeps its disk image)", r2.Words()[0], r2.Words()[600])
	}
	r2.Words()[700] = 3
	r2.Touch(700, 701)
	s.Kill()
	r3, err := s.Open("/d/a.flt")
	must(t, err)
	if r3.Words()[700] != 3 {
		t.Error("Kill lost a page-cache write")
	}
	if mmapbits.OpSync.String() != "sync" || mmapbits.OpEvict.String() != "evict" {
		t.Error("Op strings")
	}
}

// TestMmapbitsAnonWords checks AnonWords: "n zeroed words", "free unmaps".
func TestMmapbitsAnonWords(t *testing.T) {
	for _, huge := range []bool{false, true} {
		w, free, err := mmapbits.AnonWords(1000, huge)
		must(t, err)
		if len(w) != 1000 {
			t.Errorf("len %d", len(w))
		}
		for _, v := range w {
			if v != 0 {
				t.Fatal("not zeroed")
			}
		}
		w[999] = 1
		must(t, free())
	}
	var err error
	noPanic(t, "AnonWords(0)", func() {
		var free func() error
		_, free, err = mmapbits.AnonWords(0, false)
		if err == nil && free != nil {
			free()
		}
	})
}

// TestMmapbitsFieldErrorForRangeFields checks DecodeHeader's "a *FieldError
// names the byte offset of the failing field" and ErrBadSize's "or the
// header's fields are out of range" (FieldError "wraps one of ... ErrBadSize")
// for a CRC-valid header whose kind, derivation or data pages are out of
// range: the error should be a *FieldError at the field's offset (12, 88, 16).
// It is not: "mmapbits: bad size: filterstore: corrupt data: mmapbits:
// filterstore: invalid argument: header kind 9 is not a known kind", with no
// *FieldError (and a message that calls a corrupt file an invalid argument).
func TestMmapbitsFieldErrorForRangeFields(t *testing.T) {
	good := testHeader().Append(nil)
	recrc := func(b []byte) { binary.LittleEndian.PutUint32(b[92:], crc32.Checksum(b[:92], castagnoli)) }
	for name, c := range map[string]struct {
		edit func([]byte)
		off  int64
	}{
		"kind":       {func(b []byte) { b[12] = 9 }, 12},
		"derivation": {func(b []byte) { b[88] = 3 }, 88},
		"datapages":  {func(b []byte) { binary.LittleEndian.PutUint64(b[16:], mmapbits.MaxDataPages+1) }, 16},
	} {
		b := append([]byte(nil), good...)
		c.edit(b)
		recrc(b)
		_, _, err := mmapbits.DecodeHeader(b)
		var fe *mmapbits.FieldError
		if !errors.As(err, &fe) || fe.Offset != c.off {
			t.Errorf("%s: %v: no *FieldError at offset %d", name, err, c.off)
		}
		if errors.Is(err, mmapbits.ErrInvalid) {
			t.Errorf("%s: a corrupt file's header matches ErrInvalid (bad argument)", name)
		}
	}
}

// TestMmapbitsOldVersions checks the package doc's "DecodeHeader reads all six
// versions (a version 1 header decodes with StoreID 0, versions 1 to 3 with
// Derivation 0)", "every cuckoo layer of a version 4 file is on the mix
// derivation ... (a version 4 header of a cuckoo layer with another value is
// invalid); a version 5 file's cuckoo layer is on the mix or the mul
// derivation (0 or 1)", and "Append writes version 6 only".
func TestMmapbitsOldVersions(t *testing.T) {
	cu := mmapbits.Header{Kind: mmapbits.KindCuckoo, DataPages: 1, Size: 512, BucketSize: 4, FingerprintBits: 16, Capacity: 100, StoreID: 5}
	enc := func(h mmapbits.Header, version uint32, deriv uint32) []byte {
		b := h.Append(nil)
		le := binary.LittleEndian
		le.PutUint32(b[8:], version)
		switch {
		case version >= 4:
			le.PutUint32(b[88:], deriv)
			le.PutUint32(b[92:], crc32.Checksum(b[:92], castagnoli))
		case version >= 2:
			le.PutUint32(b[88:], crc32.Checksum(b[:88], castagnoli))
			le.PutUint32(b[92:], 0)
		default:
			le.PutUint32(b[80:], crc32.Checksum(b[:80], castagnoli))
			for i := 84; i < 96; i++ {
				b[i] = 0
			}
		}
		return b
	}
	for _, c := range []struct {
		v, d uint32
		ok   bool
	}{{1, 0, true}, {2, 0, true}, {3, 0, true}, {4, 0, true}, {4, 1, false}, {5, 1, true}, {5, 2, false}, {6, 2, true}, {6, 3, false}} {
		h, _, err := mmapbits.DecodeHeader(enc(cu, c.v, c.d))
		if (err == nil) != c.ok {
			t.Errorf("cuckoo v%d derivation %d: err %v, want ok=%v", c.v, c.d, err, c.ok)
			continue
		}
		if err == nil {
			if h.Version != c.v || h.Derivation != c.d {
				t.Errorf("v%d: decoded %+v", c.v, h)
			}
			if c.v == 1 && h.StoreID != 0 {
				t.Errorf("v1 StoreID %d", h.StoreID)
			}
			if c.v < 3 && h.HasSums() {
				t.Errorf("v%d HasSums", c.v)
			}
			if c.v >= 3 && !h.HasSums() {
				t.Errorf("v%d !HasSums", c.v)
			}
			if got := h.Append(nil); binary.LittleEndian.Uint32(got[8:]) != 6 {
				t.Errorf("Append of a v%d header wrote version %d", c.v, binary.LittleEndian.Uint32(got[8:]))
			}
		}
	}
}
