package format

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/filterstore/filterstore/bitmap"
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/fserr"
	"github.com/filterstore/filterstore/mmapbits"
)

// FilterState is the lifecycle state of a filter in the catalog. Values
// are part of the format.
type FilterState uint8

const (
	// StateOK is a filter in normal use.
	StateOK FilterState = 0
	// StateLoading is a filter whose unlogged bulk Load began and has not
	// ended: its contents are not trustworthy.
	StateLoading FilterState = 1
)

// MaxLayers bounds the layer list a catalog value may declare.
const MaxLayers = 64

// Catalog value versions and sizes (drawn in the package documentation).
// Part of the format; never change them.
const (
	// MetaVersion is the version FilterMeta.Append writes. Versions 1
	// (without the synced LSN), 2 (without the layers' derivation), 3
	// (version 5's layout, but a cuckoo layer's derivation always 0), 4
	// (version 5's layout, a cuckoo layer's derivation 0 or 1: no
	// cuckoo.DeriveLocal) and 5 (without the layers' stamps) are read,
	// never written.
	MetaVersion      = 6
	metaFixedLenV1   = 1 + 8 + 1 + 1 + 1 + 8 + 8 + 4 + 4 + 4 + 4 + 8 + 4
	metaFixedLen     = metaFixedLenV1 + 8
	layerEncodeLenV1 = 8 + 8 + 8 + 4 + 8 + 8 + 8 // versions 1 and 2
	layerEncodeLenV3 = layerEncodeLenV1 + 4      // versions 3 to 5
	layerEncodeLen   = layerEncodeLenV3 + 8
)

// FilterMeta is the catalog's record of one filter: the value of its name
// in the catalog's filters bucket.
type FilterMeta struct {
	ID uint64
	// SyncedLSN is the checkpoint the filter's files reflect: every WAL
	// record of the filter at or below it is in its synced files, and its
	// item counts are as of it. Recovery replays the filter's records
	// above it. It stays behind while the filter is broken, which keeps
	// the WAL the filter needs.
	SyncedLSN  uint64
	Kind       mmapbits.Kind
	State      FilterState
	NonScaling bool
	// The configuration the filter was created with, defaults filled.
	Capacity        uint64
	ErrorRate       float64
	Expansion       uint32
	BucketSize      uint32
	FingerprintBits uint32
	MaxIterations   uint32
	Bits            uint64 // bitmap size
	Layers          []LayerMeta
}

// LayerMeta is one layer's geometry (mirrored in its file header) and its
// item count as of the filter's checkpoint.
type LayerMeta struct {
	Capacity  uint64
	ErrorRate float64
	Size      uint64 // blocks, buckets or bits
	K         uint32
	Salt      uint64
	DataPages uint64
	Items     uint64
	// Derivation is a Bloom or counting layer's bloom.Derivation, or a
	// cuckoo layer's cuckoo.Derivation: 0 (mix) in every layer of a value
	// of version 1 or 2, and in every cuckoo layer of a value of version 3.
	Derivation uint32
	// Stamp is the checkpoint stamp (mmapbits.Region.SetStamp) the
	// layer's file must carry at least: the WAL position of the last
	// checkpoint that synced the file with changes, 0 if none has (and in
	// every layer of a value before version 6). A file stamped below it
	// is an older state of the file than the catalog describes.
	Stamp uint64
}

// Header returns the file header the file of layer, in the store
// storeID, must carry.
func (m *FilterMeta) Header(layer int, storeID uint64) mmapbits.Header {
	l := m.Layers[layer]
	return mmapbits.Header{
		Kind: m.Kind, DataPages: l.DataPages, FilterID: m.ID, Layer: uint32(layer),
		K: l.K, Salt: l.Salt, Size: l.Size, BucketSize: m.BucketSize, FingerprintBits: m.FingerprintBits,
		Capacity: l.Capacity, ErrorRate: l.ErrorRate, Version: mmapbits.FormatVersion, StoreID: storeID,
		Derivation: l.Derivation,
	}
}

// CheckHeader reports, wrapping ErrCorrupt, how a layer file's header h
// differs from the one the catalog says it must carry. A file of any
// version the mapper reads matches: a version 1 file predates store
// identities and is matched without one, and a file before version 4
// holds derivation 0, which the catalog's layer must say too.
func (m *FilterMeta) CheckHeader(h mmapbits.Header, layer int, storeID uint64) error {
	want := m.Header(layer, storeID)
	want.Version = h.Version
	if h.Version == 1 || storeID == 0 {
		want.StoreID = h.StoreID
	}
	if h == want {
		return nil
	}
	var diffs []string
	if h.StoreID != want.StoreID {
		diffs = append(diffs, fmt.Sprintf("store id %#x, this store is %#x", h.StoreID, want.StoreID))
	}
	if h.FilterID != want.FilterID || h.Layer != want.Layer {
		diffs = append(diffs, fmt.Sprintf("filter id %d layer %d, want id %d layer %d", h.FilterID, h.Layer, want.FilterID, want.Layer))
	}
	if h.Kind != want.Kind {
		diffs = append(diffs, fmt.Sprintf("kind %v, want %v", h.Kind, want.Kind))
	}
	if h.Derivation != want.Derivation {
		diffs = append(diffs, fmt.Sprintf("derivation %d (file version %d), want %d", h.Derivation, h.Version, want.Derivation))
	}
	if len(diffs) == 0 {
		diffs = append(diffs, fmt.Sprintf("geometry %+v, want %+v", h, want))
	}
	return fmt.Errorf("%w: header does not match the catalog: %s", fserr.ErrCorrupt, strings.Join(diffs, "; "))
}

// LayerWords returns how many data words a layer's geometry uses: WAL
// word indexes must be below it.
func (m *FilterMeta) LayerWords(layer int) uint64 {
	l := m.Layers[layer]
	switch m.Kind {
	case mmapbits.KindBloom, mmapbits.KindCounting:
		return l.Size * bloom.BlockWords
	case mmapbits.KindCuckoo:
		return l.Size
	case mmapbits.KindBitmap:
		return bitmap.Words(l.Size)
	}
	return 0
}

// CheckRecord reports, wrapping ErrCorrupt, why r cannot be a record of
// this filter: a layer it does not have, an op of another kind, a word
// beyond its geometry.
func (m *FilterMeta) CheckRecord(r WALRecord) error {
	if r.Op == WALOpLoad {
		return nil // names the filter only, of any kind
	}
	if r.Layer >= len(m.Layers) {
		return fmt.Errorf("%w: record for layer %d of filter id %d, which has %d layers (is the catalog older than the WAL?)",
			fserr.ErrCorrupt, r.Layer, m.ID, len(m.Layers))
	}
	if want := WALOpWords; m.Kind == mmapbits.KindBloom && r.Op != WALOpHash || m.Kind != mmapbits.KindBloom && r.Op != want {
		return fmt.Errorf("%w: op %d record for %v filter id %d", fserr.ErrCorrupt, r.Op, m.Kind, m.ID)
	}
	n := m.LayerWords(r.Layer)
	for _, w := range r.Writes {
		if w.Index >= n {
			return fmt.Errorf("%w: record writes word %d of filter id %d layer %d, whose geometry has %d words",
				fserr.ErrCorrupt, w.Index, m.ID, r.Layer, n)
		}
	}
	return nil
}

// Append appends m encoded as a catalog value, version MetaVersion, and
// returns the extended slice.
func (m *FilterMeta) Append(b []byte) []byte {
	start := len(b)
	le := binary.LittleEndian
	b = append(b, MetaVersion)
	b = le.AppendUint64(b, m.ID)
	b = append(b, byte(m.Kind), byte(m.State))
	flags := byte(0)
	if m.NonScaling {
		flags |= 1
	}
	b = append(b, flags)
	b = le.AppendUint64(b, m.Capacity)
	b = le.AppendUint64(b, math.Float64bits(m.ErrorRate))
	b = le.AppendUint32(b, m.Expansion)
	b = le.AppendUint32(b, m.BucketSize)
	b = le.AppendUint32(b, m.FingerprintBits)
	b = le.AppendUint32(b, m.MaxIterations)
	b = le.AppendUint64(b, m.Bits)
	b = le.AppendUint32(b, uint32(len(m.Layers)))
	b = le.AppendUint64(b, m.SyncedLSN)
	for _, l := range m.Layers {
		b = le.AppendUint64(b, l.Capacity)
		b = le.AppendUint64(b, math.Float64bits(l.ErrorRate))
		b = le.AppendUint64(b, l.Size)
		b = le.AppendUint32(b, l.K)
		b = le.AppendUint64(b, l.Salt)
		b = le.AppendUint64(b, l.DataPages)
		b = le.AppendUint64(b, l.Items)
		b = le.AppendUint32(b, l.Derivation)
		b = le.AppendUint64(b, l.Stamp)
	}
	return le.AppendUint32(b, crc.Checksum(b[start:]))
}

// DecodeFilterMeta decodes a catalog value of version 1 to 6. A
// version 1 value has no synced LSN: its SyncedLSN is checkpoint, the
// catalog's checkpoint, which stood for it. Layers of versions 1 and 2
// have no derivation: 0 (mix), the only one there was; a cuckoo layer of
// a version 3 value must hold 0 (its filter predates cuckoo.DeriveMul),
// of a version 4 value 0 or 1 (it predates cuckoo.DeriveLocal). Every failure
// wraps ErrCorrupt and names the offset in the value; a layer count
// cannot make it allocate more than MaxLayers entries.
func DecodeFilterMeta(b []byte, checkpoint uint64) (*FilterMeta, error) {
	bad := func(off int, format string, args ...any) (*FilterMeta, error) {
		return nil, fmt.Errorf("store: catalog value: %w at offset %d: "+format, append([]any{fserr.ErrCorrupt, off}, args...)...)
	}
	if len(b) < metaFixedLenV1+4 {
		return bad(0, "%d bytes, need at least %d", len(b), metaFixedLenV1+4)
	}
	le := binary.LittleEndian
	body, sum := b[:len(b)-4], le.Uint32(b[len(b)-4:])
	if got := crc.Checksum(body); got != sum {
		return bad(len(b)-4, "checksum %08x, computed %08x", sum, got)
	}
	fixed, layerLen := metaFixedLen, layerEncodeLen
	switch body[0] {
	case 2, 3, 4, 5, MetaVersion:
		if len(body) < metaFixedLen {
			return bad(0, "%d bytes, version %d needs at least %d", len(b), body[0], metaFixedLen+4)
		}
		switch body[0] {
		case 2:
			layerLen = layerEncodeLenV1
		case 3, 4, 5:
			layerLen = layerEncodeLenV3
		}
	case 1:
		fixed, layerLen = metaFixedLenV1, layerEncodeLenV1
	default:
		return bad(0, "version %d, this build reads 1 to %d", body[0], MetaVersion)
	}
	m := &FilterMeta{
		ID:              le.Uint64(body[1:]),
		Kind:            mmapbits.Kind(body[9]),
		State:           FilterState(body[10]),
		NonScaling:      body[11]&1 != 0,
		Capacity:        le.Uint64(body[12:]),
		ErrorRate:       math.Float64frombits(le.Uint64(body[20:])),
		Expansion:       le.Uint32(body[28:]),
		BucketSize:      le.Uint32(body[32:]),
		FingerprintBits: le.Uint32(body[36:]),
		MaxIterations:   le.Uint32(body[40:]),
		Bits:            le.Uint64(body[44:]),
		SyncedLSN:       checkpoint,
	}
	if fixed == metaFixedLen {
		m.SyncedLSN = le.Uint64(body[56:])
	}
	n := le.Uint32(body[52:])
	if !m.Kind.Valid() {
		return bad(9, "unknown kind %d", body[9])
	}
	if m.State > StateLoading {
		return bad(10, "unknown state %d", body[10])
	}
	if n == 0 || n > MaxLayers {
		return bad(52, "layer count %d outside 1..%d", n, MaxLayers)
	}
	rest := body[fixed:]
	if len(rest) != int(n)*layerLen {
		return bad(fixed, "%d bytes of layers, %d layers need %d", len(rest), n, int(n)*layerLen)
	}
	m.Layers = make([]LayerMeta, n)
	for i := range m.Layers {
		p := rest[i*layerLen:]
		m.Layers[i] = LayerMeta{
			Capacity:  le.Uint64(p[0:]),
			ErrorRate: math.Float64frombits(le.Uint64(p[8:])),
			Size:      le.Uint64(p[16:]),
			K:         le.Uint32(p[24:]),
			Salt:      le.Uint64(p[28:]),
			DataPages: le.Uint64(p[36:]),
			Items:     le.Uint64(p[44:]),
		}
		if layerLen >= layerEncodeLenV3 {
			m.Layers[i].Derivation = le.Uint32(p[52:])
			if most := uint32(body[0]) - 3; body[0] < 5 && m.Kind == mmapbits.KindCuckoo && m.Layers[i].Derivation > most {
				return bad(fixed+i*layerLen+52, "layer %d: derivation %d in a version %d value, where a cuckoo layer's is at most %d", i, m.Layers[i].Derivation, body[0], most)
			}
		}
		if layerLen == layerEncodeLen {
			m.Layers[i].Stamp = le.Uint64(p[56:])
		}
		if err := m.Header(i, 0).Validate(); err != nil {
			return bad(fixed+i*layerLen, "layer %d: %v", i, err)
		}
	}
	return m, nil
}
