package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// Segment header constants. They are part of the on-disk format and must
// never change (see the package documentation).
const (
	// SegmentMagic opens every segment file.
	SegmentMagic = "FSWALSEG"
	// SegmentVersion is the only segment format version this package
	// reads and writes.
	SegmentVersion = 1
	// SegmentHeaderSize is the size of the segment header.
	SegmentHeaderSize = 24

	segmentSuffix = ".log"
	tmpSuffix     = ".tmp"
)

// SegmentHeader is the decoded header of a segment file.
type SegmentHeader struct {
	Version  uint32
	FirstLSN uint64 // LSN of the segment's first record
}

// AppendSegmentHeader appends the encoded header of a version-1 segment
// whose first record has LSN firstLSN.
func AppendSegmentHeader(dst []byte, firstLSN uint64) []byte {
	start := len(dst)
	dst = append(dst, SegmentMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, SegmentVersion)
	dst = binary.LittleEndian.AppendUint64(dst, firstLSN)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// ParseSegmentHeader decodes a segment header from the first
// SegmentHeaderSize bytes of b. Its errors wrap ErrCorrupt and say which
// check failed; the caller adds the file name.
func ParseSegmentHeader(b []byte) (SegmentHeader, error) {
	h, reason := parseSegmentHeader(b)
	if reason != "" {
		return SegmentHeader{}, fmt.Errorf("wal: segment header: %s: %w", reason, ErrCorrupt)
	}
	return h, nil
}

// parseSegmentHeader is ParseSegmentHeader returning the reason for a
// failure instead of an error.
func parseSegmentHeader(b []byte) (SegmentHeader, string) {
	if len(b) < SegmentHeaderSize {
		return SegmentHeader{}, fmt.Sprintf("short header: %d of %d bytes", len(b), SegmentHeaderSize)
	}
	b = b[:SegmentHeaderSize]
	if string(b[0:8]) != SegmentMagic {
		return SegmentHeader{}, fmt.Sprintf("bad magic %q", b[0:8])
	}
	if want, got := binary.LittleEndian.Uint32(b[20:24]), crc32.Checksum(b[0:20], castagnoli); want != got {
		return SegmentHeader{}, fmt.Sprintf("header CRC mismatch: stored %#08x, computed %#08x", want, got)
	}
	h := SegmentHeader{
		Version:  binary.LittleEndian.Uint32(b[8:12]),
		FirstLSN: binary.LittleEndian.Uint64(b[12:20]),
	}
	if h.Version != SegmentVersion {
		return SegmentHeader{}, fmt.Sprintf("unsupported format version %d (want %d)", h.Version, SegmentVersion)
	}
	if h.FirstLSN == 0 {
		return SegmentHeader{}, "first LSN 0 in header"
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
	if err != nil || lsn == 0 {
		return 0, false
	}
	return lsn, true
}
