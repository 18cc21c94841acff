package mmapbits

import (
	"encoding/hex"
	"errors"
	"hash/crc32"
	"testing"
)

func sampleHeader() Header {
	return Header{Kind: KindCuckoo, DataPages: 3, FilterID: 7, Layer: 2, K: 0, Salt: 0x1234,
		Size: 1500, BucketSize: 4, FingerprintBits: 16, Capacity: 5000, ErrorRate: 0.001}
}

func TestHeaderRoundTrip(t *testing.T) {
	h := sampleHeader()
	b := h.Append([]byte("prefix"))
	if len(b) != 6+HeaderSize {
		t.Fatalf("encoded length %d, want %d", len(b), 6+HeaderSize)
	}
	got, rest, err := DecodeHeader(append(b[6:], 0xAA))
	if err != nil {
		t.Fatal(err)
	}
	h.Version = FormatVersion
	if got != h {
		t.Fatalf("round trip: got %+v, want %+v", got, h)
	}
	if len(rest) != 1 || rest[0] != 0xAA {
		t.Fatalf("rest = %x, want aa", rest)
	}
}

// TestHeaderGolden pins the encoding: a change here is a file-format change.
func TestHeaderGolden(t *testing.T) {
	b := sampleHeader().Append(nil)
	const want = "465346494c545200" + "01000000" + "03000000" + "0300000000000000" +
		"0700000000000000" + "02000000" + "00000000" + "3412000000000000" + "dc05000000000000" +
		"04000000" + "10000000" + "8813000000000000" + "fca9f1d24d62503f"
	if got := hex.EncodeToString(b[:crcOffset]); got != want {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, want)
	}
	if got, want := hex.EncodeToString(b[crcOffset:encodedLen]), "9c7df198"; got != want {
		t.Fatalf("header CRC bytes = %s, want %s", got, want)
	}
	for i, c := range b[encodedLen:] {
		if c != 0 {
			t.Fatalf("reserved byte %d = %x, want 0", encodedLen+i, c)
		}
	}
}

func TestDecodeHeaderErrors(t *testing.T) {
	good := sampleHeader().Append(nil)
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	reCRC := func(b []byte) {
		h := crc32.Checksum(b[:crcOffset], castagnoli)
		b[crcOffset], b[crcOffset+1], b[crcOffset+2], b[crcOffset+3] = byte(h), byte(h>>8), byte(h>>16), byte(h>>24)
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShortHeader},
		{"short", good[:HeaderSize-1], ErrShortHeader},
		{"magic", mutate(func(b []byte) { b[0] = 'X' }), ErrBadMagic},
		{"version", mutate(func(b []byte) { b[8] = 2; reCRC(b) }), ErrBadVersion},
		{"crc", mutate(func(b []byte) { b[50] ^= 1 }), ErrBadChecksum},
		{"crc field", mutate(func(b []byte) { b[crcOffset] ^= 1 }), ErrBadChecksum},
		{"kind", mutate(func(b []byte) { b[12] = 9; reCRC(b) }), ErrBadSize},
		{"zero pages", mutate(func(b []byte) { clear(b[16:24]); reCRC(b) }), ErrBadSize},
		{"huge pages", mutate(func(b []byte) { b[23] = 0xff; reCRC(b) }), ErrBadSize},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeHeader(c.b)
			if !errors.Is(err, c.want) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want %v wrapping ErrCorrupt", err, c.want)
			}
		})
	}
}

func FuzzDecodeHeader(f *testing.F) {
	f.Add(sampleHeader().Append(nil))
	f.Add(Header{Kind: KindBloom, DataPages: 1, Size: 64, K: 7}.Append(nil))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, rest, err := DecodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if len(rest) != len(b)-HeaderSize {
			t.Fatalf("rest has %d bytes, want %d", len(rest), len(b)-HeaderSize)
		}
		// Re-encoding a decoded header reproduces its meaningful bytes.
		again := h.Append(nil)
		if string(again[:encodedLen]) != string(b[:encodedLen]) {
			t.Fatalf("decode/encode mismatch:\n%x\n%x", again[:encodedLen], b[:encodedLen])
		}
	})
}
