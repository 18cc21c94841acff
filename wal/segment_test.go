package wal

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// TestSegmentHeaderGolden pins the segment header: a change must fail this
// test. The CRC was computed independently (bitwise CRC-32C).
func TestSegmentHeaderGolden(t *testing.T) {
	got := hex.EncodeToString(AppendSegmentHeader(nil, 1))
	const want = "465357414c534547" + "01000000" + "0100000000000000" + "dcd2fc57"
	if got != want {
		t.Fatalf("AppendSegmentHeader(1) = %s, want %s", got, want)
	}
	h, err := ParseSegmentHeader(AppendSegmentHeader(nil, 12345))
	if err != nil || h != (SegmentHeader{Version: 1, FirstLSN: 12345}) {
		t.Fatalf("ParseSegmentHeader = %+v, %v", h, err)
	}
}

func TestSegmentHeaderErrors(t *testing.T) {
	good := AppendSegmentHeader(nil, 9)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{"short", "short header", good[:23]},
		{"magic", "bad magic", mod(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"crc", "CRC mismatch", mod(func(b []byte) []byte { b[13]++; return b })},
		{"version", "unsupported format version 2", mod(func(b []byte) []byte {
			b[8] = 2
			h := AppendSegmentHeader(nil, 9)
			copy(b[20:], h[20:]) // keep the old CRC: must fail on CRC first
			return b
		})},
	} {
		_, err := ParseSegmentHeader(tc.b)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", tc.name, err)
			continue
		}
		if tc.name != "version" && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %q does not mention %q", tc.name, err, tc.want)
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
		"18446744073709551615.log": ^uint64(0),
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
