package wal

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/crc"
)

// TestAppendStopsAtMaxLSN: the log's LSNs end at MaxLSN. An Append that
// would pass it, and a SetNextLSN beyond it, fail with ErrInvalid; a
// reopened log ends there too. Before, the LSN after 2^64-1 wrapped to
// 0 and Append panicked encoding it (an adversarial review's finding).
func TestAppendStopsAtMaxLSN(t *testing.T) {
	fs, dir := NewMemFS(), "/log"
	l, err := Open(dir, Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetNextLSN(MaxLSN + 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetNextLSN(MaxLSN+1): %v, want ErrInvalid", err)
	}
	if err := l.SetNextLSN(MaxLSN - 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]byte("a"), []byte("b"), []byte("c")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("three records from MaxLSN-1: %v, want ErrInvalid", err)
	}
	if lsn, err := l.Append([]byte("a"), []byte("b")); err != nil || lsn != MaxLSN {
		t.Fatalf("two records from MaxLSN-1: %d, %v, want MaxLSN", lsn, err)
	}
	if _, err := l.Append([]byte("c")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a record after MaxLSN: %v, want ErrInvalid", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.LastLSN(); got != MaxLSN {
		t.Fatalf("reopened: LastLSN %d, want MaxLSN", got)
	}
	if _, err := l.Append([]byte("c")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reopened, a record after MaxLSN: %v, want ErrInvalid", err)
	}
}

// rawRecord frames payload at lsn by hand, for LSNs AppendRecord refuses.
func rawRecord(lsn uint64, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, lsn)
	b = append(b, payload...)
	c := crc.Update(crc.Update(0, b[0:4]), b[8:])
	binary.LittleEndian.PutUint32(b[4:], c)
	return b
}

// TestLSNBeyondMaxLSNRefused: a record whose LSN is 2^64-1 (its CRC
// holds) is torn, and a segment whose header or name starts there is
// not a segment of the log: Open neither wraps its next LSN to 0 nor
// panics. Before, Open accepted such a record and the next Append
// panicked.
func TestLSNBeyondMaxLSNRefused(t *testing.T) {
	t.Run("record", func(t *testing.T) {
		fs, dir := NewMemFS(), "/log"
		if err := fs.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		seg := AppendSegmentHeader(nil, MaxLSN, 0)
		seg = AppendRecord(seg, MaxLSN, []byte("last"))
		seg = append(seg, rawRecord(math.MaxUint64, []byte("beyond"))...)
		if err := fs.WriteFile(filepath.Join(dir, SegmentName(MaxLSN)), seg); err != nil {
			t.Fatal(err)
		}
		res, err := Scan(dir, ScanOptions{FS: fs}, nil)
		if err != nil || res.Next != MaxLSN+1 {
			t.Fatalf("Scan: next %d, %v: want MaxLSN+1 (the record beyond is a torn tail)", res.Next, err)
		}
		l, err := Open(dir, Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if got := l.LastLSN(); got != MaxLSN {
			t.Fatalf("LastLSN %d, want MaxLSN", got)
		}
		if _, err := l.Append([]byte("x")); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Append: %v, want ErrInvalid", err)
		}
	})
	t.Run("segment", func(t *testing.T) {
		if _, ok := ParseSegmentName(SegmentName(math.MaxUint64)); ok {
			t.Fatal("a segment name starting at 2^64-1 parsed")
		}
		if _, reason := parseSegmentHeader(AppendSegmentHeader(nil, math.MaxUint64, 0)); reason == "" {
			t.Fatal("a segment header starting at 2^64-1 decoded")
		}
	})
}

// TestFullLogStaysOpenable: a log whose last record is MaxLSN takes
// SetNextLSN(MaxLSN+1) as the no-op it is (a store checkpointed there
// calls it at every Open) and StartSegment as one (a checkpoint calls
// it): no segment is made whose name the log would not take for one.
// Before, SetNextLSN refused it, and StartSegment made a segment named
// 2^64-1, which the next Open ignored (a reviewer's finding).
func TestFullLogStaysOpenable(t *testing.T) {
	fs, dir := NewMemFS(), "/log"
	l, err := Open(dir, Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetNextLSN(MaxLSN); err != nil {
		t.Fatal(err)
	}
	if lsn, err := l.Append([]byte("last")); err != nil || lsn != MaxLSN {
		t.Fatalf("Append: %d, %v", lsn, err)
	}
	if err := l.SetNextLSN(MaxLSN + 1); err != nil {
		t.Fatalf("SetNextLSN(LastLSN+1) on a full log: %v, want the no-op", err)
	}
	if err := l.StartSegment(); err != nil {
		t.Fatalf("StartSegment on a full log: %v", err)
	}
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok := ParseSegmentName(n); !ok {
			t.Fatalf("the log made %s, which is not a segment name it takes", n)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir, Options{FS: fs}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.LastLSN(); got != MaxLSN {
		t.Fatalf("reopened: LastLSN %d, want MaxLSN", got)
	}
}
