package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/mmapbits"
)

// TestOldFormatStore: a store an earlier build wrote (store/testdata/v3store:
// version 3 files, version 2 catalog values, every Bloom and counting layer
// on the mix derivation) verifies clean, answers check from its files, and
// info finds its headers matching the catalog. Before headerDiff matched
// a file in its own version's layout, verify reported 12 problems and check
// called every filter broken.
func TestOldFormatStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := copyDir(filepath.Join("..", "..", "store", "testdata", "v3store"), dir); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "verify", dir)
	if !strings.Contains(r.stdout, "verified 4 filters (6 layer files") {
		t.Errorf("verify:\n%s", r)
	}
	r = mustRun(t, 0, "check", dir, "bloom", "bloom-5", "bloom-999", "absent-1")
	if !strings.Contains(r.stdout, "bloom-5    maybe") || !strings.Contains(r.stdout, "bloom-999  maybe") || !strings.Contains(r.stdout, "absent-1   no") {
		t.Errorf("check:\n%s", r)
	}
	r = mustRun(t, 0, "info", dir, "counting")
	if strings.Contains(r.stdout, "DIFFERS") || !strings.Contains(r.stdout, "matches the catalog") {
		t.Errorf("info:\n%s", r)
	}
	r = mustRun(t, 0, "file", filepath.Join(dir, "filters", "1-0.flt"))
	if !strings.Contains(r.stdout, "derivation     mix") {
		t.Errorf("file:\n%s", r)
	}
}

// TestVersion4Store: a store the build before format 5 wrote
// (store/testdata/v4store: version 4 files, version 3 catalog values,
// cuckoo layers on the mix derivation) verifies clean, answers check for
// its cuckoo filter from its files (a layer read on the wrong derivation
// would say "no" for added keys), and file names the cuckoo layer's
// derivation.
func TestVersion4Store(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := copyDir(filepath.Join("..", "..", "store", "testdata", "v4store"), dir); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "verify", dir)
	if !strings.Contains(r.stdout, "verified 4 filters (8 layer files") {
		t.Errorf("verify:\n%s", r)
	}
	r = mustRun(t, 0, "check", dir, "cuckoo", "cuckoo-0", "cuckoo-500", "cuckoo-999")
	if strings.Count(r.stdout, "maybe") != 3 {
		t.Errorf("check:\n%s", r)
	}
	r = mustRun(t, 0, "info", dir, "cuckoo")
	if strings.Contains(r.stdout, "DIFFERS") || !strings.Contains(r.stdout, "matches the catalog") {
		t.Errorf("info:\n%s", r)
	}
	r = mustRun(t, 0, "file", filepath.Join(dir, "filters", "3-0.flt"))
	if !strings.Contains(r.stdout, "derivation  mix") || !strings.Contains(r.stdout, "version 4,") {
		t.Errorf("file:\n%s", r)
	}
}

// TestOldHeaderDerivation: a Bloom layer this build made (mul derivation)
// whose file claims format version 3, which has no derivation field and
// means mix, is a header mismatch naming the derivation.
func TestOldHeaderDerivation(t *testing.T) {
	dir := testStore(t)
	p := layerFile(t, dir, "users", 0)
	b := rewriteHeader(t, p, func(*mmapbits.Header) {})
	v3 := mmapbits.HeaderFields(3)
	crcField := v3[len(v3)-1]
	clear(b[crcField.Offset:mmapbits.SeqOffset])
	binary.LittleEndian.PutUint32(b[v3[1].Offset:], 3) // Version
	binary.LittleEndian.PutUint32(b[crcField.Offset:], crc.Checksum(b[:crcField.Offset]))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 1, "verify", dir)
	if !strings.Contains(r.stdout, "filters/1-0.flt offset 8: header field derivation: file (format version 3, no derivation field) has 0 (mix), catalog expects 1 (mul)") {
		t.Errorf("verify:\n%s", r)
	}
}
