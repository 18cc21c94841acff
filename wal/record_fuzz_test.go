package wal

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/filterstore/filterstore/internal/fuzzcorpus"
)

// FuzzReader feeds arbitrary bytes to a Reader. Properties: no panic;
// allocation bounded by the input size (not by length fields); every record
// returned re-encodes to exactly the bytes it was decoded from; decoding
// stops with io.EOF only at the end of the input, otherwise with ErrTorn.
// The seed corpus is testdata/fuzz/FuzzReader (see readerSeeds).
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		var reenc []byte
		for {
			lsn, payload, err := r.Next()
			if cap(r.buf) > 2*len(data)+64<<10 {
				t.Fatalf("payload buffer of %d bytes for %d bytes of input", cap(r.buf), len(data))
			}
			if err == io.EOF {
				if len(reenc) != len(data) {
					t.Fatalf("io.EOF after %d of %d bytes", len(reenc), len(data))
				}
				return
			}
			if err != nil {
				if !errors.Is(err, ErrTorn) {
					t.Fatalf("error %v does not wrap ErrTorn", err)
				}
				if r.Offset() != int64(len(reenc)) {
					t.Fatalf("Offset() = %d after an error at %d", r.Offset(), len(reenc))
				}
				return
			}
			if len(payload) > MaxRecordSize || lsn == 0 {
				t.Fatalf("accepted lsn %d with %d bytes", lsn, len(payload))
			}
			reenc = AppendRecord(reenc, lsn, payload)
			if !bytes.Equal(reenc, data[:len(reenc)]) {
				t.Fatalf("record %d re-encodes differently", lsn)
			}
		}
	})
}

// FuzzRoundTrip checks decode(encode(x)) == x for two records in a row.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), []byte("hello"), []byte{})
	f.Add(uint64(1<<63), []byte{}, []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, lsn uint64, p1, p2 []byte) {
		if lsn == 0 || lsn >= MaxLSN { // two records from lsn must fit in [1, MaxLSN]
			return
		}
		buf := AppendRecord(AppendRecord(nil, lsn, p1), lsn+1, p2)
		r := NewReader(bytes.NewReader(buf))
		for i, want := range [][]byte{p1, p2} {
			got, payload, err := r.Next()
			if err != nil || got != lsn+uint64(i) || !bytes.Equal(payload, want) {
				t.Fatalf("record %d: got (%d, %q, %v), want (%d, %q)", i, got, payload, err, lsn+uint64(i), want)
			}
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Fatalf("after two records: %v, want io.EOF", err)
		}
	})
}

// readerSeeds are the inputs checked in under testdata/fuzz/FuzzReader.
func readerSeeds() map[string][]byte {
	three := AppendRecord(AppendRecord(AppendRecord(nil, 1, []byte("first")), 2, nil), 3, bytes.Repeat([]byte{0xab}, 40))
	flipped := bytes.Clone(three)
	flipped[RecordHeaderSize+2] ^= 1
	huge := AppendRecord(nil, 5, []byte("x"))
	huge[3] = 0x01 // length 16 MiB + 1
	maxLen := AppendRecord(nil, 5, []byte("x"))
	maxLen[0], maxLen[3] = 0, 0x01 // length exactly MaxRecordSize, 1 byte present
	return map[string][]byte{
		"valid-one":      AppendRecord(nil, 1, []byte("hello")),
		"valid-three":    three,
		"valid-empty":    AppendRecord(nil, 1<<40, nil),
		"torn-header":    three[:10],
		"torn-payload":   three[:len(three)-3],
		"crc-flip":       flipped,
		"huge-length":    huge,
		"max-length":     maxLen,
		"zeros":          make([]byte, 48),
		"empty":          {},
		"trailing-bytes": append(bytes.Clone(three), 0, 0, 0),
	}
}

// TestWriteReaderCorpus checks (or, with FILTERSTORE_WRITE_CORPUS=1,
// writes) the FuzzReader corpus.
func TestWriteReaderCorpus(t *testing.T) {
	fuzzcorpus.Check(t, "FuzzReader", readerSeeds())
}
