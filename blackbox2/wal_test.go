package blackbox2_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/wal"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func memOpts(fs *wal.MemFS) wal.Options { return wal.Options{FS: fs, Logger: quiet} }

func openMem(t *testing.T, fs *wal.MemFS, o wal.Options) *wal.Log {
	t.Helper()
	o.FS = fs
	if o.Logger == nil {
		o.Logger = quiet
	}
	l, err := wal.Open("/w", o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func replayAll(t *testing.T, l *wal.Log, from uint64) (lsns []uint64, ps []string) {
	t.Helper()
	must(t, l.Replay(from, func(lsn uint64, p []byte) error {
		lsns = append(lsns, lsn)
		ps = append(ps, string(p))
		return nil
	}))
	return
}

// TestWALBasicsMem checks the package doc: "LSNs start at 1 and increase by
// exactly 1", Append's "With no payload it returns LastLSN()", LastLSN "0 if
// the log never held a record", FirstLSN "For an empty log it is
// LastLSN()+1", "a zero-length payload is a valid record", Replay's range,
// and the segment name "%020d.log".
func TestWALBasicsMem(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	if l.LastLSN() != 0 || l.FirstLSN() != 1 {
		t.Errorf("empty log: Last %d First %d", l.LastLSN(), l.FirstLSN())
	}
	if n, err := l.Append(); n != 0 || err != nil {
		t.Errorf("Append() = %d %v", n, err)
	}
	last, err := l.Append([]byte("a"), nil, []byte("ccc"))
	if last != 3 || err != nil {
		t.Fatalf("Append = %d %v", last, err)
	}
	must(t, l.WaitDurable(3))
	if l.DurableLSN() != 3 {
		t.Errorf("DurableLSN %d", l.DurableLSN())
	}
	lsns, ps := replayAll(t, l, 2)
	if len(lsns) != 2 || lsns[0] != 2 || ps[0] != "" || ps[1] != "ccc" {
		t.Errorf("Replay(2) = %v %q", lsns, ps)
	}
	names, _ := fs.List("/w")
	if len(names) != 1 || names[0] != "00000000000000000001.log" {
		t.Errorf("segments %v", names)
	}
	if err := l.WaitDurable(4); !errors.Is(err, wal.ErrInvalid) {
		t.Errorf("WaitDurable(4) of an unappended record: %v", err)
	}
	must(t, l.Close())
	l = openMem(t, fs, wal.Options{})
	defer l.Close()
	if l.LastLSN() != 3 || l.FirstLSN() != 1 {
		t.Errorf("reopened: Last %d First %d", l.LastLSN(), l.FirstLSN())
	}
	if n, _ := l.Append([]byte("d")); n != 4 {
		t.Errorf("next LSN %d", n)
	}
}

// TestWALAppendTooLarge checks "A payload longer than MaxRecordSize fails the
// whole call with ErrInvalid" (no LSN consumed).
func TestWALAppendTooLarge(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	defer l.Close()
	_, err := l.Append([]byte("ok"), make([]byte, wal.MaxRecordSize+1))
	wantIs(t, "Append too large", err, wal.ErrInvalid)
	if l.LastLSN() != 0 {
		t.Errorf("LastLSN %d after a refused Append", l.LastLSN())
	}
	if n, err := l.Append(make([]byte, wal.MaxRecordSize)); n != 1 || err != nil {
		t.Errorf("Append of MaxRecordSize: %d %v", n, err)
	}
}

// TestWALClosed checks "Every method called afterwards that can fail returns
// ErrClosed, Close (and CloseUntrimmed) included".
func TestWALClosed(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	l.Append([]byte("x"))
	must(t, l.Close())
	checks := map[string]func() error{
		"Append":           func() error { _, err := l.Append([]byte("y")); return err },
		"Sync":             l.Sync,
		"Close":            l.Close,
		"CloseUntrimmed":   l.CloseUntrimmed,
		"StartSegment":     l.StartSegment,
		"TruncateBefore":   func() error { return l.TruncateBefore(1) },
		"SetNextLSN":       func() error { return l.SetNextLSN(100) },
		"Replay":           func() error { return l.Replay(1, func(uint64, []byte) error { return nil }) },
		"RewriteInherited": func() error { return l.RewriteInherited(0) },
		"WaitDurable(5)":   func() error { return l.WaitDurable(5) },
	}
	for name, f := range checks {
		var err error
		noPanic(t, name, func() { err = f() })
		wantIs(t, name+" after Close", err, wal.ErrClosed)
	}
	if err := l.WaitWritten(1); err != nil {
		t.Errorf("WaitWritten of a record written before Close: %v (doc: nil)", err)
	}
}

// TestWALOptionsInvalid checks "Invalid options give an error wrapping
// ErrInvalid that lists every problem", with SegmentSize's range
// "[MinSegmentSize, MaxSegmentSize]", SyncEvery "must be >= 0 ... and at most
// an hour", and an unknown Sync mode.
func TestWALOptionsInvalid(t *testing.T) {
	fs := wal.NewMemFS()
	for _, o := range []wal.Options{{SegmentSize: wal.MinSegmentSize - 1}, {SegmentSize: wal.MaxSegmentSize + 1},
		{SyncEvery: -1}, {SyncEvery: time.Hour + 1}, {Sync: wal.SyncMode(7)}, {SegmentSize: -5}} {
		o.FS = fs
		o.Logger = quiet
		var err error
		noPanic(t, "Open", func() { _, err = wal.Open("/w", o) })
		wantIs(t, sprintf("Open(%+v)", o), err, wal.ErrInvalid)
	}
	_, err := wal.Open("/w", wal.Options{FS: fs, Logger: quiet, SegmentSize: 1, SyncEvery: -1, Sync: 9})
	if err == nil || !strings.Contains(err.Error(), "SegmentSize") || !strings.Contains(err.Error(), "SyncEvery") || !strings.Contains(err.Error(), "Sync") {
		t.Errorf("error does not list every problem: %v", err)
	}
	if _, err := wal.Open("/w", wal.Options{FS: fs, Logger: quiet, SegmentSize: wal.MinSegmentSize, SyncEvery: time.Hour}); err != nil {
		t.Errorf("boundary options refused: %v", err)
	}
	if wal.SyncAlways.String() != "SyncAlways" || wal.SyncInterval.String() != "SyncInterval" {
		t.Error("SyncMode strings")
	}
}

// TestWALSegmentsAndTruncate checks SegmentSize rotation ("a batch that would
// take the last segment past it goes to a new one"), OnSegment ("called with
// the first LSN of each segment the log creates"), Segments, TruncateBefore
// ("deletes the segments all of whose records are below lsn ... never the
// last (active) segment") and FirstLSN.
func TestWALSegmentsAndTruncate(t *testing.T) {
	fs := wal.NewMemFS()
	var created []uint64
	l := openMem(t, fs, wal.Options{SegmentSize: wal.SegmentHeaderSize + 3*(wal.RecordHeaderSize+4), OnSegment: func(first uint64) error {
		created = append(created, first)
		return nil
	}})
	defer l.Close()
	for i := range 10 {
		if _, err := l.Append([]byte(sprintf("r%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	must(t, l.Sync())
	segs := l.Segments()
	if len(segs) != 4 {
		t.Fatalf("segments %+v", segs)
	}
	wantFirst := []uint64{1, 4, 7, 10}
	for i, s := range segs {
		if s.FirstLSN != wantFirst[i] || s.Name != wal.SegmentName(wantFirst[i]) {
			t.Errorf("segment %d = %+v", i, s)
		}
	}
	if len(created) != 4 || created[0] != 1 || created[3] != 10 {
		t.Errorf("OnSegment calls %v", created)
	}
	if l.Stats().Segments != 4 {
		t.Errorf("Stats.Segments %d", l.Stats().Segments)
	}
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	if l.Size() != total {
		t.Errorf("Size %d, segments sum %d", l.Size(), total)
	}
	must(t, l.TruncateBefore(8))
	if l.FirstLSN() != 7 || len(l.Segments()) != 2 {
		t.Errorf("after TruncateBefore(8): First %d, %d segments", l.FirstLSN(), len(l.Segments()))
	}
	must(t, l.TruncateBefore(1000))
	if len(l.Segments()) != 1 || l.FirstLSN() != 10 {
		t.Errorf("TruncateBefore(1000): %d segments, First %d (active segment must stay)", len(l.Segments()), l.FirstLSN())
	}
	lsns, _ := replayAll(t, l, 1)
	if len(lsns) != 1 || lsns[0] != 10 {
		t.Errorf("Replay(1) after truncation %v", lsns)
	}
}

// TestWALStartSegment checks StartSegment: "makes the next record start a new
// segment ... does nothing if the active segment holds no record".
func TestWALStartSegment(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	defer l.Close()
	must(t, l.StartSegment())
	if len(l.Segments()) != 1 {
		t.Errorf("StartSegment on an empty segment made %d", len(l.Segments()))
	}
	l.Append([]byte("a"))
	must(t, l.StartSegment())
	must(t, l.StartSegment())
	l.Append([]byte("b"))
	must(t, l.Sync())
	segs := l.Segments()
	if len(segs) != 2 || segs[1].FirstLSN != 2 {
		t.Errorf("segments after StartSegment %+v", segs)
	}
	must(t, l.TruncateBefore(2))
	if l.FirstLSN() != 2 {
		t.Errorf("FirstLSN %d", l.FirstLSN())
	}
}

// TestWALSetNextLSN checks SetNextLSN: "if that is beyond LastLSN()+1;
// otherwise it does nothing, so LSNs never go backwards. Moving forward ...
// deletes every segment ... and starts an empty segment at next", and
// "Append and SetNextLSN refuse to go past" MaxLSN.
func TestWALSetNextLSN(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	l.Append([]byte("a"), []byte("b"))
	must(t, l.SetNextLSN(2))
	must(t, l.SetNextLSN(3))
	if n, _ := l.Append([]byte("c")); n != 3 {
		t.Errorf("after SetNextLSN(2/3) next LSN %d", n)
	}
	must(t, l.SetNextLSN(100))
	if n, _ := l.Append([]byte("d")); n != 100 {
		t.Errorf("after SetNextLSN(100) next LSN %d", n)
	}
	lsns, _ := replayAll(t, l, 1)
	if len(lsns) != 1 || lsns[0] != 100 || l.FirstLSN() != 100 {
		t.Errorf("records after SetNextLSN %v, First %d", lsns, l.FirstLSN())
	}
	names, _ := fs.List("/w")
	if len(names) != 1 || names[0] != wal.SegmentName(100) {
		t.Errorf("files %v", names)
	}
	var err error
	noPanic(t, "SetNextLSN", func() { err = l.SetNextLSN(wal.MaxLSN + 1); err = l.SetNextLSN(wal.MaxLSN + 1) })
	if err == nil {
		t.Error("SetNextLSN past MaxLSN+1 accepted")
	}
	must(t, l.Close())
	l = openMem(t, fs, wal.Options{})
	defer l.Close()
	must(t, l.SetNextLSN(wal.MaxLSN))
	if n, err := l.Append([]byte("last")); n != wal.MaxLSN || err != nil {
		t.Errorf("Append at MaxLSN: %d %v", n, err)
	}
	noPanic(t, "Append past MaxLSN", func() { _, err = l.Append([]byte("beyond")) })
	if err == nil {
		t.Error("Append past MaxLSN accepted")
	}
}

// TestWALTornTailTruncated checks "Open treats a torn record at the tail of
// the last segment as the end of the log: it truncates the segment there",
// while Scan reports it as SegmentInfo.Tail without changing anything.
func TestWALTornTailTruncated(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	l.Append([]byte("one"), []byte("two"))
	must(t, l.Close())
	name := "/w/" + wal.SegmentName(1)
	data, _ := fs.ReadFile(name)
	good := len(data)
	torn := wal.AppendRecord(nil, 3, []byte("three"))
	fs.WriteFile(name, append(data, torn[:len(torn)-2]...))
	res, err := wal.Scan("/w", wal.ScanOptions{FS: fs}, nil)
	must(t, err)
	if res.Next != 3 || len(res.Segments) != 1 || res.Segments[0].Tail == nil || res.Segments[0].Tail.Offset != int64(good) {
		t.Errorf("Scan result %+v tail %+v", res, res.Segments[0].Tail)
	}
	if d, _ := fs.ReadFile(name); len(d) != good+len(torn)-2 {
		t.Error("Scan changed the file")
	}
	l = openMem(t, fs, wal.Options{})
	defer l.Close()
	if l.LastLSN() != 2 {
		t.Errorf("LastLSN %d after torn tail", l.LastLSN())
	}
	if d, _ := fs.ReadFile(name); len(d) != good {
		t.Errorf("Open left %d bytes, want truncation to %d", len(d), good)
	}
}

// TestWALMidCorruption checks "an invalid record followed by a valid one with
// no page of zeros between them" is ErrCorrupt, a *CorruptError naming "the
// segment file and byte offset", and that "a log it rejects is left exactly
// as it was found".
func TestWALMidCorruption(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	l.Append([]byte("one"), []byte("two"), []byte("three"))
	must(t, l.Close())
	name := "/w/" + wal.SegmentName(1)
	data, _ := fs.ReadFile(name)
	off := wal.SegmentHeaderSize + wal.RecordHeaderSize + 3 // second record
	data[off+wal.RecordHeaderSize] ^= 0xFF                  // flip a payload byte of "two"
	fs.WriteFile(name, data)
	_, err := wal.Open("/w", memOpts(fs))
	var ce *wal.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open: %v, want *CorruptError", err)
	}
	if ce.Segment != wal.SegmentName(1) || ce.Offset != int64(off) {
		t.Errorf("CorruptError %+v, want segment %s offset %d", ce, wal.SegmentName(1), off)
	}
	if want := sprintf("wal: segment %s offset %d: %s", ce.Segment, ce.Offset, ce.Reason); ce.Error() != want {
		t.Errorf("Error() = %q, want %q", ce.Error(), want)
	}
	if d, _ := fs.ReadFile(name); !bytes.Equal(d, data) {
		t.Error("rejected log changed")
	}
	res, err := wal.Scan("/w", wal.ScanOptions{FS: fs, KeepGoing: true}, nil)
	if err != nil || len(res.Problems) == 0 {
		t.Errorf("Scan KeepGoing: err %v problems %v", err, res.Problems)
	}
	var seen []uint64
	wal.Scan("/w", wal.ScanOptions{FS: fs, KeepGoing: true}, func(p wal.Position, _ []byte) error { seen = append(seen, p.LSN); return nil })
	if len(seen) != 2 || seen[1] != 3 {
		t.Errorf("KeepGoing visited %v, want [1 3]", seen)
	}
}

// TestWALStoreID checks "a log opened with a non-zero StoreID rejects a
// segment carrying another non-zero one" and "Segments with ID 0 ... are
// accepted".
func TestWALStoreID(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{StoreID: 7})
	l.Append([]byte("a"))
	must(t, l.Close())
	_, err := wal.Open("/w", wal.Options{FS: fs, Logger: quiet, StoreID: 8})
	wantIs(t, "Open with another StoreID", err, wal.ErrCorrupt)
	l, err = wal.Open("/w", wal.Options{FS: fs, Logger: quiet})
	must(t, err)
	l.Close()
	fs2 := wal.NewMemFS()
	l = openMem(t, fs2, wal.Options{})
	l.Append([]byte("a"))
	l.Close()
	l, err = wal.Open("/w", wal.Options{FS: fs2, Logger: quiet, StoreID: 9})
	if err != nil {
		t.Errorf("segment with ID 0 refused: %v", err)
	} else {
		l.Close()
	}
	_, err = wal.Scan("/w", wal.ScanOptions{FS: fs, StoreID: 3}, nil)
	wantIs(t, "Scan with another StoreID", err, wal.ErrCorrupt)
}

// TestWALCheckOption checks Options.Check: "If it returns an error, Open fails
// with that error (wrapped: errors.Is and errors.As see it) and leaves every
// file as it found it".
func TestWALCheckOption(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	l.Append([]byte("a"), []byte("b"))
	l.Close()
	name := "/w/" + wal.SegmentName(1)
	data, _ := fs.ReadFile(name)
	fs.WriteFile(name, append(data, 1, 2, 3)) // a torn tail Open would cut
	fs.WriteFile("/w/"+wal.SegmentName(5)+".tmp", []byte("junk"))
	bad := errors.New("check says no")
	var seen []uint64
	_, err := wal.Open("/w", wal.Options{FS: fs, Logger: quiet, Check: func(lsn uint64, p []byte) error {
		seen = append(seen, lsn)
		if lsn == 2 {
			return bad
		}
		return nil
	}})
	if !errors.Is(err, bad) {
		t.Errorf("Open: %v", err)
	}
	if len(seen) != 2 {
		t.Errorf("Check saw %v", seen)
	}
	if d, _ := fs.ReadFile(name); len(d) != len(data)+3 {
		t.Error("torn tail truncated although Check failed")
	}
	if _, err := fs.ReadFile("/w/" + wal.SegmentName(5) + ".tmp"); err != nil {
		t.Error("tmp file removed although Check failed")
	}
	l = openMem(t, fs, wal.Options{})
	l.Close()
	if _, err := fs.ReadFile("/w/" + wal.SegmentName(5) + ".tmp"); err == nil {
		t.Error("Open left the .tmp file (doc: removed by Open)")
	}
}

// TestWALSyncFailureSticky checks "A failed write or fdatasync is sticky
// (Log.Err): the log refuses further appends", via MemFS's injector.
func TestWALSyncFailureSticky(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	defer l.Close()
	l.Append([]byte("ok"))
	must(t, l.WaitDurable(1))
	boom := errors.New("disk on fire")
	fs.SetInjector(func(op wal.Op, name string) error {
		if op == wal.OpSync {
			return boom
		}
		return nil
	})
	n, _ := l.Append([]byte("lost"))
	err := l.WaitDurable(n)
	if !errors.Is(err, boom) {
		t.Errorf("WaitDurable: %v", err)
	}
	fs.SetInjector(nil)
	if !errors.Is(l.Err(), boom) {
		t.Errorf("Err() = %v", l.Err())
	}
	if _, err := l.Append([]byte("after")); err == nil {
		t.Error("Append after a failed sync accepted")
	}
	if err := l.Sync(); err == nil {
		t.Error("Sync after failure returned nil")
	}
	if l.DurableLSN() != 1 {
		t.Errorf("DurableLSN %d", l.DurableLSN())
	}
	if wal.OpSync.String() != "sync" || wal.OpAllocate.String() != "allocate" {
		t.Errorf("Op strings %q %q", wal.OpSync, wal.OpAllocate)
	}
}

// TestWALCrashKeepsDurable checks MemFS.Crash and SyncAlways: "an
// acknowledged record survives power loss", and Kill: "every file's current
// contents ... survive", for many random crashes.
func TestWALCrashKeepsDurable(t *testing.T) {
	for seed := range 30 {
		fs := wal.NewMemFS()
		l := openMem(t, fs, wal.Options{SegmentSize: 200})
		var acked uint64
		for i := range 20 {
			n, err := l.Append([]byte(sprintf("rec-%d", i)))
			must(t, err)
			if i%3 == 0 {
				must(t, l.WaitDurable(n))
				acked = n
			}
		}
		crashed := fs.Crash(rand.New(rand.NewPCG(uint64(seed), 1)))
		killed := fs.Kill()
		l.Close()
		l2, err := wal.Open("/w", memOpts(crashed))
		if err != nil {
			t.Fatalf("seed %d: Open after crash: %v", seed, err)
		}
		if l2.LastLSN() < acked {
			t.Errorf("seed %d: crash lost acknowledged records: last %d < acked %d", seed, l2.LastLSN(), acked)
		}
		lsns, ps := replayAll(t, l2, 1)
		for i, lsn := range lsns {
			if ps[i] != sprintf("rec-%d", lsn-1) {
				t.Errorf("seed %d: record %d = %q", seed, lsn, ps[i])
			}
		}
		l2.Close()
		l3, err := wal.Open("/w", memOpts(killed))
		must(t, err)
		if l3.LastLSN() < acked {
			t.Errorf("seed %d: Kill lost records: last %d", seed, l3.LastLSN())
		}
		l3.Close()
	}
}

// TestWALSyncInterval checks SyncInterval: WaitDurable waits "only until the
// record has been written to the OS (it survives a process crash)", OnSync
// is "called after each fdatasync that advanced DurableLSN, with the new
// value, in increasing order", WaitSynced.
func TestWALSyncInterval(t *testing.T) {
	fs := wal.NewMemFS()
	var got []uint64
	l := openMem(t, fs, wal.Options{Sync: wal.SyncInterval, SyncEvery: 5 * time.Millisecond, OnSync: func(d uint64) { got = append(got, d) }})
	n, _ := l.Append([]byte("a"), []byte("b"))
	must(t, l.WaitDurable(n))
	killed := fs.Kill()
	must(t, l.WaitSynced(n))
	if l.DurableLSN() < n {
		t.Errorf("DurableLSN %d after WaitSynced", l.DurableLSN())
	}
	l.Close()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Errorf("OnSync not increasing: %v", got)
		}
	}
	if len(got) == 0 || got[len(got)-1] != n {
		t.Errorf("OnSync calls %v", got)
	}
	l2, err := wal.Open("/w", memOpts(killed))
	must(t, err)
	defer l2.Close()
	if l2.LastLSN() != n {
		t.Errorf("after Kill LastLSN %d, want %d", l2.LastLSN(), n)
	}
}

// TestWALReaderAndRecord checks the record framing "length u32 | CRC-32C u32 |
// LSN u64 | payload", "The CRC is CRC-32C over bytes [0, 4) (length) followed
// by bytes [8, 16+length)", Reader.Next's io.EOF at a clean end and ErrTorn
// for a cut record, a bad CRC, LSN 0 and a too-long length; AppendRecord's
// documented panics.
func TestWALReaderAndRecord(t *testing.T) {
	rec := wal.AppendRecord(nil, 42, []byte("hello"))
	if len(rec) != 16+5 || binary.LittleEndian.Uint32(rec) != 5 || binary.LittleEndian.Uint64(rec[8:]) != 42 {
		t.Fatalf("record % x", rec)
	}
	c := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	c.Write(rec[:4])
	c.Write(rec[8:])
	if c.Sum32() != binary.LittleEndian.Uint32(rec[4:]) {
		t.Error("CRC not as documented")
	}
	two := wal.AppendRecord(rec, 43, nil)
	r := wal.NewReader(bytes.NewReader(two))
	lsn, p, err := r.Next()
	if lsn != 42 || string(p) != "hello" || err != nil || r.Offset() != 0 {
		t.Errorf("Next = %d %q %v off %d", lsn, p, err, r.Offset())
	}
	lsn, p, err = r.Next()
	if lsn != 43 || len(p) != 0 || err != nil || r.Offset() != 21 {
		t.Errorf("Next = %d %q %v off %d", lsn, p, err, r.Offset())
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Errorf("clean end: %v", err)
	}
	bad := func(name string, b []byte) {
		_, _, err := wal.NewReader(bytes.NewReader(b)).Next()
		if !errors.Is(err, wal.ErrTorn) {
			t.Errorf("%s: %v, want ErrTorn", name, err)
		}
	}
	bad("cut header", rec[:7])
	bad("cut payload", rec[:18])
	flip := append([]byte(nil), rec...)
	flip[20] ^= 1
	bad("bad CRC", flip)
	zero := make([]byte, 32)
	bad("zeros", zero)
	huge := append([]byte(nil), rec...)
	binary.LittleEndian.PutUint32(huge, wal.MaxRecordSize+1)
	bad("length > MaxRecordSize", huge)
	for name, f := range map[string]func(){"lsn 0": func() { wal.AppendRecord(nil, 0, nil) }, "lsn > MaxLSN": func() { wal.AppendRecord(nil, wal.MaxLSN+1, nil) },
		"too long": func() { wal.AppendRecord(nil, 1, make([]byte, wal.MaxRecordSize+1)) }} {
		if !panics(f) {
			t.Errorf("AppendRecord %s did not panic", name)
		}
	}
}

// TestWALSegmentHeader checks the drawn version-2 header "magic | version u32
// = 2 | first LSN u64 | store ID u64 | CRC-32C u32" (CRC of bytes [0, 28)),
// ParseSegmentHeader's errors ("a *CorruptError ... with Offset 0 and Segment
// "" ... whose Reason says which check failed", Error() "wal: offset
// <Offset>: <Reason>"), version 1, and the segment name functions.
func TestWALSegmentHeader(t *testing.T) {
	h := wal.AppendSegmentHeader(nil, 77, 0xABCD)
	if len(h) != 32 || string(h[:8]) != "FSWALSEG" || binary.LittleEndian.Uint32(h[8:]) != 2 ||
		binary.LittleEndian.Uint64(h[12:]) != 77 || binary.LittleEndian.Uint64(h[20:]) != 0xABCD ||
		binary.LittleEndian.Uint32(h[28:]) != crc32.Checksum(h[:28], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("header % x", h)
	}
	sh, err := wal.ParseSegmentHeader(append(h, 1, 2, 3))
	if err != nil || sh.Version != 2 || sh.FirstLSN != 77 || sh.StoreID != 0xABCD || sh.Size != 32 {
		t.Errorf("ParseSegmentHeader = %+v %v", sh, err)
	}
	v1 := []byte("FSWALSEG")
	v1 = binary.LittleEndian.AppendUint32(v1, 1)
	v1 = binary.LittleEndian.AppendUint64(v1, 5)
	v1 = binary.LittleEndian.AppendUint32(v1, crc32.Checksum(v1, crc32.MakeTable(crc32.Castagnoli)))
	sh, err = wal.ParseSegmentHeader(v1)
	if err != nil || sh.Version != 1 || sh.FirstLSN != 5 || sh.StoreID != 0 || sh.Size != 24 {
		t.Errorf("v1 header = %+v %v", sh, err)
	}
	for name, b := range map[string][]byte{
		"empty": nil, "short": h[:20], "magic": append([]byte("XSWALSEG"), h[8:]...),
		"version": func() []byte { c := append([]byte(nil), h...); c[8] = 3; return c }(),
		"crc":     func() []byte { c := append([]byte(nil), h...); c[13] ^= 1; return c }(),
		"lsn0":    fixCRC(wal.AppendSegmentHeader(nil, 1, 0), func(c []byte) { binary.LittleEndian.PutUint64(c[12:], 0) }),
		"lsnMax":  fixCRC(wal.AppendSegmentHeader(nil, 1, 0), func(c []byte) { binary.LittleEndian.PutUint64(c[12:], wal.MaxLSN+1) }),
	} {
		var err error
		noPanic(t, "ParseSegmentHeader "+name, func() { _, err = wal.ParseSegmentHeader(b) })
		var ce *wal.CorruptError
		if !errors.As(err, &ce) || ce.Offset != 0 || ce.Segment != "" || ce.Reason == "" {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if ce.Error() != "wal: offset 0: "+ce.Reason {
			t.Errorf("%s: Error() = %q", name, ce.Error())
		}
	}
	if wal.SegmentName(4097) != "00000000000000004097.log" {
		t.Error(wal.SegmentName(4097))
	}
	for name, want := range map[string]bool{"00000000000000004097.log": true, "4097.log": false, "00000000000000004097.log.tmp": false,
		"0000000000000000409x.log": false, "00000000000000000000.log": false, "99999999999999999999.log": false, "18446744073709551615.log": false,
		"18446744073709551614.log": true, "+0000000000000004097.log": false} {
		var ok bool
		noPanic(t, "ParseSegmentName", func() { _, ok = wal.ParseSegmentName(name) })
		if ok != want {
			t.Errorf("ParseSegmentName(%q) ok=%v, want %v", name, ok, want)
		}
	}
}

func fixCRC(h []byte, edit func([]byte)) []byte {
	edit(h)
	binary.LittleEndian.PutUint32(h[28:], crc32.Checksum(h[:28], crc32.MakeTable(crc32.Castagnoli)))
	return h
}

// TestWALScanMissingDir checks Scan's "A missing dir is an empty log" and
// ScanResult.Next's "0 if the log holds no record and no segment says where
// it starts", and "The result is never nil".
func TestWALScanMissingDir(t *testing.T) {
	res, err := wal.Scan(filepath.Join(t.TempDir(), "nope"), wal.ScanOptions{}, nil)
	if err != nil || res == nil || res.Next != 0 || len(res.Segments) != 0 {
		t.Errorf("Scan(missing) = %+v, %v", res, err)
	}
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	l.Append([]byte("a"))
	l.Close()
	stop := errors.New("stop")
	res, err = wal.Scan("/w", wal.ScanOptions{FS: fs}, func(wal.Position, []byte) error { return stop })
	if err != stop || res == nil {
		t.Errorf("visit error returned as %v (res %v), doc: as is", err, res)
	}
	// Scan on an empty segment says where it starts.
	fs2 := wal.NewMemFS()
	l = openMem(t, fs2, wal.Options{})
	l.SetNextLSN(50)
	l.Close()
	res, err = wal.Scan("/w", wal.ScanOptions{FS: fs2}, nil)
	if err != nil || res.Next != 50 {
		t.Errorf("Scan of an empty log at 50: Next %d %v", res.Next, err)
	}
}

// TestWALOSFS checks the log on the real file system: "A new segment is
// written as <name>.tmp, synced, renamed", Open of a directory path that is a
// file fails cleanly, and records survive Close/Open.
func TestWALOSFS(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{Logger: quiet})
	must(t, err)
	for i := range 100 {
		l.Append([]byte(sprintf("x%d", i)))
	}
	must(t, l.Close())
	l, err = wal.Open(dir, wal.Options{Logger: quiet})
	must(t, err)
	if l.LastLSN() != 100 {
		t.Errorf("LastLSN %d", l.LastLSN())
	}
	st := l.Stats()
	l.Close()
	_ = st
	f := filepath.Join(dir, wal.SegmentName(1))
	noPanic(t, "Open on a file", func() { _, err = wal.Open(f, wal.Options{Logger: quiet}) })
	if err == nil {
		t.Error("Open with a regular file as dir succeeded")
	}
}

// TestWALStats checks Stats's counters after appends: "Records  records
// appended", "Syncs fdatasyncs of segment files".
func TestWALStats(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	defer l.Close()
	for range 5 {
		n, _ := l.Append([]byte("abcd"))
		l.WaitDurable(n)
	}
	s := l.Stats()
	if s.Records != 5 || s.Syncs < 5 || s.Writes < 5 || s.Bytes != 5*(16+4) || s.Segments != 1 {
		t.Errorf("Stats %+v", s)
	}
}

// TestWALRewriteInherited checks "It does nothing if no such record exists
// (after a clean Close ...)" and that after an unclean end it rewrites the
// inherited records so they still read back.
func TestWALRewriteInherited(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	l.Append([]byte("a"), []byte("b"))
	l.Close()
	l = openMem(t, fs, wal.Options{})
	must(t, l.RewriteInherited(0))
	l.Close()
	l = openMem(t, fs, wal.Options{})
	l.Append([]byte("c"))
	l.WaitDurable(3)
	k := fs.Kill()
	l.CloseUntrimmed()
	l2, err := wal.Open("/w", memOpts(k))
	must(t, err)
	must(t, l2.RewriteInherited(1))
	lsns, _ := replayAll(t, l2, 1)
	if len(lsns) != 3 {
		t.Errorf("after RewriteInherited %v", lsns)
	}
	n, err := l2.Append([]byte("d"))
	if n != 4 || err != nil {
		t.Errorf("Append after RewriteInherited %d %v", n, err)
	}
	l2.Close()
}
