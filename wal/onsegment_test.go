package wal

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// TestOnSegment: the hook sees the first LSN of every segment the log
// creates, in order, once the segment is in place and before any record
// is in it; an error from it fails the write that needed the segment, and
// the log.
func TestOnSegment(t *testing.T) {
	mem := NewMemFS()
	var firsts []uint64
	hook := func(first uint64) error {
		b, err := mem.ReadFile(filepath.Join(testDir, SegmentName(first)))
		if err != nil {
			t.Errorf("OnSegment(%d): the segment is not there: %v", first, err)
		} else if len(b) != SegmentHeaderSize {
			t.Errorf("OnSegment(%d): the segment holds %d bytes, want its header alone", first, len(b))
		}
		firsts = append(firsts, first)
		return nil
	}
	l := mustOpen(t, mem, Options{SegmentSize: 4 << 10, OnSegment: hook})
	for lsn := uint64(1); lsn <= 200; lsn++ {
		if _, err := l.Append(payloadFor(0, lsn)); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(lsn); err != nil {
			t.Fatal(err)
		}
	}
	var want []uint64
	for _, s := range l.Segments() {
		want = append(want, s.FirstLSN)
	}
	if len(want) < 3 || !slices.Equal(firsts, want) {
		t.Fatalf("OnSegment saw %v, the segments start at %v", firsts, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	boom := errors.New("boom")
	l = mustOpen(t, mem, Options{SegmentSize: 4 << 10, OnSegment: func(uint64) error { return boom }})
	lsn, err := l.Append(payloadFor(0, 201)) // the first append after Open starts a segment
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(lsn); !errors.Is(err, boom) {
		t.Fatalf("WaitDurable of a record whose segment's OnSegment failed: %v, want it", err)
	}
	if _, err := l.Append(payloadFor(0, 202)); !errors.Is(err, boom) {
		t.Fatalf("Append after: %v, want the log's error", err)
	}
	l.Close()
}
