package mmapbits

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Format constants: part of the file format, never to change.
const (
	// PageSize is the unit of alignment of every region.
	PageSize = 4096
	// HeaderSize is the size of the header page that starts every file.
	HeaderSize = PageSize
	// WordsPerPage is the number of uint64 data words in one page.
	WordsPerPage = PageSize / 8
	// FormatVersion is the only version this code reads and writes.
	FormatVersion = 1
	// encodedLen is the number of meaningful header bytes, CRC included.
	encodedLen = 84
	crcOffset  = 80
	// MaxDataPages bounds a region (16 TiB of data): a larger header is
	// treated as corrupt, not as an allocation request.
	MaxDataPages = 1 << 32
)

// Magic starts every filter file.
const Magic = "FSFILTR\x00"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
	Kind            Kind
	Version         uint32 // FormatVersion; Append writes FormatVersion whatever this holds
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
}

// DataWords returns the number of uint64 words in the data pages.
func (h Header) DataWords() uint64 { return h.DataPages * WordsPerPage }

// FileSize returns the size in bytes of a file holding this region.
func (h Header) FileSize() int64 { return int64(HeaderSize + h.DataPages*PageSize) }

// Validate checks the fields a decoder cannot check by CRC alone.
func (h Header) Validate() error {
	if !h.Kind.Valid() {
		return fmt.Errorf("mmapbits: %w: header kind %d is not a known kind", ErrInvalid, h.Kind)
	}
	if h.DataPages == 0 || h.DataPages > MaxDataPages {
		return fmt.Errorf("mmapbits: %w: header data pages %d out of range 1..%d", ErrInvalid, h.DataPages, uint64(MaxDataPages))
	}
	return nil
}

// PagesFor returns how many data pages hold n words.
func PagesFor(words uint64) uint64 { return (words + WordsPerPage - 1) / WordsPerPage }

// Append appends the full 4096-byte header page encoding h to b.
func (h Header) Append(b []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, HeaderSize)...)
	p := b[start:]
	le := binary.LittleEndian
	copy(p[0:8], Magic)
	le.PutUint32(p[8:], FormatVersion)
	le.PutUint32(p[12:], uint32(h.Kind))
	le.PutUint64(p[16:], h.DataPages)
	le.PutUint64(p[24:], h.FilterID)
	le.PutUint32(p[32:], h.Layer)
	le.PutUint32(p[36:], h.K)
	le.PutUint64(p[40:], h.Salt)
	le.PutUint64(p[48:], h.Size)
	le.PutUint32(p[56:], h.BucketSize)
	le.PutUint32(p[60:], h.FingerprintBits)
	le.PutUint64(p[64:], h.Capacity)
	le.PutUint64(p[72:], math.Float64bits(h.ErrorRate))
	le.PutUint32(p[crcOffset:], crc32.Checksum(p[:crcOffset], castagnoli))
	return b
}

// DecodeHeader decodes the header page at the start of b and returns the
// bytes after it. Every failure wraps ErrCorrupt through one of ErrShortHeader,
// ErrBadMagic, ErrBadVersion, ErrBadChecksum or ErrBadSize; the message
// names the byte offset of the failing field.
func DecodeHeader(b []byte) (Header, []byte, error) {
	if len(b) < HeaderSize {
		return Header{}, b, fmt.Errorf("%w: have %d bytes, need %d", ErrShortHeader, len(b), HeaderSize)
	}
	p := b[:HeaderSize]
	if string(p[0:8]) != Magic {
		return Header{}, b, fmt.Errorf("%w at offset 0: %q", ErrBadMagic, p[0:8])
	}
	le := binary.LittleEndian
	if v := le.Uint32(p[8:]); v != FormatVersion {
		return Header{}, b, fmt.Errorf("%w at offset 8: %d (this build reads %d)", ErrBadVersion, v, FormatVersion)
	}
	if got, want := le.Uint32(p[crcOffset:]), crc32.Checksum(p[:crcOffset], castagnoli); got != want {
		return Header{}, b, fmt.Errorf("%w at offset %d: stored %08x, computed %08x", ErrBadChecksum, crcOffset, got, want)
	}
	h := Header{
		Version:         FormatVersion,
		Kind:            Kind(le.Uint32(p[12:])),
		DataPages:       le.Uint64(p[16:]),
		FilterID:        le.Uint64(p[24:]),
		Layer:           le.Uint32(p[32:]),
		K:               le.Uint32(p[36:]),
		Salt:            le.Uint64(p[40:]),
		Size:            le.Uint64(p[48:]),
		BucketSize:      le.Uint32(p[56:]),
		FingerprintBits: le.Uint32(p[60:]),
		Capacity:        le.Uint64(p[64:]),
		ErrorRate:       math.Float64frombits(le.Uint64(p[72:])),
	}
	if err := h.Validate(); err != nil {
		return Header{}, b, fmt.Errorf("%w: %v", ErrBadSize, err)
	}
	return h, b[HeaderSize:], nil
}
