package blackbox_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/filterstore/filterstore/bitmap"
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/wal"
)

// wal: LSNs start at 1 and go up by 1; Append with no payload returns
// LastLSN; FirstLSN of an empty log is LastLSN()+1; an oversized payload
// fails the whole call with ErrInvalid; after Close every method that can
// fail returns ErrClosed, Close included; Replay visits records in order.
func TestWALBasics(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{})
	must(t, err)
	if l.LastLSN() != 0 || l.FirstLSN() != 1 {
		t.Errorf("empty log: LastLSN %d FirstLSN %d", l.LastLSN(), l.FirstLSN())
	}
	if n, err := l.Append(); err != nil || n != 0 {
		t.Errorf("Append() = %d, %v", n, err)
	}
	last, err := l.Append([]byte("a"), []byte{}, []byte("c"))
	must(t, err)
	if last != 3 {
		t.Errorf("last LSN %d, want 3", last)
	}
	_, err = l.Append([]byte("ok"), make([]byte, wal.MaxRecordSize+1))
	wantIs(t, "oversized Append", err, wal.ErrInvalid)
	if l.LastLSN() != 3 {
		t.Errorf("failed Append moved LastLSN to %d", l.LastLSN())
	}
	must(t, l.WaitDurable(3))
	if l.DurableLSN() < 3 {
		t.Errorf("DurableLSN %d", l.DurableLSN())
	}
	must(t, l.Close())
	wantIs(t, "Close twice", l.Close(), wal.ErrClosed)
	_, err = l.Append([]byte("x"))
	wantIs(t, "Append after Close", err, wal.ErrClosed)
	wantIs(t, "Sync after Close", l.Sync(), wal.ErrClosed)

	l, err = wal.Open(dir, wal.Options{})
	must(t, err)
	defer l.Close()
	var got []string
	must(t, l.Replay(1, func(lsn uint64, p []byte) error {
		got = append(got, sprintf("%d:%s", lsn, p))
		return nil
	}))
	if sprintf("%v", got) != "[1:a 2: 3:c]" {
		t.Errorf("replay %v", got)
	}
	stop := errors.New("stop")
	if err := l.Replay(1, func(uint64, []byte) error { return stop }); err != stop {
		t.Errorf("Replay error not returned as is: %v", err)
	}
}

// wal Options: "Invalid options give an error wrapping ErrInvalid that lists
// every problem".
func TestWALOptions(t *testing.T) {
	for _, o := range []wal.Options{
		{SegmentSize: 1},
		{SegmentSize: wal.MaxSegmentSize + 1},
		{SyncEvery: -1},
		{SyncEvery: 2 * time.Hour},
		{Sync: wal.SyncMode(7)},
	} {
		l, err := wal.Open(t.TempDir(), o)
		if err == nil {
			l.Close()
			t.Errorf("wal.Open accepted %+v", o)
			continue
		}
		wantIs(t, sprintf("wal.Open(%+v)", o), err, wal.ErrInvalid)
	}
}

// wal torn tail: garbage after the last record is truncated by Open; a
// Reader reports a cut record as ErrTorn and a clean end as io.EOF.
func TestWALTornTail(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{})
	must(t, err)
	_, err = l.Append([]byte("one"), []byte("two"))
	must(t, err)
	must(t, l.Close())
	seg := filepath.Join(dir, wal.SegmentName(1))
	before, _ := os.ReadFile(seg)
	f, _ := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{9, 0, 0, 0, 1, 2}) // a record header cut short
	f.Close()
	l, err = wal.Open(dir, wal.Options{})
	must(t, err)
	if l.LastLSN() != 2 {
		t.Errorf("after torn tail LastLSN %d", l.LastLSN())
	}
	l.Close()
	after, _ := os.ReadFile(seg)
	if len(after) != len(before) {
		t.Errorf("torn tail not truncated: %d bytes, was %d", len(after), len(before))
	}
	rec := wal.AppendRecord(nil, 1, []byte("payload"))
	r := wal.NewReader(bytes.NewReader(rec[:len(rec)-1]))
	_, _, err = r.Next()
	wantIs(t, "cut record", err, wal.ErrTorn)
	r = wal.NewReader(bytes.NewReader(rec))
	lsn, p, err := r.Next()
	if err != nil || lsn != 1 || string(p) != "payload" {
		t.Errorf("Next = %d %q %v", lsn, p, err)
	}
	if _, _, err := r.Next(); err == nil || err.Error() != "EOF" {
		t.Errorf("clean end: %v, want io.EOF", err)
	}
	bad := bytes.Clone(rec)
	bad[len(bad)-1] ^= 1
	_, _, err = wal.NewReader(bytes.NewReader(bad)).Next()
	wantIs(t, "bad CRC", err, wal.ErrTorn)
	if n, ok := wal.ParseSegmentName(wal.SegmentName(4097)); !ok || n != 4097 || wal.SegmentName(4097) != "00000000000000004097.log" {
		t.Errorf("segment names: %q %d %v", wal.SegmentName(4097), n, ok)
	}
	if _, ok := wal.ParseSegmentName("x.log"); ok {
		t.Error("ParseSegmentName accepted x.log")
	}
}

// bloom.Plan: "Errors wrap ErrInvalid: capacity 0, errorRate not in (0, 1)
// (NaN included)".
func TestBloomPlanErrors(t *testing.T) {
	for _, c := range []struct {
		n uint64
		p float64
	}{{0, 0.01}, {10, 0}, {10, 1}, {10, math.NaN()}, {10, -1}} {
		if _, err := bloom.Plan(c.n, c.p); !errors.Is(err, bloom.ErrInvalid) {
			t.Errorf("Plan(%d, %g): %v", c.n, c.p, err)
		}
	}
	g, err := bloom.Plan(1000, 0.01)
	must(t, err)
	f, err := bloom.New(g, nil)
	must(t, err)
	if !f.Add([]byte("a")) || f.Add([]byte("a")) || !f.Has([]byte("a")) || f.Count() != 1 {
		t.Error("bloom.Filter Add/Has/Count")
	}
}

// cuckoo.Plan and Filter: Insert, Count, Delete; bad geometry ErrInvalid.
func TestCuckooPackage(t *testing.T) {
	if _, err := cuckoo.Plan(0, 4, 16); err == nil {
		t.Log("cuckoo.Plan(0, 4, 16) accepted")
	}
	for _, c := range [][2]int{{17, 4}, {4, 17}, {4, 3}, {8, 16}} {
		if _, err := cuckoo.Plan(100, c[0], c[1]); err == nil {
			t.Errorf("cuckoo.Plan(100, %d, %d) accepted", c[0], c[1])
		}
	}
	g, err := cuckoo.Plan(1000, 4, 16)
	must(t, err)
	f, err := cuckoo.New(g, nil)
	must(t, err)
	must(t, f.Insert([]byte("a")))
	if !f.Has([]byte("a")) || f.Count() != 1 {
		t.Error("Insert/Has/Count")
	}
	if !f.Delete([]byte("a")) || f.Has([]byte("a")) {
		t.Error("Delete")
	}
}

// bitmap: New(0) ErrInvalid; CountRange bounds; And/Or of different sizes
// ErrInvalid; Count clamps.
func TestBitmapPackage(t *testing.T) {
	if _, err := bitmap.New(0, nil); !errors.Is(err, bitmap.ErrInvalid) {
		t.Errorf("New(0): %v", err)
	}
	if _, err := bitmap.New(100, make([]uint64, 1)); !errors.Is(err, bitmap.ErrInvalid) {
		t.Errorf("New(100, 1 word): %v", err)
	}
	b, err := bitmap.New(100, nil)
	must(t, err)
	b.Set(3)
	b.Set(64)
	b.Set(99)
	if n, err := b.CountRange(0, 100); err != nil || n != 3 {
		t.Errorf("CountRange(0,100) = %d %v", n, err)
	}
	if n, err := b.CountRange(4, 99); err != nil || n != 1 {
		t.Errorf("CountRange(4,99) = %d %v", n, err)
	}
	if _, err := b.CountRange(0, 101); !errors.Is(err, bitmap.ErrInvalid) {
		t.Errorf("CountRange past end: %v", err)
	}
	if _, err := b.CountRange(50, 10); !errors.Is(err, bitmap.ErrInvalid) {
		t.Errorf("CountRange from > to: %v", err)
	}
	o, _ := bitmap.New(101, nil)
	if err := b.And(o); !errors.Is(err, bitmap.ErrInvalid) {
		t.Errorf("And of different sizes: %v", err)
	}
	if bitmap.Words(0) != 0 || bitmap.Words(1) != 1 || bitmap.Words(64) != 1 || bitmap.Words(65) != 2 {
		t.Error("Words")
	}
	// Bit layout: bit off is bit off%64 of word off/64.
	if b.Words()[1] != 1|1<<35 || b.Words()[0] != 8 {
		t.Errorf("layout: words %x", b.Words())
	}
	b.SetCount(1000)
	if b.Count() != 100 {
		t.Errorf("Count after SetCount(1000) = %d, want clamped 100", b.Count())
	}
	if b.Recount() != 3 {
		t.Error("Recount")
	}
}
