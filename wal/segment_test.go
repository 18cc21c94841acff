package wal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/fuzzcorpus"
)

// TestSegmentHeaderGolden pins both segment header versions: a change must
// fail this test. The CRCs were computed independently (bitwise CRC-32C).
func TestSegmentHeaderGolden(t *testing.T) {
	got := hex.EncodeToString(AppendSegmentHeader(nil, 1, 0x0102030405060708))
	const want = "465357414c534547" + "02000000" + "0100000000000000" + "0807060504030201" + "e982eae0"
	if got != want {
		t.Fatalf("AppendSegmentHeader(1, 0x0102030405060708) = %s, want %s", got, want)
	}
	h, err := ParseSegmentHeader(AppendSegmentHeader(nil, 12345, 77))
	if err != nil || h != (SegmentHeader{Version: 2, FirstLSN: 12345, StoreID: 77, Size: SegmentHeaderSize}) {
		t.Fatalf("ParseSegmentHeader(v2) = %+v, %v", h, err)
	}
	// Version 1, as the previous release wrote it, must still be read.
	const v1 = "465357414c534547" + "01000000" + "0100000000000000" + "dcd2fc57"
	b, _ := hex.DecodeString(v1)
	if got := hex.EncodeToString(appendSegmentHeaderV1(nil, 1)); got != v1 {
		t.Fatalf("appendSegmentHeaderV1(1) = %s, want %s", got, v1)
	}
	h, err = ParseSegmentHeader(append(b, "record bytes follow"...))
	if err != nil || h != (SegmentHeader{Version: 1, FirstLSN: 1, StoreID: 0, Size: SegmentHeaderSizeV1}) {
		t.Fatalf("ParseSegmentHeader(v1) = %+v, %v", h, err)
	}
}

// appendSegmentHeaderV1 appends a version-1 segment header, as the
// previous release wrote them: magic, version 1, first LSN, CRC of [0,20).
func appendSegmentHeaderV1(dst []byte, firstLSN uint64) []byte {
	start := len(dst)
	dst = append(dst, SegmentMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, 1)
	dst = binary.LittleEndian.AppendUint64(dst, firstLSN)
	return binary.LittleEndian.AppendUint32(dst, crc.Checksum(dst[start:]))
}

// withCRC recomputes the CRC at the end of the header h.
func withCRC(h []byte) []byte {
	n := len(h) - 4
	binary.LittleEndian.PutUint32(h[n:], crc.Checksum(h[:n]))
	return h
}

func TestSegmentHeaderErrors(t *testing.T) {
	good := AppendSegmentHeader(nil, 9, 5)
	goodV1 := appendSegmentHeaderV1(nil, 9)
	mod := func(h []byte, f func(b []byte) []byte) []byte { return f(bytes.Clone(h)) }
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{"short", "short header: 31 of 32 bytes", good[:31]},
		{"short v1", "short header: 23 of 24 bytes", goodV1[:23]},
		{"short prefix", "short header: 11 of at least 24", good[:11]},
		{"empty", "short header: 0 of at least 24", nil},
		{"magic", "bad magic", mod(good, func(b []byte) []byte { b[0] = 'X'; return b })},
		{"magic short", "bad magic", mod(good[:9], func(b []byte) []byte { b[7] = 'X'; return b })},
		{"crc", "header CRC mismatch", mod(good, func(b []byte) []byte { b[13]++; return b })},
		{"crc store ID", "header CRC mismatch", mod(good, func(b []byte) []byte { b[27] ^= 0x80; return b })},
		{"crc v1", "header CRC mismatch", mod(goodV1, func(b []byte) []byte { b[19]++; return b })},
		{"version 3", "unsupported format version 3 (want 1 or 2)", mod(good, func(b []byte) []byte {
			b[8] = 3
			return withCRC(b)
		})},
		{"version 0", "unsupported format version 0", mod(good, func(b []byte) []byte {
			b[8] = 0
			return withCRC(b)
		})},
		// A version-1 header whose version field reads 2 is too short for
		// version 2.
		{"v1 as v2", "short header: 24 of 32 bytes", mod(goodV1, func(b []byte) []byte { b[8] = 2; return b })},
		{"first LSN 0", "first LSN 0", withCRC(AppendSegmentHeader(nil, 0, 5))},
	} {
		_, err := ParseSegmentHeader(tc.b)
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
			t.Errorf("%s: err %v, want a *CorruptError matching ErrCorrupt", tc.name, err)
			continue
		}
		if ce.Offset != 0 || ce.Segment != "" || !strings.Contains(ce.Reason, tc.want) {
			t.Errorf("%s: %+v, want offset 0, no segment, a reason mentioning %q", tc.name, ce, tc.want)
		}
		if !strings.HasPrefix(err.Error(), "wal: ") {
			t.Errorf("%s: error %q lacks the package prefix", tc.name, err)
		}
	}
}

func TestSegmentName(t *testing.T) {
	if got := SegmentName(1); got != "00000000000000000001.log" {
		t.Fatalf("SegmentName(1) = %q", got)
	}
	if got := SegmentName(^uint64(0)); got != "18446744073709551615.log" {
		t.Fatalf("SegmentName(max) = %q", got)
	}
	for name, want := range map[string]uint64{
		"00000000000000000001.log": 1,
		"18446744073709551614.log": MaxLSN,
		"18446744073709551615.log": 0, // beyond MaxLSN
		"00000000000000000000.log": 0, // LSN 0 is not a segment
		"0000000000000000001.log":  0,
		"0000000000000000000x.log": 0,
		"00000000000000000001.tmp": 0,
		"+0000000000000000001.log": 0,
		"99999999999999999999.log": 0, // overflows uint64
	} {
		got, ok := ParseSegmentName(name)
		if got != want || ok != (want != 0) {
			t.Errorf("ParseSegmentName(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
}

// FuzzSegmentHeader feeds arbitrary bytes to ParseSegmentHeader.
// Properties: no panic; a header it accepts re-encodes to exactly the bytes
// it was decoded from, and has the size of its version; a rejection is a
// *CorruptError at offset 0. The seed corpus is
// testdata/fuzz/FuzzSegmentHeader (see segmentHeaderSeeds).
func FuzzSegmentHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseSegmentHeader(data)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Offset != 0 || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not a *CorruptError at offset 0", err)
			}
			return
		}
		var enc []byte
		switch h.Version {
		case 1:
			enc = appendSegmentHeaderV1(nil, h.FirstLSN)
			if h.StoreID != 0 {
				t.Fatalf("version 1 with store ID %d", h.StoreID)
			}
		case SegmentVersion:
			enc = AppendSegmentHeader(nil, h.FirstLSN, h.StoreID)
		default:
			t.Fatalf("accepted version %d", h.Version)
		}
		if h.Size != len(enc) || !bytes.Equal(enc, data[:h.Size]) || h.FirstLSN == 0 {
			t.Fatalf("accepted %+v from %x, which re-encodes as %x", h, data, enc)
		}
	})
}

// segmentHeaderSeeds are the inputs checked in under
// testdata/fuzz/FuzzSegmentHeader.
func segmentHeaderSeeds() map[string][]byte {
	v2 := AppendSegmentHeader(nil, 1, 0x0102030405060708)
	v1 := appendSegmentHeaderV1(nil, 4097)
	badCRC := bytes.Clone(v2)
	badCRC[30] ^= 1
	v3 := bytes.Clone(v2)
	v3[8] = 3
	return map[string][]byte{
		"v2":              v2,
		"v2-with-records": append(bytes.Clone(v2), AppendRecord(nil, 1, []byte("x"))...),
		"v2-no-store":     AppendSegmentHeader(nil, 1<<40, 0),
		"v1":              v1,
		"v1-short":        v1[:23],
		"v2-short":        v2[:31],
		"bad-crc":         badCRC,
		"version-3":       withCRC(v3),
		"lsn-0":           AppendSegmentHeader(nil, 0, 1),
		"empty":           {},
		"magic-only":      []byte(SegmentMagic),
	}
}

// TestWriteSegmentHeaderCorpus checks (or, with FILTERSTORE_WRITE_CORPUS=1,
// writes) the FuzzSegmentHeader corpus.
func TestWriteSegmentHeaderCorpus(t *testing.T) {
	fuzzcorpus.Check(t, "FuzzSegmentHeader", segmentHeaderSeeds())
}
