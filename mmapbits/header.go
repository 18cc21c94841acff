package mmapbits

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/filterstore/filterstore/internal/crc"
)

// Format constants: part of the file format, never to change.
const (
	// PageSize is the unit of alignment of every region.
	PageSize = 4096
	// HeaderSize is the size of the header page that starts every file.
	HeaderSize = PageSize
	// WordsPerPage is the number of uint64 data words in one page.
	WordsPerPage = PageSize / 8
	// FormatVersion is the version Append writes. DecodeHeader reads
	// versions 1 to FormatVersion. Version 3 has version 2's header and adds the
	// checksum pages after the data pages (see SumPages); version 4 adds
	// the Derivation field to version 3's header, for Bloom and counting
	// layers; version 5 has version 4's header and lets a cuckoo layer's
	// Derivation be 1 (cuckoo.DeriveMul) too; version 6 has version 5's
	// header and lets a cuckoo layer's Derivation be 2 (cuckoo.DeriveLocal).
	FormatVersion = 6
	// SeqOffset is the byte offset in the header page of the layer's
	// move-sequence word (version 2; see Region.Seq). The word is live
	// state: it is not covered by the CRC and may hold any value in a file
	// at rest. Append writes it as zero.
	SeqOffset = 2048
	// StampOffset is the byte offset in the header page of the layer's
	// checkpoint stamp (see Region.Stamp): live state like the seq word,
	// not covered by the CRC. Append writes it as zero; a file of a build
	// before it holds zero there (reserved bytes), read as "no stamp".
	StampOffset = 2056
	// MaxDerivation is the largest Header.Derivation of any kind
	// (cuckoo.DeriveLocal); a Bloom or counting layer's is at most 1
	// (bloom.DeriveMul).
	MaxDerivation = 2
	// MaxDataPages bounds a region (16 TiB of data): a larger header is
	// treated as corrupt, not as an allocation request.
	MaxDataPages = 1 << 32
)

// Byte offsets of the header fields. Append, DecodeHeader and HeaderFields
// all take them from here and from the layouts below.
const (
	offMagic      = 0  // 8 bytes
	offVersion    = 8  // 4 bytes
	offStoreID    = 80 // 8 bytes, from version 2
	offDerivation = 88 // 4 bytes, from version 4
	crcOffsetV1   = 80 // CRC-32C of bytes 0..79
	encodedLenV1  = crcOffsetV1 + 4
	crcOffsetV2   = 88 // versions 2 and 3
	// crcOffset and encodedLen are those of FormatVersion: the CRC-32C at
	// crcOffset covers bytes [0, crcOffset); bytes from encodedLen to
	// HeaderSize are reserved (zero when written), except the seq word.
	crcOffset  = 92
	encodedLen = crcOffset + 4
)

// Magic starts every filter file.
const Magic = "FSFILTR\x00"

// Kind says which filter's data a region holds.
type Kind uint32

// The kinds of filter data. Values are part of the file format.
const (
	KindBloom    Kind = 1
	KindCounting Kind = 2
	KindCuckoo   Kind = 3
	KindBitmap   Kind = 4
)

// String returns the kind's lower-case name.
func (k Kind) String() string {
	switch k {
	case KindBloom:
		return "bloom"
	case KindCounting:
		return "counting"
	case KindCuckoo:
		return "cuckoo"
	case KindBitmap:
		return "bitmap"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// Valid reports whether k is one of the known kinds.
func (k Kind) Valid() bool { return k >= KindBloom && k <= KindBitmap }

// Header is the decoded header page of a region file. It carries every
// parameter needed to interpret the data without the catalog.
type Header struct {
	Kind Kind
	// Version is the format version the header was decoded from (1..6).
	// Append writes FormatVersion whatever this holds.
	Version         uint32
	DataPages       uint64
	FilterID        uint64
	Layer           uint32
	K               uint32
	Salt            uint64
	Size            uint64 // blocks (bloom, counting), buckets (cuckoo), bits (bitmap)
	BucketSize      uint32
	FingerprintBits uint32
	Capacity        uint64
	ErrorRate       float64
	// StoreID is the random identity of the store that made the file
	// (version 2). It is 0 in a version 1 file; the store never writes 0.
	StoreID uint64
	// Derivation is how a Bloom or counting layer's blocks and positions,
	// or a cuckoo layer's buckets and fingerprints, follow from a key's
	// hash: a bloom.Derivation (0 mix, 1 mul) or a cuckoo.Derivation (0
	// mix, 1 mul, 2 local).
	// It is 0 in files of versions 1 to 3, which all use the mix
	// derivation, in cuckoo layers of version 4 files, and in bitmaps.
	Derivation uint32
}

// HeaderField describes one field of an encoded header: its name (the
// Header field it holds, or Magic, Version, CRC) and its bytes
// [Offset, Offset+Size) in the header page.
type HeaderField struct {
	Name         string
	Offset, Size int
}

// numField is a fixed-size little-endian field of the header together with
// its accessors; the layouts below drive both Append and DecodeHeader.
type numField struct {
	name string
	off  int
	size int // 4 or 8
	get  func(h *Header) uint64
	set  func(h *Header, v uint64)
}

// fieldsV1 are the numeric fields after the magic and the version, in
// offset order, shared by both versions.
var fieldsV1 = []numField{
	{"Kind", 12, 4, func(h *Header) uint64 { return uint64(h.Kind) }, func(h *Header, v uint64) { h.Kind = Kind(v) }},
	{"DataPages", 16, 8, func(h *Header) uint64 { return h.DataPages }, func(h *Header, v uint64) { h.DataPages = v }},
	{"FilterID", 24, 8, func(h *Header) uint64 { return h.FilterID }, func(h *Header, v uint64) { h.FilterID = v }},
	{"Layer", 32, 4, func(h *Header) uint64 { return uint64(h.Layer) }, func(h *Header, v uint64) { h.Layer = uint32(v) }},
	{"K", 36, 4, func(h *Header) uint64 { return uint64(h.K) }, func(h *Header, v uint64) { h.K = uint32(v) }},
	{"Salt", 40, 8, func(h *Header) uint64 { return h.Salt }, func(h *Header, v uint64) { h.Salt = v }},
	{"Size", 48, 8, func(h *Header) uint64 { return h.Size }, func(h *Header, v uint64) { h.Size = v }},
	{"BucketSize", 56, 4, func(h *Header) uint64 { return uint64(h.BucketSize) }, func(h *Header, v uint64) { h.BucketSize = uint32(v) }},
	{"FingerprintBits", 60, 4, func(h *Header) uint64 { return uint64(h.FingerprintBits) }, func(h *Header, v uint64) { h.FingerprintBits = uint32(v) }},
	{"Capacity", 64, 8, func(h *Header) uint64 { return h.Capacity }, func(h *Header, v uint64) { h.Capacity = v }},
	{"ErrorRate", 72, 8, func(h *Header) uint64 { return math.Float64bits(h.ErrorRate) }, func(h *Header, v uint64) { h.ErrorRate = math.Float64frombits(v) }},
}

// fieldsV2 are version 1's fields followed by the store ID (versions 2
// and 3).
var fieldsV2 = append(fieldsV1[:len(fieldsV1):len(fieldsV1)],
	numField{"StoreID", offStoreID, 8, func(h *Header) uint64 { return h.StoreID }, func(h *Header, v uint64) { h.StoreID = v }})

// fieldsV4 are version 2's fields followed by the derivation.
var fieldsV4 = append(fieldsV2[:len(fieldsV2):len(fieldsV2)],
	numField{"Derivation", offDerivation, 4, func(h *Header) uint64 { return uint64(h.Derivation) }, func(h *Header, v uint64) { h.Derivation = uint32(v) }})

// layout returns the numeric fields and the CRC offset of a format version;
// ok is false for a version this code does not read.
func layout(version uint32) (fields []numField, crcOff int, ok bool) {
	switch version {
	case 1:
		return fieldsV1, crcOffsetV1, true
	case 2, 3:
		return fieldsV2, crcOffsetV2, true
	case 4, 5, 6:
		return fieldsV4, crcOffset, true
	}
	return nil, 0, false
}

// HeaderFields describes the encoded fields of a header of the given format
// version, in offset order: Magic, Version, the Header fields, CRC last (a
// CRC-32C of every byte before it). It returns nil for a version this code
// does not read. Bytes not listed are reserved; in version 2 they include
// the move-sequence word at SeqOffset, which is live state, not header.
func HeaderFields(version uint32) []HeaderField {
	fields, crcOff, ok := layout(version)
	if !ok {
		return nil
	}
	out := make([]HeaderField, 0, len(fields)+3)
	out = append(out, HeaderField{"Magic", offMagic, len(Magic)}, HeaderField{"Version", offVersion, 4})
	for _, f := range fields {
		out = append(out, HeaderField{f.name, f.off, f.size})
	}
	return append(out, HeaderField{"CRC", crcOff, 4})
}

// DataWords returns the number of uint64 words in the data pages.
func (h Header) DataWords() uint64 { return h.DataPages * WordsPerPage }

// HasSums reports whether a file of this header's version keeps data-page
// checksums (version 3 and later; Version 0 stands for FormatVersion, a header not
// written yet).
func (h Header) HasSums() bool { return h.Version == 0 || h.Version >= 3 }

// SumPages returns the number of checksum pages after the data pages: one
// per SumsPerPage data pages, none before version 3.
func (h Header) SumPages() uint64 {
	if !h.HasSums() {
		return 0
	}
	return (h.DataPages + SumsPerPage - 1) / SumsPerPage
}

// SumOffset returns the byte offset in the file of data page p's checksum
// (version 3 and later).
func (h Header) SumOffset(p uint64) int64 {
	return int64(HeaderSize + h.DataPages*PageSize + 4*p)
}

// FileSize returns the size in bytes of a file holding this region: the
// header page, the data pages and the checksum pages.
func (h Header) FileSize() int64 {
	return int64(HeaderSize + (h.DataPages+h.SumPages())*PageSize)
}

// Validate checks the fields a decoder cannot check by CRC alone and
// this package knows the range of: the kind, the data page count and the
// derivation. The geometry's own fields (k, the size, the bucket size,
// the fingerprint bits) and whether the data pages hold it are checked
// by the kind's package (bloom.Geometry.Validate and the like) and, in a
// store, against the catalog.
func (h Header) Validate() error {
	if field, reason := h.badField(); field != "" {
		return fmt.Errorf("mmapbits: %w: header %s", ErrInvalid, reason)
	}
	return nil
}

// badField returns the name of the first field Validate refuses and why,
// or "" if none.
func (h Header) badField() (field, reason string) {
	switch {
	case !h.Kind.Valid():
		return "Kind", fmt.Sprintf("kind %d is not a known kind", h.Kind)
	case h.DataPages == 0 || h.DataPages > MaxDataPages:
		return "DataPages", fmt.Sprintf("data pages %d out of range 1..%d", h.DataPages, uint64(MaxDataPages))
	case h.Derivation > h.maxDerivation():
		return "Derivation", fmt.Sprintf("derivation %d is not one a %v layer of format version %d can have", h.Derivation, h.Kind, h.writtenVersion())
	}
	return "", ""
}

// maxDerivation returns the largest derivation a layer of h's kind and
// version may have: 1 for Bloom and counting layers (from version 4; the
// versions before have no field), for cuckoo layers 1 from version 5 and
// 2 from version 6, 0 for every other (Version 0 stands for
// FormatVersion).
func (h Header) maxDerivation() uint32 {
	v := h.writtenVersion()
	switch {
	case h.Kind == KindBloom || h.Kind == KindCounting:
		return 1
	case h.Kind != KindCuckoo || v < 5:
		return 0
	case v == 5:
		return 1
	}
	return 2
}

// writtenVersion is h.Version, or FormatVersion for a header not written
// yet (Version 0).
func (h Header) writtenVersion() uint32 {
	if h.Version == 0 {
		return FormatVersion
	}
	return h.Version
}

// PagesFor returns how many data pages hold n words.
func PagesFor(words uint64) uint64 { return (words + WordsPerPage - 1) / WordsPerPage }

// Append appends the full 4096-byte header page encoding h in format
// FormatVersion to b. The seq word and the reserved bytes are zero.
func (h Header) Append(b []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, HeaderSize)...)
	p := b[start:]
	copy(p[offMagic:], Magic)
	binary.LittleEndian.PutUint32(p[offVersion:], FormatVersion)
	for _, f := range fieldsV4 {
		putField(p[f.off:], f.size, f.get(&h))
	}
	binary.LittleEndian.PutUint32(p[crcOffset:], crc.Checksum(p[:crcOffset]))
	return b
}

func putField(p []byte, size int, v uint64) {
	if size == 4 {
		binary.LittleEndian.PutUint32(p, uint32(v))
		return
	}
	binary.LittleEndian.PutUint64(p, v)
}

func field(p []byte, size int) uint64 {
	if size == 4 {
		return uint64(binary.LittleEndian.Uint32(p))
	}
	return binary.LittleEndian.Uint64(p)
}

// DecodeHeader decodes the header page at the start of b, of format version
// 1 to 6, and returns the bytes after it. Every failure wraps ErrCorrupt
// through one of ErrShortHeader, ErrBadMagic (ErrZeroHeader for a page of
// zeros), ErrBadVersion, ErrBadChecksum or ErrBadSize; a *FieldError
// names the byte offset of the failing field.
// Reserved bytes are not checked, and the result never depends on the seq
// word at SeqOffset.
func DecodeHeader(b []byte) (Header, []byte, error) {
	if len(b) < HeaderSize {
		return Header{}, b, fmt.Errorf("%w: have %d bytes, need %d", ErrShortHeader, len(b), HeaderSize)
	}
	p := b[:HeaderSize]
	if string(p[offMagic:offMagic+len(Magic)]) != Magic {
		if allZero(p) {
			return Header{}, b, &FieldError{ErrZeroHeader, offMagic, "every byte of the header page is 0"}
		}
		return Header{}, b, &FieldError{ErrBadMagic, offMagic, fmt.Sprintf("%q", p[offMagic:offMagic+len(Magic)])}
	}
	v := binary.LittleEndian.Uint32(p[offVersion:])
	fields, crcOff, ok := layout(v)
	if !ok {
		return Header{}, b, &FieldError{ErrBadVersion, offVersion, fmt.Sprintf("%d (this build reads 1..%d)", v, FormatVersion)}
	}
	if got, want := binary.LittleEndian.Uint32(p[crcOff:]), crc.Checksum(p[:crcOff]); got != want {
		return Header{}, b, &FieldError{ErrBadChecksum, int64(crcOff), fmt.Sprintf("stored %08x, computed %08x", got, want)}
	}
	h := Header{Version: v}
	for _, f := range fields {
		f.set(&h, field(p[f.off:], f.size))
	}
	if name, reason := h.badField(); name != "" {
		off := fieldOffset("Kind")
		for _, f := range fields {
			if f.name == name {
				off = int64(f.off)
			}
		}
		return Header{}, b, &FieldError{ErrBadSize, off, reason}
	}
	return h, b[HeaderSize:], nil
}

// allZero reports whether every byte of p is 0.
func allZero(p []byte) bool {
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}
