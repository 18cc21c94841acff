package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

// msgLog records the messages logged through it, with their levels and
// attributes.
type msgLog struct {
	mu   sync.Mutex
	msgs []string
}

func (m *msgLog) Enabled(context.Context, slog.Level) bool { return true }
func (m *msgLog) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *msgLog) WithGroup(string) slog.Handler            { return m }
func (m *msgLog) Handle(_ context.Context, r slog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	m.msgs = append(m.msgs, msg)
	return nil
}

func (m *msgLog) count(substr string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.msgs {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

// TestSegmentSpaceReserved: on the OS file system the last segment's space
// is reserved ahead of its writes (so that its fdatasyncs commit no new
// size), its records read back, Close trims the reservation, and the next
// Open finds no tail to truncate.
func TestSegmentSpaceReserved(t *testing.T) {
	dir := t.TempDir()
	ml := &msgLog{}
	l, err := Open(dir, Options{Logger: slog.New(ml)})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 100 {
		p := fmt.Sprintf("record %d", i)
		want = append(want, p)
		lsn, err := l.Append([]byte(p))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(lsn); err != nil {
			t.Fatal(err)
		}
	}
	if n := ml.count("cannot reserve"); n > 0 {
		t.Skipf("this file system cannot fallocate: %v", ml.msgs)
	}
	seg := filepath.Join(dir, SegmentName(1))
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	data := l.Size()
	if fi.Size() < allocChunk || fi.Size() <= data {
		t.Fatalf("segment file is %d bytes with %d of records: no space reserved ahead (want %d)", fi.Size(), data, allocChunk)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err = os.Stat(seg); err != nil || fi.Size() != data {
		t.Fatalf("after Close the segment is %d bytes (%v), want its %d bytes of records", fi.Size(), err, data)
	}
	l, err = Open(dir, Options{Logger: slog.New(ml)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n := ml.count("tail of last segment"); n != 0 {
		t.Fatalf("Open after a clean Close truncated a tail: %v", ml.msgs)
	}
	got := replayAll(t, l, 1)
	if len(got) != len(want) {
		t.Fatalf("read back %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if string(r.payload) != want[i] {
			t.Fatalf("record %d = %q, want %q", i+1, r.payload, want[i])
		}
	}
}

// TestReservedSpaceAfterKill: a writer that dies leaves its segment's
// reserved zeros behind. Open drops them as a zeroed tail (not a torn
// record: Info, not Warn), keeps every record, and appends after them.
func TestReservedSpaceAfterKill(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	lsn, err := l.Append([]byte("a"), []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(lsn); err != nil {
		t.Fatal(err)
	}
	segs := segFiles(t, fs)
	b, err := fs.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != allocChunk {
		t.Fatalf("segment is %d bytes, want %d reserved", len(b), allocChunk)
	}
	killed := fs.Kill()
	ml := &msgLog{}
	l2, err := Open(testDir, Options{FS: killed, Logger: slog.New(ml)})
	if err != nil {
		t.Fatal(err)
	}
	if ml.count("INFO wal: truncating zeroed tail") != 1 || ml.count("WARN") != 0 {
		t.Fatalf("Open after Kill logged %v, want one zeroed tail at Info", ml.msgs)
	}
	lsn, err = l2.Append([]byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.WaitDurable(lsn); err != nil {
		t.Fatal(err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	l3 := mustOpen(t, killed, Options{})
	defer l3.Close()
	got := replayAll(t, l3, 1)
	if len(got) != 3 || string(got[0].payload) != "a" || string(got[2].payload) != "c" {
		t.Fatalf("records after the reopen: %v", got)
	}
}

// TestRotationTrimsReservedSpace: a segment that another follows ends with
// its last record (an invalid record in a segment that is not the last is
// corruption), though the log reserved space past it.
func TestRotationTrimsReservedSpace(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: 4096})
	for i := range 200 {
		lsn, err := l.Append(bytes.Repeat([]byte{0xff}, 100+i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(lsn); err != nil {
			t.Fatal(err)
		}
	}
	segs := segFiles(t, fs)
	if len(segs) < 5 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	for _, s := range segs[:len(segs)-1] {
		b, err := fs.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) >= RecordHeaderSize && allZero(b[len(b)-RecordHeaderSize:]) {
			t.Fatalf("%s (not the last segment) ends in zeros: %d bytes", s, len(b))
		}
	}
	last, err := fs.ReadFile(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 4096 {
		t.Fatalf("last segment is %d bytes, want its space reserved to SegmentSize 4096", len(last))
	}
	if _, err := Scan(testDir, ScanOptions{FS: fs}, nil); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	l.Close()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestAllocateFailureAppendsWithout: a failing Allocate (a file system
// without fallocate, a full disk) costs the log nothing but the speed-up:
// it warns once per segment, appends without, and every record is there
// after a power loss.
func TestAllocateFailureAppendsWithout(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: 2048})
	ml := &msgLog{}
	l.log = slog.New(ml)
	fails := 0
	fs.SetInjector(func(op Op, name string) error {
		if op == OpAllocate {
			fails++
			return errors.New("injected ENOSPC")
		}
		return nil
	})
	var lsn uint64
	for i := range 50 {
		var err error
		if lsn, err = l.Append(make([]byte, 100+i)); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(lsn); err != nil {
			t.Fatal(err)
		}
	}
	segs := segFiles(t, fs)
	if fails != len(segs) || ml.count("WARN wal: cannot reserve") != fails {
		t.Fatalf("%d Allocate calls failed over %d segments, logged %v: want one per segment", fails, len(segs), ml.msgs)
	}
	fs.SetInjector(nil)
	l.Close()
	seed := testseed.Seed(t)
	l2 := mustOpen(t, fs.Crash(rand.New(rand.NewPCG(seed, 0))), Options{})
	defer l2.Close()
	if got := l2.LastLSN(); got != lsn {
		t.Fatalf("seed %d: after a power loss the log ends at %d, want %d", seed, got, lsn)
	}
}

// readHookFS calls hook before every ReadAt of a file it opened read-only.
type readHookFS struct {
	*MemFS
	hook func(off int64)
}

func (h readHookFS) Open(name string) (File, error) {
	f, err := h.MemFS.Open(name)
	if err != nil {
		return nil, err
	}
	return readHookFile{f, h.hook}, nil
}

type readHookFile struct {
	File
	hook func(off int64)
}

func (f readHookFile) ReadAt(p []byte, off int64) (int, error) {
	f.hook(off)
	return f.File.ReadAt(p, off)
}

// TestLiveScanRacingWriter: a live scan reads the last segment's reserved
// space while the writer writes records into it. Having read zeros where
// the next record now is, and then found records after it, it ends its
// snapshot there rather than report corruption; and a record still invalid
// once those after it are written is corruption, live or not.
func TestLiveScanRacingWriter(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	defer l.Close()
	lsn, err := l.Append([]byte("one"), []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(lsn); err != nil {
		t.Fatal(err)
	}
	end := l.Size()
	fired := false
	race := readHookFS{fs, func(off int64) {
		if off == end && !fired {
			// The scan read zeros at end, and now looks past them.
			fired = true
			lsn, err := l.Append([]byte("three"), []byte("four"))
			if err == nil {
				err = l.WaitDurable(lsn)
			}
			if err != nil {
				t.Error(err)
			}
		}
	}}
	res, err := Scan(testDir, ScanOptions{FS: race, Live: true}, nil)
	if err != nil {
		t.Fatalf("live scan racing the writer: %v", err)
	}
	if !fired {
		t.Fatal("the scan never looked past the records it first read")
	}
	tail := res.Segments[0].Tail
	if res.Next != 3 || tail == nil || tail.Offset != end || !strings.Contains(tail.Reason, "being written") {
		t.Fatalf("live scan: next %d, tail %+v; want the snapshot to end at LSN 2, offset %d", res.Next, tail, end)
	}

	// The same bytes with the record at end damaged: corruption.
	segs := segFiles(t, fs)
	b, err := fs.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[end+RecordHeaderSize] ^= 0x40 // the payload of "three"
	bad := NewMemFS()
	if err := bad.MkdirAll(testDir); err != nil {
		t.Fatal(err)
	}
	if err := bad.WriteFile(segs[0], b); err != nil {
		t.Fatal(err)
	}
	for _, live := range []bool{true, false} {
		if _, err := Scan(testDir, ScanOptions{FS: bad, Live: live}, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Live %v: scan over a damaged record followed by a valid one: %v, want ErrCorrupt", live, err)
		}
	}
}

// TestPowerLossOutOfOrderWriteback: a power loss during the fdatasync of
// records written over reserved zeros can leave a page of them on disk and
// an earlier one not: zeros, then records. None of those records was
// acknowledged (no sync of them completed), so Open must take the zeros
// for the log's end, keep every acknowledged record, and not refuse the
// log as corrupt. The acknowledged records end at several distances
// before a page boundary: a record that starts fewer than a header's
// bytes before it loses only part of its header with the page
// (headerCutByPage; an adversarial review found Open refused those).
func TestPowerLossOutOfOrderWriteback(t *testing.T) {
	base := testseed.Seed(t)
	seeds := 100
	if testing.Short() || racedetect.Enabled {
		seeds = 25
	}
	holes, distances := 0, []int{1, 4, 5, 8, 9, 10, 15, 16, 17, 100, 2000}
	for _, z := range distances {
		// A 32-byte header and two records end z bytes before 4096.
		second := holePage - z - SegmentHeaderSize - 2*RecordHeaderSize - 1000
		acked := [][]byte{bytes.Repeat([]byte{1}, 1000), bytes.Repeat([]byte{2}, second)}
		holes += powerLossDuringSync(t, base, seeds, acked)
		if t.Failed() {
			t.Fatalf("acknowledged records ending %d bytes before a page boundary", z)
		}
	}
	// About half of them do; a tenth is a loose bound.
	total := seeds * len(distances)
	t.Logf("%d of %d power losses left zeros before records", holes, total)
	if holes < total/10 {
		t.Fatalf("only %d power losses left a hole: the test does not reach the case", holes)
	}
}

// powerLossDuringSync acknowledges acked, then writes 60 more records
// whose sync stalls, and checks power losses taken meanwhile (seeds base,
// base+1, ...). It
// returns how many of them Open found zeros before records in.
func powerLossDuringSync(t *testing.T, base uint64, seeds int, acked [][]byte) (holes int) {
	t.Helper()
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	defer l.Close()
	want := slices.Clone(acked)
	for _, p := range acked {
		lsn, err := l.Append(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(lsn); err != nil {
			t.Fatal(err)
		}
	}
	// The next records are written, and their sync stalls: the power
	// goes meanwhile.
	entered, stall := make(chan struct{}), make(chan struct{})
	fs.SetInjector(func(op Op, name string) error {
		if op == OpSync {
			entered <- struct{}{}
			<-stall
		}
		return nil
	})
	var batch [][]byte
	for i := range 60 {
		batch = append(batch, bytes.Repeat([]byte{byte(0x80 + i)}, 300))
	}
	want = append(want, batch...)
	lsn, err := l.Append(batch...)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- l.WaitDurable(lsn) }()
	<-entered
	defer func() {
		close(stall)
		fs.SetInjector(nil)
		if err := <-waited; err != nil {
			t.Error(err)
		}
	}()
	for i := range uint64(seeds) {
		seed := base + i
		c := fs.Crash(rand.New(rand.NewPCG(seed, 7)))
		ml := &msgLog{}
		l2, err := Open(testDir, Options{FS: c, Logger: slog.New(ml)})
		if err != nil {
			t.Errorf("seed %d (%s): Open after a power loss during the sync: %v", seed, testseed.Replay(t, seed), err)
			return holes
		}
		got := replayAll(t, l2, 1)
		l2.Close()
		if len(got) < len(acked) {
			t.Errorf("seed %d: the log ends at %d, before the acknowledged %d", seed, len(got), len(acked))
			return holes
		}
		for j, r := range got {
			if !bytes.Equal(r.payload, want[j]) {
				t.Errorf("seed %d: record %d holds the wrong payload", seed, r.lsn)
				return holes
			}
		}
		if ml.count("written back out of order") > 0 {
			holes++
		}
	}
	return holes
}

// TestZeroPageRule: a page of zeros between an invalid record and a valid
// one ends the log only in the last segment, and only if it lies between
// them: damage followed by a valid record before any such page is still
// corruption, as is a page of zeros in a segment that another follows.
func TestZeroPageRule(t *testing.T) {
	build := func(segSize int64) (*MemFS, []string) {
		fs := NewMemFS()
		l := mustOpen(t, fs, Options{SegmentSize: segSize})
		for i := range 30 {
			lsn, err := l.Append(bytes.Repeat([]byte{byte(i + 1)}, 1000))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.WaitDurable(lsn); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		return fs, segFiles(t, fs)
	}
	edit := func(fs *MemFS, name string, fn func([]byte)) {
		b, err := fs.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fn(b)
		if err := fs.WriteFile(name, b); err != nil {
			t.Fatal(err)
		}
	}

	// The last segment, a page of zeros at [8192, 12288): the log ends
	// at the record the page cuts.
	fs, segs := build(DefaultSegmentSize)
	edit(fs, segs[0], func(b []byte) { clear(b[2*holePage : 3*holePage]) })
	res, err := Scan(testDir, ScanOptions{FS: fs}, nil)
	if err != nil {
		t.Fatalf("zero page in the last segment: %v", err)
	}
	tail := res.Segments[0].Tail
	// Records are 16+1000 bytes after a 32-byte header: the record holding
	// offset 8192 is the 9th (it starts at 32+8*1016 = 8160).
	if tail == nil || tail.Offset != 32+8*1016 || res.Next != 9 || !strings.Contains(tail.Reason, "out of order") {
		t.Fatalf("zero page in the last segment: next %d, tail %+v; want the log to end before LSN 9 at offset %d", res.Next, tail, 32+8*1016)
	}

	// Damage before the page, with a valid record between: corruption.
	fs, segs = build(DefaultSegmentSize)
	edit(fs, segs[0], func(b []byte) {
		b[100] ^= 1 // the payload of LSN 1
		clear(b[2*holePage : 3*holePage])
	})
	if _, err := Scan(testDir, ScanOptions{FS: fs}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged record followed by valid ones, then a zero page: %v, want ErrCorrupt", err)
	}

	// A record that starts 3 bytes before a page boundary, those bytes
	// zeros (the page they were on never written back): the log ends
	// there; with its payload damaged as well: corruption.
	for _, damaged := range []bool{false, true} {
		fs := NewMemFS()
		l := mustOpen(t, fs, Options{})
		for i, n := range []int{holePage - 3 - SegmentHeaderSize - RecordHeaderSize, 500, 500} {
			lsn, err := l.Append(bytes.Repeat([]byte{byte(i + 1)}, n))
			if err == nil {
				err = l.WaitDurable(lsn)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		edit(fs, segFiles(t, fs)[0], func(b []byte) {
			clear(b[holePage-3 : holePage])
			if damaged {
				b[holePage+100] ^= 1
			}
		})
		res, err := Scan(testDir, ScanOptions{FS: fs}, nil)
		if damaged {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a record cut by a page boundary and damaged after it: %v, want ErrCorrupt", err)
			}
			continue
		}
		if err != nil || res.Next != 2 || res.Segments[0].Tail == nil || res.Segments[0].Tail.Offset != holePage-3 {
			t.Fatalf("a record whose first 3 bytes a lost page held: %v, next %d; want the log to end at LSN 1", err, res.Next)
		}
	}

	// A zero page in a segment that is not the last: corruption.
	fs, segs = build(16 << 10)
	if len(segs) < 2 {
		t.Fatalf("%d segments, want 2 or more", len(segs))
	}
	edit(fs, segs[0], func(b []byte) { clear(b[2*holePage : 3*holePage]) })
	if _, err := Scan(testDir, ScanOptions{FS: fs}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a zero page in a segment another follows: %v, want ErrCorrupt", err)
	}
}

// TestCloseUntrimmedKeepsReservedSpace: CloseUntrimmed of a log whose
// records are durable changes nothing on disk (Close would truncate the
// reserved space and sync); the next Open, after a power loss too, drops
// the reserved zeros as after a crash and keeps every record.
func TestCloseUntrimmedKeepsReservedSpace(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	lsn, err := l.Append([]byte("a"), []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(lsn); err != nil {
		t.Fatal(err)
	}
	var ops []string
	fs.SetInjector(func(op Op, path string) error {
		ops = append(ops, op.String())
		return nil
	})
	if err := l.CloseUntrimmed(); err != nil {
		t.Fatal(err)
	}
	fs.SetInjector(nil)
	if len(ops) != 0 {
		t.Fatalf("CloseUntrimmed of a log whose records are durable made the calls %v, want none", ops)
	}
	b, err := fs.ReadFile(segFiles(t, fs)[0])
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != allocChunk {
		t.Fatalf("segment is %d bytes after CloseUntrimmed, want its %d reserved", len(b), allocChunk)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Close after CloseUntrimmed: %v, want ErrClosed", err)
	}
	// Only the synced bytes survive a power loss: the records are there.
	l2 := mustOpen(t, fs.Crash(rand.New(rand.NewPCG(1, 2))), Options{})
	defer l2.Close()
	if got := replayAll(t, l2, 1); len(got) != 2 || string(got[1].payload) != "b" {
		t.Fatalf("records after a power loss: %v", got)
	}
}
