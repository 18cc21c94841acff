package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"

	"github.com/filterstore/filterstore/bitmap"
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
)

// filterState is the lifecycle state of a filter in the catalog.
type filterState uint8

const (
	stateOK      filterState = 0
	stateLoading filterState = 1 // an unlogged Load began and has not ended
)

// maxLayers bounds the layer list a catalog value may declare.
const maxLayers = 64

// filterMeta is the catalog's record of one filter.
type filterMeta struct {
	ID uint64
	// SyncedLSN is the checkpoint the filter's files reflect: every WAL
	// record of the filter at or below it is in its synced files, and its
	// item counts are as of it. Recovery replays the filter's records
	// above it. It stays behind while the filter is broken, which keeps
	// the WAL the filter needs.
	SyncedLSN  uint64
	Kind       mmapbits.Kind
	State      filterState
	NonScaling bool
	// The configuration the filter was created with, defaults filled.
	Capacity        uint64
	ErrorRate       float64
	Expansion       uint32
	BucketSize      uint32
	FingerprintBits uint32
	MaxIterations   uint32
	Bits            uint64 // bitmap size
	Layers          []layerMeta

	// v1 marks a value decoded from version 1, which has no SyncedLSN:
	// the catalog's checkpoint stands for it.
	v1 bool
}

// layerMeta is one layer's geometry (mirrored in its file header) and its
// item count as of the last checkpoint.
type layerMeta struct {
	Capacity  uint64
	ErrorRate float64
	Size      uint64 // blocks, buckets or bits
	K         uint32
	Salt      uint64
	DataPages uint64
	Items     uint64
}

// header returns the file header a layer's file of the store storeID
// must carry.
func (m *filterMeta) header(layer int, storeID uint64) mmapbits.Header {
	l := m.Layers[layer]
	return mmapbits.Header{
		Kind: m.Kind, DataPages: l.DataPages, FilterID: m.ID, Layer: uint32(layer),
		K: l.K, Salt: l.Salt, Size: l.Size, BucketSize: m.BucketSize, FingerprintBits: m.FingerprintBits,
		Capacity: l.Capacity, ErrorRate: l.ErrorRate, Version: mmapbits.FormatVersion, StoreID: storeID,
	}
}

// checkHeader reports how a layer file's header h differs from the one
// the catalog says it must carry. A version 1 file predates store
// identities and is matched without one.
func (m *filterMeta) checkHeader(h mmapbits.Header, layer int, storeID uint64) error {
	want := m.header(layer, storeID)
	if h.Version == 1 || storeID == 0 {
		want.Version, want.StoreID = h.Version, h.StoreID
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
	if len(diffs) == 0 {
		diffs = append(diffs, fmt.Sprintf("geometry %+v, want %+v", h, want))
	}
	return fmt.Errorf("%w: header does not match the catalog: %s", ErrCorrupt, strings.Join(diffs, "; "))
}

// layerWords returns how many data words a layer's geometry uses: WAL
// word indexes must be below it.
func (m *filterMeta) layerWords(layer int) uint64 {
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

// checkRecord reports why r cannot be a record of this filter: a layer it
// does not have, an op of another kind, a word beyond its geometry.
func (m *filterMeta) checkRecord(r record) error {
	if r.layer >= len(m.Layers) {
		return fmt.Errorf("%w: record for layer %d of filter id %d, which has %d layers (is the catalog older than the WAL?)",
			ErrCorrupt, r.layer, m.ID, len(m.Layers))
	}
	if want := byte(opWords); m.Kind == mmapbits.KindBloom && r.op != opHash || m.Kind != mmapbits.KindBloom && r.op != want {
		return fmt.Errorf("%w: op %d record for %v filter id %d", ErrCorrupt, r.op, m.Kind, m.ID)
	}
	n := m.layerWords(r.layer)
	for _, w := range r.writes {
		if w.idx >= n {
			return fmt.Errorf("%w: record writes word %d of filter id %d layer %d, whose geometry has %d words",
				ErrCorrupt, w.idx, m.ID, r.layer, n)
		}
	}
	return nil
}

// Catalog value encoding, version 2, little-endian (part of the format):
//
//	u8 version | u64 id | u8 kind | u8 state | u8 flags(bit0 nonscaling)
//	u64 capacity | f64 error rate | u32 expansion | u32 bucket size
//	u32 fingerprint bits | u32 max iterations | u64 bits | u32 layers
//	u64 synced LSN (version 2 only)
//	layers x (u64 capacity | f64 error rate | u64 size | u32 k | u64 salt
//	          | u64 data pages | u64 items)
//	u32 CRC-32C of everything before it
//
// Version 1 is version 2 without the synced LSN; it is read, never
// written.
const (
	metaVersion    = 2
	metaFixedLenV1 = 1 + 8 + 1 + 1 + 1 + 8 + 8 + 4 + 4 + 4 + 4 + 8 + 4
	metaFixedLen   = metaFixedLenV1 + 8
	layerEncodeLen = 8 + 8 + 8 + 4 + 8 + 8 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (m *filterMeta) append(b []byte) []byte {
	start := len(b)
	le := binary.LittleEndian
	b = append(b, metaVersion)
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
	}
	return le.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// decodeMeta decodes a catalog value. Every failure wraps ErrCorrupt and
// names the offset; a layer count cannot make it allocate more than
// maxLayers entries.
func decodeMeta(b []byte) (*filterMeta, error) {
	bad := func(off int, format string, args ...any) (*filterMeta, error) {
		return nil, fmt.Errorf("store: catalog value: %w at offset %d: "+format, append([]any{ErrCorrupt, off}, args...)...)
	}
	if len(b) < metaFixedLenV1+4 {
		return bad(0, "%d bytes, need at least %d", len(b), metaFixedLenV1+4)
	}
	le := binary.LittleEndian
	body, sum := b[:len(b)-4], le.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return bad(len(b)-4, "checksum %08x, computed %08x", sum, got)
	}
	fixed := metaFixedLen
	switch body[0] {
	case metaVersion:
		if len(body) < metaFixedLen {
			return bad(0, "%d bytes, version %d needs at least %d", len(b), metaVersion, metaFixedLen+4)
		}
	case 1:
		fixed = metaFixedLenV1
	default:
		return bad(0, "version %d, this build reads 1 and %d", body[0], metaVersion)
	}
	m := &filterMeta{
		ID:              le.Uint64(body[1:]),
		Kind:            mmapbits.Kind(body[9]),
		State:           filterState(body[10]),
		NonScaling:      body[11]&1 != 0,
		Capacity:        le.Uint64(body[12:]),
		ErrorRate:       math.Float64frombits(le.Uint64(body[20:])),
		Expansion:       le.Uint32(body[28:]),
		BucketSize:      le.Uint32(body[32:]),
		FingerprintBits: le.Uint32(body[36:]),
		MaxIterations:   le.Uint32(body[40:]),
		Bits:            le.Uint64(body[44:]),
		v1:              fixed == metaFixedLenV1,
	}
	if !m.v1 {
		m.SyncedLSN = le.Uint64(body[56:])
	}
	n := le.Uint32(body[52:])
	if !m.Kind.Valid() {
		return bad(9, "unknown kind %d", body[9])
	}
	if m.State > stateLoading {
		return bad(10, "unknown state %d", body[10])
	}
	if n == 0 || n > maxLayers {
		return bad(52, "layer count %d outside 1..%d", n, maxLayers)
	}
	rest := body[fixed:]
	if len(rest) != int(n)*layerEncodeLen {
		return bad(fixed, "%d bytes of layers, %d layers need %d", len(rest), n, int(n)*layerEncodeLen)
	}
	m.Layers = make([]layerMeta, n)
	for i := range m.Layers {
		p := rest[i*layerEncodeLen:]
		m.Layers[i] = layerMeta{
			Capacity:  le.Uint64(p[0:]),
			ErrorRate: math.Float64frombits(le.Uint64(p[8:])),
			Size:      le.Uint64(p[16:]),
			K:         le.Uint32(p[24:]),
			Salt:      le.Uint64(p[28:]),
			DataPages: le.Uint64(p[36:]),
			Items:     le.Uint64(p[44:]),
		}
		if err := m.header(i, 0).Validate(); err != nil {
			return bad(fixed+i*layerEncodeLen, "layer %d: %v", i, err)
		}
	}
	return m, nil
}
