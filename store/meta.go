package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

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
	ID         uint64
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

// header returns the file header a layer's file must carry.
func (m *filterMeta) header(layer int) mmapbits.Header {
	l := m.Layers[layer]
	return mmapbits.Header{
		Kind: m.Kind, DataPages: l.DataPages, FilterID: m.ID, Layer: uint32(layer),
		K: l.K, Salt: l.Salt, Size: l.Size, BucketSize: m.BucketSize, FingerprintBits: m.FingerprintBits,
		Capacity: l.Capacity, ErrorRate: l.ErrorRate, Version: mmapbits.FormatVersion,
	}
}

// Catalog value encoding, version 1, little-endian (part of the format):
//
//	u8 version | u64 id | u8 kind | u8 state | u8 flags(bit0 nonscaling)
//	u64 capacity | f64 error rate | u32 expansion | u32 bucket size
//	u32 fingerprint bits | u32 max iterations | u64 bits | u32 layers
//	layers x (u64 capacity | f64 error rate | u64 size | u32 k | u64 salt
//	          | u64 data pages | u64 items)
//	u32 CRC-32C of everything before it
const (
	metaVersion    = 1
	metaFixedLen   = 1 + 8 + 1 + 1 + 1 + 8 + 8 + 4 + 4 + 4 + 4 + 8 + 4
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
	if len(b) < metaFixedLen+4 {
		return bad(0, "%d bytes, need at least %d", len(b), metaFixedLen+4)
	}
	le := binary.LittleEndian
	body, sum := b[:len(b)-4], le.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return bad(len(b)-4, "checksum %08x, computed %08x", sum, got)
	}
	if body[0] != metaVersion {
		return bad(0, "version %d, this build reads %d", body[0], metaVersion)
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
	rest := body[metaFixedLen:]
	if len(rest) != int(n)*layerEncodeLen {
		return bad(metaFixedLen, "%d bytes of layers, %d layers need %d", len(rest), n, int(n)*layerEncodeLen)
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
		if err := m.header(i).Validate(); err != nil {
			return bad(metaFixedLen+i*layerEncodeLen, "layer %d: %v", i, err)
		}
	}
	return m, nil
}
