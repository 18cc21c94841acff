package wal

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestRecordGolden pins the record framing: a change must fail this test.
func TestRecordGolden(t *testing.T) {
	got := hex.EncodeToString(AppendRecord(nil, 1, []byte("hello")))
	const want = "05000000" + "278da710" + "0100000000000000" + "68656c6c6f"
	if got != want {
		t.Fatalf("AppendRecord(1, hello) = %s, want %s", got, want)
	}
	got = hex.EncodeToString(AppendRecord(nil, 0x0102030405060708, nil))
	const want2 = "00000000" + "cb05b181" + "0807060504030201"
	if got != want2 {
		t.Fatalf("AppendRecord(0x0102030405060708, nil) = %s, want %s", got, want2)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	payloads := [][]byte{nil, {0}, []byte("x"), bytes.Repeat([]byte("ab"), 1000), make([]byte, 1<<20)}
	var buf []byte
	for i, p := range payloads {
		buf = AppendRecord(buf, uint64(i+7), p)
	}
	r := NewReader(bytes.NewReader(buf))
	off := int64(0)
	for i, p := range payloads {
		lsn, got, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if lsn != uint64(i+7) || !bytes.Equal(got, p) {
			t.Fatalf("record %d: got lsn %d len %d, want lsn %d len %d", i, lsn, len(got), i+7, len(p))
		}
		if r.Offset() != off {
			t.Fatalf("record %d: Offset() = %d, want %d", i, r.Offset(), off)
		}
		off += RecordHeaderSize + int64(len(p))
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after last record: %v, want io.EOF", err)
	}
}

// TestReaderTruncated cuts a stream of records at every byte offset: the
// reader returns the whole records, then io.EOF at a record boundary and
// ErrTorn anywhere else.
func TestReaderTruncated(t *testing.T) {
	var buf []byte
	var ends []int
	for i, p := range []string{"", "a", "hello, world", strings.Repeat("z", 100)} {
		buf = AppendRecord(buf, uint64(i+1), []byte(p))
		ends = append(ends, len(buf))
	}
	for cut := 0; cut <= len(buf); cut++ {
		r := NewReader(bytes.NewReader(buf[:cut]))
		n := 0
		var err error
		for {
			if _, _, err = r.Next(); err != nil {
				break
			}
			n++
		}
		whole := 0
		for whole < len(ends) && ends[whole] <= cut {
			whole++
		}
		atBoundary := cut == 0 || (whole > 0 && ends[whole-1] == cut)
		if n != whole {
			t.Fatalf("cut %d: read %d records, want %d", cut, n, whole)
		}
		if atBoundary && err != io.EOF {
			t.Fatalf("cut %d: err %v, want io.EOF", cut, err)
		}
		if !atBoundary && !errors.Is(err, ErrTorn) {
			t.Fatalf("cut %d: err %v, want ErrTorn", cut, err)
		}
		if _, _, err2 := r.Next(); err2 != err {
			t.Fatalf("cut %d: error not sticky: %v then %v", cut, err, err2)
		}
	}
}

// TestReaderFlippedByte flips every bit-pattern-changing byte of a record:
// the reader must reject it.
func TestReaderFlippedByte(t *testing.T) {
	rec := AppendRecord(nil, 42, []byte("payload bytes"))
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x5a
		_, _, err := NewReader(bytes.NewReader(bad)).Next()
		if !errors.Is(err, ErrTorn) {
			t.Fatalf("byte %d flipped: err %v, want ErrTorn", i, err)
		}
	}
}

func TestReaderRejects(t *testing.T) {
	huge := AppendRecord(nil, 1, nil)
	huge[0], huge[1], huge[2], huge[3] = 0x01, 0x00, 0x00, 0x01 // MaxRecordSize+1
	zeros := make([]byte, 64)
	lsn0 := AppendRecord(nil, 1, []byte("x"))
	lsn0[8] = 0
	lsn0 = fixCRC(lsn0)
	for name, in := range map[string][]byte{"huge length": huge, "zeros": zeros, "lsn 0": lsn0} {
		_, _, err := NewReader(bytes.NewReader(in)).Next()
		if !errors.Is(err, ErrTorn) {
			t.Errorf("%s: err %v, want ErrTorn", name, err)
		}
	}
}

// TestReaderBoundedAllocation: a length field claiming MaxRecordSize backed
// by a few bytes must not make the reader allocate MaxRecordSize.
func TestReaderBoundedAllocation(t *testing.T) {
	rec := AppendRecord(nil, 1, nil)
	rec[0], rec[1], rec[2], rec[3] = 0x00, 0x00, 0x00, 0x01 // MaxRecordSize
	rec = append(rec, "short"...)
	r := NewReader(bytes.NewReader(rec))
	if _, _, err := r.Next(); !errors.Is(err, ErrTorn) {
		t.Fatalf("err %v, want ErrTorn", err)
	}
	if cap(r.buf) > 64<<10 {
		t.Fatalf("reader allocated %d bytes for a 5-byte payload", cap(r.buf))
	}
}

// fixCRC recomputes the CRC of the single record in rec.
func fixCRC(rec []byte) []byte {
	c := recordCRC(rec)
	rec[4], rec[5], rec[6], rec[7] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
	return rec
}

func TestAppendRecordPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"lsn 0":     func() { AppendRecord(nil, 0, nil) },
		"too large": func() { AppendRecord(nil, 1, make([]byte, MaxRecordSize+1)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
