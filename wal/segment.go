package wal

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/filterstore/filterstore/internal/crc"
)

// Segment header constants. They are part of the on-disk format and must
// never change (see the package documentation).
const (
	// SegmentMagic opens every segment file.
	SegmentMagic = "FSWALSEG"
	// SegmentVersion is the segment format version this package writes.
	// It reads versions 1 and 2.
	SegmentVersion = 2
	// SegmentHeaderSizeV1 is the size of a version-1 segment header.
	SegmentHeaderSizeV1 = 24
	// SegmentHeaderSize is the size of a version-2 segment header, the
	// one this package writes.
	SegmentHeaderSize = 32

	segmentSuffix = ".log"
	tmpSuffix     = ".tmp"

	// segmentVersion1 is the first format version: no store ID.
	segmentVersion1 = 1
	// minHeaderPrefix is how much of a header tells its version.
	minHeaderPrefix = 12
)

// SegmentHeader is the decoded header of a segment file.
type SegmentHeader struct {
	Version  uint32
	FirstLSN uint64 // LSN of the segment's first record
	StoreID  uint64 // 0 in a version-1 header
	Size     int    // encoded size: SegmentHeaderSizeV1 or SegmentHeaderSize; records start here
}

// AppendSegmentHeader appends the encoded header of a version-2 segment
// whose first record has LSN firstLSN, written by the store storeID (0 if
// the log has no store identity).
func AppendSegmentHeader(dst []byte, firstLSN, storeID uint64) []byte {
	start := len(dst)
	dst = append(dst, SegmentMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, SegmentVersion)
	dst = binary.LittleEndian.AppendUint64(dst, firstLSN)
	dst = binary.LittleEndian.AppendUint64(dst, storeID)
	return binary.LittleEndian.AppendUint32(dst, crc.Checksum(dst[start:]))
}

// ParseSegmentHeader decodes a version-1 or version-2 segment header from
// the start of b; bytes after the header are ignored. Its error is a
// *CorruptError (matching ErrCorrupt) with Offset 0 and Segment "" for the
// caller to fill in, whose Reason says which check failed.
func ParseSegmentHeader(b []byte) (SegmentHeader, error) {
	h, reason := parseSegmentHeader(b)
	if reason != "" {
		return SegmentHeader{}, &CorruptError{Offset: 0, Reason: reason}
	}
	return h, nil
}

// parseSegmentHeader is ParseSegmentHeader returning the reason for a
// failure instead of an error. The magic is checked first, then the
// version, which gives the layout and so where the CRC is, then the CRC,
// then the fields.
func parseSegmentHeader(b []byte) (SegmentHeader, string) {
	if len(b) >= len(SegmentMagic) && string(b[:len(SegmentMagic)]) != SegmentMagic {
		return SegmentHeader{}, fmt.Sprintf("bad magic %q", b[:len(SegmentMagic)])
	}
	if len(b) < minHeaderPrefix {
		return SegmentHeader{}, fmt.Sprintf("short header: %d of at least %d bytes", len(b), SegmentHeaderSizeV1)
	}
	h := SegmentHeader{Version: binary.LittleEndian.Uint32(b[8:12])}
	switch h.Version {
	case segmentVersion1:
		h.Size = SegmentHeaderSizeV1
	case SegmentVersion:
		h.Size = SegmentHeaderSize
	default:
		return SegmentHeader{}, fmt.Sprintf("unsupported format version %d (want %d or %d)", h.Version, segmentVersion1, SegmentVersion)
	}
	if len(b) < h.Size {
		return SegmentHeader{}, fmt.Sprintf("short header: %d of %d bytes (version %d)", len(b), h.Size, h.Version)
	}
	b = b[:h.Size]
	crcAt := h.Size - 4
	if want, got := binary.LittleEndian.Uint32(b[crcAt:]), crc.Checksum(b[:crcAt]); want != got {
		return SegmentHeader{}, fmt.Sprintf("header CRC mismatch: stored %#08x, computed %#08x", want, got)
	}
	h.FirstLSN = binary.LittleEndian.Uint64(b[12:20])
	if h.Version == SegmentVersion {
		h.StoreID = binary.LittleEndian.Uint64(b[20:28])
	}
	if h.FirstLSN == 0 {
		return SegmentHeader{}, "first LSN 0 in header"
	}
	if h.FirstLSN > MaxLSN {
		return SegmentHeader{}, fmt.Sprintf("first LSN %d in header, above MaxLSN", h.FirstLSN)
	}
	return h, ""
}

// SegmentName returns the file name of the segment whose first LSN is
// firstLSN: 20 decimal digits, zero-padded, then ".log".
func SegmentName(firstLSN uint64) string {
	return fmt.Sprintf("%020d%s", firstLSN, segmentSuffix)
}

// ParseSegmentName returns the first LSN encoded in a segment file name, and
// false if name is not a segment name.
func ParseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	lsn, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || lsn == 0 || lsn > MaxLSN {
		return 0, false
	}
	return lsn, true
}
