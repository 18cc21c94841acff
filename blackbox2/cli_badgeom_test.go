package blackbox2_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
)

// badGeometryFile writes a copy of the fixture's Bloom layer file whose
// header, re-encoded with a valid CRC, has edit applied.
func badGeometryFile(t *testing.T, dir string, edit func(h *mmapbits.Header)) []byte {
	t.Helper()
	orig, err := os.ReadFile(filepath.Join(dir, "filters", "1-0.flt"))
	must(t, err)
	h, _, err := mmapbits.DecodeHeader(orig)
	must(t, err)
	edit(&h)
	return append(h.Append(nil), orig[4096:]...)
}

// TestInspectBadGeometryHeaders checks README's "never panics on a bad file"
// and file's "A file that fails any check is reported with its offset, and
// the exit status is 1" for CRC-valid headers whose geometry is out of range
// or does not fit the data pages, alone (file) and as a store's layer (ls,
// check, stats, verify, info: the filter is broken, exit 1).
func TestInspectBadGeometryHeaders(t *testing.T) {
	cases := map[string]func(h *mmapbits.Header){
		"k0":          func(h *mmapbits.Header) { h.K = 0 },
		"k33":         func(h *mmapbits.Header) { h.K = 33 },
		"blocks0":     func(h *mmapbits.Header) { h.Size = 0 },
		"blocks>data": func(h *mmapbits.Header) { h.Size = 1000 },
		"rate2":       func(h *mmapbits.Header) { h.ErrorRate = 2 },
		"cuckoo b17": func(h *mmapbits.Header) {
			h.Kind = mmapbits.KindCuckoo
			h.BucketSize = 17
			h.FingerprintBits = 16
			h.Size = 100
		},
		"bitmap huge": func(h *mmapbits.Header) { h.Kind = mmapbits.KindBitmap; h.Derivation = 0; h.K = 0; h.Size = 1 << 40 },
	}
	base := fixture(t)
	for name, edit := range cases {
		b := badGeometryFile(t, base, edit)
		p := filepath.Join(t.TempDir(), "x.flt")
		must(t, os.WriteFile(p, b, 0o644))
		if r := inspect(t, "file", p); r.code != 1 || !strings.Contains(r.err, "offset") {
			t.Errorf("%s: file exit %d %q", name, r.code, r.err)
		}
		if name != "k0" && name != "blocks>data" {
			continue
		}
		sd := fixture(t)
		must(t, os.WriteFile(filepath.Join(sd, "filters", "1-0.flt"), b, 0o644))
		for _, a := range [][]string{{"ls", sd}, {"check", sd, "b", "k-1"}, {"stats", sd, "b"}, {"verify", sd}, {"info", sd, "b"}} {
			if r := inspect(t, a...); r.code != 1 {
				t.Errorf("%s: %s exit %d %q", name, a[0], r.code, r.err)
			}
		}
	}
}

// TestInspectFileOffsetOfBadField checks file's "A file that fails any check
// is reported with its offset" against the header table (k at 36, bucket
// size at 56): an out-of-range k or bucket size is reported at offset 12
// (the kind field), "offset 12: the header's geometry is invalid: bloom:
// ... k must be in [1, 32], got 0".
func TestInspectFileOffsetOfBadField(t *testing.T) {
	base := fixture(t)
	for name, c := range map[string]struct {
		edit func(h *mmapbits.Header)
		off  string
	}{
		"k0": {func(h *mmapbits.Header) { h.K = 0 }, "offset 36"},
		"b17": {func(h *mmapbits.Header) {
			h.Kind = mmapbits.KindCuckoo
			h.BucketSize = 17
			h.FingerprintBits = 16
			h.Size = 100
		}, "offset 56"},
	} {
		p := filepath.Join(t.TempDir(), "x.flt")
		must(t, os.WriteFile(p, badGeometryFile(t, base, c.edit), 0o644))
		if r := inspect(t, "file", p); !strings.Contains(r.err, c.off) {
			t.Errorf("%s: %q, want the field's %s", name, r.err, c.off)
		}
	}
}

// TestMmapbitsHeaderValidateGeometry checks Header.Validate's "checks the
// fields a decoder cannot check by CRC alone and this package knows the
// range of: the kind, the data page count and the derivation. The
// geometry's own fields ... are checked by the kind's package
// (bloom.Geometry.Validate and the like)": a Bloom header with k 0 passes
// Validate, and its geometry fails bloom's; a bad kind, page count or
// derivation fails Validate with ErrInvalid.
func TestMmapbitsHeaderValidateGeometry(t *testing.T) {
	k0 := mmapbits.Header{Kind: mmapbits.KindBloom, DataPages: 1, Size: 8, K: 0, Capacity: 10, ErrorRate: 0.01}
	if err := k0.Validate(); err != nil {
		t.Errorf("Validate of a k 0 Bloom header: %v; the geometry is the kind package's to check", err)
	}
	if err := (bloom.Geometry{Blocks: k0.Size, K: k0.K}).Validate(); err == nil {
		t.Error("bloom.Geometry.Validate of k 0 passed")
	}
	for name, h := range map[string]mmapbits.Header{
		"kind 9":       {Kind: 9, DataPages: 1},
		"0 data pages": {Kind: mmapbits.KindBloom},
		"derivation 3": {Kind: mmapbits.KindCuckoo, DataPages: 1, Derivation: 3},
	} {
		if err := h.Validate(); !errors.Is(err, mmapbits.ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
}
