package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/fserr"
	"github.com/filterstore/filterstore/mmapbits"
)

// TestMetaDerivation: a layer's derivation survives the catalog value
// (version 6, and version 5 without the stamps), a version 2 value (earlier builds) decodes with derivation
// 0, a derivation no layer of the kind can have is rejected (a cuckoo
// layer's mul derivation in a version 3 value among them), and
// CheckHeader holds a file of any version to the layer's derivation.
func TestMetaDerivation(t *testing.T) {
	g, err := bloom.Plan(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	l := LayerMeta{Capacity: 1000, ErrorRate: 0.01, Size: g.Blocks, K: g.K, Salt: g.Salt,
		DataPages: mmapbits.PagesFor(g.Words()), Derivation: uint32(g.Derivation)}
	m := &FilterMeta{ID: 4, Kind: mmapbits.KindBloom, Capacity: 1000, ErrorRate: 0.01, Expansion: 2, Layers: []LayerMeta{l, l}}
	m.Layers[0].Derivation = uint32(bloom.DeriveMix)
	enc := m.Append(nil)
	got, err := DecodeFilterMeta(enc, 0)
	if err != nil || got.Layers[0].Derivation != 0 || got.Layers[1].Derivation != 1 {
		t.Fatalf("version 6: %+v, %v", got, err)
	}
	got, err = DecodeFilterMeta(v5Meta(enc), 0)
	if err != nil || got.Layers[0].Derivation != 0 || got.Layers[1].Derivation != 1 {
		t.Fatalf("version 5: %+v, %v", got, err)
	}
	old, err := DecodeFilterMeta(v2Meta(enc), 0)
	if err != nil || old.Layers[0].Derivation != 0 || old.Layers[1].Derivation != 0 {
		t.Fatalf("version 2: %+v, %v", old, err)
	}
	for _, bad := range []struct {
		name string
		kind mmapbits.Kind
		d    uint32
		ver  byte // 0: MetaVersion
	}{{"derivation 2", mmapbits.KindBloom, 2, 0}, {"cuckoo with derivation 3", mmapbits.KindCuckoo, 3, 0},
		{"bitmap with derivation 1", mmapbits.KindBitmap, 1, 0}, {"version 3 cuckoo with derivation 1", mmapbits.KindCuckoo, 1, 3},
		{"version 4 cuckoo with derivation 2", mmapbits.KindCuckoo, 2, 4}, {"version 5 cuckoo with derivation 3", mmapbits.KindCuckoo, 3, 5}} {
		b := *m
		b.Kind = bad.kind
		b.Layers = []LayerMeta{l}
		b.Layers[0].Derivation = bad.d
		enc := b.Append(nil)
		if bad.ver != 0 {
			enc = metaNumbered(v5Meta(enc), bad.ver)
		}
		if _, err := DecodeFilterMeta(enc, 0); !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), "derivation") {
			t.Errorf("%s: err = %v, want ErrCorrupt naming the derivation", bad.name, err)
		}
	}
	// A cuckoo layer's mul derivation survives a version 6 value, and
	// only a version 5 file header holds it.
	cm := &FilterMeta{ID: 5, Kind: mmapbits.KindCuckoo, Capacity: 100, Expansion: 2, BucketSize: 4, FingerprintBits: 16, MaxIterations: 500,
		Layers: []LayerMeta{{Capacity: 100, Size: 31, DataPages: 1}, {Capacity: 200, Size: 61, Salt: 3, DataPages: 1, Derivation: 1}}}
	got, err = DecodeFilterMeta(cm.Append(nil), 0)
	if err != nil || got.Layers[0].Derivation != 0 || got.Layers[1].Derivation != 1 {
		t.Fatalf("cuckoo, version 6: %+v, %v", got, err)
	}
	if err := cm.CheckHeader(cm.Header(1, 9), 1, 9); err != nil {
		t.Fatalf("cuckoo mul layer: own header: %v", err)
	}
	v4 := cm.Header(1, 9)
	v4.Version, v4.Derivation = 4, 0
	if err := cm.CheckHeader(v4, 1, 9); !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), "derivation 0 (file version 4), want 1") {
		t.Fatalf("version 4 file for a cuckoo mul layer: %v", err)
	}
	v4 = cm.Header(0, 9)
	v4.Version = 4
	if err := cm.CheckHeader(v4, 0, 9); err != nil {
		t.Fatalf("version 4 file for a cuckoo mix layer: %v", err)
	}

	// CheckHeader: the layer's own header matches, as does a version 3
	// file (no derivation) for the mix layer; a version 3 file where the
	// catalog says mul does not.
	for i := range m.Layers {
		if err := m.CheckHeader(m.Header(i, 9), i, 9); err != nil {
			t.Fatalf("layer %d: own header: %v", i, err)
		}
	}
	v3 := m.Header(0, 9)
	v3.Version = 3
	if err := m.CheckHeader(v3, 0, 9); err != nil {
		t.Fatalf("version 3 file for a mix layer: %v", err)
	}
	v3 = m.Header(1, 9)
	v3.Version, v3.Derivation = 3, 0
	if err := m.CheckHeader(v3, 1, 9); !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), "derivation 0 (file version 3), want 1") {
		t.Fatalf("version 3 file for a mul layer: %v", err)
	}
}

// TestMetaStamp: a layer's stamp survives the catalog value (version 6),
// a version 5 value (version 6 without the stamps) decodes with stamp 0
// in every layer and its other fields as they were, and re-encodes as
// version 6 with stamp 0; a version 5 cuckoo value may hold the local
// derivation, which versions 3 and 4 may not.
func TestMetaStamp(t *testing.T) {
	g, err := bloom.Plan(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	l := LayerMeta{Capacity: 1000, ErrorRate: 0.01, Size: g.Blocks, K: g.K, Salt: g.Salt,
		DataPages: mmapbits.PagesFor(g.Words()), Items: 999, Derivation: uint32(g.Derivation)}
	m := &FilterMeta{ID: 4, SyncedLSN: 1<<40 + 3, Kind: mmapbits.KindBloom, Capacity: 1000, ErrorRate: 0.01, Expansion: 2,
		Layers: []LayerMeta{l, l, l}}
	m.Layers[0].Stamp = 77
	m.Layers[1].Stamp = 0 // a layer no checkpoint synced with changes
	m.Layers[2].Stamp = ^uint64(0)
	enc := m.Append(nil)
	if enc[0] != 6 || len(enc) != metaFixedLen+3*64+4 {
		t.Fatalf("Append wrote version %d, %d bytes; want version 6, %d bytes", enc[0], len(enc), metaFixedLen+3*64+4)
	}
	for i, want := range []uint64{77, 0, ^uint64(0)} {
		if got := binary.LittleEndian.Uint64(enc[metaFixedLen+i*64+56:]); got != want {
			t.Fatalf("layer %d: stamp bytes hold %d, want %d", i, got, want)
		}
	}
	got, err := DecodeFilterMeta(enc, 0)
	if err != nil || !metaEqual(got, m) {
		t.Fatalf("version 6: %+v, %v; want %+v", got, err, m)
	}

	v5 := v5Meta(enc)
	if v5[0] != 5 || len(v5) != metaFixedLen+3*56+4 {
		t.Fatalf("v5Meta: version %d, %d bytes", v5[0], len(v5))
	}
	got, err = DecodeFilterMeta(v5, 0)
	if err != nil {
		t.Fatalf("version 5: %v", err)
	}
	want := *m
	want.Layers = slices.Clone(m.Layers)
	for i := range want.Layers {
		want.Layers[i].Stamp = 0
	}
	if !metaEqual(got, &want) {
		t.Fatalf("version 5: %+v, want %+v", got, &want)
	}
	if up := got.Append(nil); !bytes.Equal(up, upgradeMeta(v5)) || !bytes.Equal(up, want.Append(nil)) {
		t.Fatalf("version 5 re-encoded:\n%x, want\n%x", up, want.Append(nil))
	}

	// A version 5 cuckoo value with the local derivation (the build before
	// wrote them) decodes, with stamp 0; versions 3 and 4 refuse it.
	cm := &FilterMeta{ID: 5, SyncedLSN: 12, Kind: mmapbits.KindCuckoo, Capacity: 100, Expansion: 2, BucketSize: 4, FingerprintBits: 16, MaxIterations: 500,
		Layers: []LayerMeta{{Capacity: 100, Size: 31, DataPages: 1, Derivation: uint32(cuckoo.DeriveMul), Stamp: 5},
			{Capacity: 200, Size: 61, Salt: 3, DataPages: 1, Items: 40, Derivation: uint32(cuckoo.DeriveLocal), Stamp: 12}}}
	cv5 := v5Meta(cm.Append(nil))
	got, err = DecodeFilterMeta(cv5, 0)
	if err != nil {
		t.Fatalf("version 5 cuckoo, local derivation: %v", err)
	}
	cwant := *cm
	cwant.Layers = slices.Clone(cm.Layers)
	cwant.Layers[0].Stamp, cwant.Layers[1].Stamp = 0, 0
	if !metaEqual(got, &cwant) || got.Layers[1].Derivation != uint32(cuckoo.DeriveLocal) {
		t.Fatalf("version 5 cuckoo, local derivation: %+v, want %+v", got, &cwant)
	}
	for v, want := range map[byte]string{3: "layer 0: derivation 1", 4: "layer 1: derivation 2"} {
		if _, err := DecodeFilterMeta(metaNumbered(cv5, v), 0); !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("version %d cuckoo, mul and local derivations: err = %v, want ErrCorrupt naming %q", v, err, want)
		}
	}
	// The stamp has no say in the file header: the layer's own header
	// matches whatever the stamp.
	if err := cm.CheckHeader(got.Header(1, 9), 1, 9); err != nil {
		t.Fatalf("version 5 cuckoo layer's header against the version 6 entry: %v", err)
	}
}
