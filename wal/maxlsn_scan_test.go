package wal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestCorruptionNearMaxLSN: a damaged record followed by valid ones is
// corruption (ErrCorrupt), not a torn tail, at the end of the LSN space
// as anywhere. Before, the LSN bound of the search for a valid record
// after the damaged one, expect + bytes/16, wrapped past 2^64 near
// MaxLSN: no record was found, Scan took the damage for a torn tail and
// Open cut the acknowledged records after it (an adversarial review's
// finding).
func TestCorruptionNearMaxLSN(t *testing.T) {
	for _, start := range []uint64{1000, MaxLSN - 40} {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			fs := NewMemFS()
			l := mustOpen(t, fs, Options{})
			if err := l.SetNextLSN(start); err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if _, err := l.Append(append(fmt.Appendf(nil, "payload %d", i), bytes.Repeat([]byte{7}, 200)...)); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			name := testDir + "/" + SegmentName(start)
			b, err := fs.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			recLen := RecordHeaderSize + len("payload 0") + 200
			b[SegmentHeaderSize+2*recLen+RecordHeaderSize] ^= 1 // the third record's payload
			if err := fs.WriteFile(name, b); err != nil {
				t.Fatal(err)
			}
			if _, err := Scan(testDir, ScanOptions{FS: fs}, nil); !errors.Is(err, ErrCorrupt) {
				t.Errorf("a damaged record before 7 valid ones: Scan %v, want ErrCorrupt", err)
			}
			if _, err := Open(testDir, Options{FS: fs, Logger: quiet}); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Open: %v, want ErrCorrupt (it must not cut the acknowledged records)", err)
			}
			if at, _, ok := FindValidRecord(b, int64(SegmentHeaderSize+3*recLen), start); !ok || at != int64(SegmentHeaderSize+3*recLen) {
				t.Errorf("FindValidRecord(minLSN %d) = %d, %v, want the record at %d", start, at, ok, SegmentHeaderSize+3*recLen)
			}
		})
	}
}
