package wal

import (
	"fmt"
	"testing"
)

func TestStartSegmentLetsTruncateDeleteEverything(t *testing.T) {
	fs := NewMemFS()
	l, err := Open("w", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StartSegment(); err != nil { // empty: nothing to do
		t.Fatal(err)
	}
	last, err := l.Append([]byte("a"), []byte("b"), []byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StartSegment(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateBefore(last + 1); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Segments != 1 || l.FirstLSN() != last+1 {
		t.Fatalf("after StartSegment+TruncateBefore: %d segments, first LSN %d, want 1 and %d", st.Segments, l.FirstLSN(), last+1)
	}
	next, err := l.Append([]byte("d"))
	if err != nil || next != last+1 {
		t.Fatalf("append after: lsn %d, %v; want %d", next, err, last+1)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open("w", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var got []string
	l.Replay(1, func(lsn uint64, p []byte) error { got = append(got, fmt.Sprintf("%d:%s", lsn, p)); return nil })
	if want := fmt.Sprintf("%d:d", last+1); len(got) != 1 || got[0] != want {
		t.Fatalf("after reopen: %v, want [%s]", got, want)
	}
}
