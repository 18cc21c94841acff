package wal

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// damagedLog returns a log of 40 records in several segments whose last
// segment ends in a torn tail, beside a leftover temporary segment file:
// what Open repairs.
func damagedLog(t *testing.T) *MemFS {
	t.Helper()
	fs := buildLog(t, 40, 512)
	files := segFiles(t, fs)
	last := files[len(files)-1]
	b, _ := fs.ReadFile(last)
	fs.WriteFile(last, append(b, AppendRecord(nil, 41, []byte("torn"))[:19]...))
	fs.WriteFile(filepath.Join(testDir, SegmentName(41)+".tmp"), []byte("FSWALSEG"))
	return fs
}

// opRecorder records the operations that change a MemFS.
type opRecorder struct {
	mu  sync.Mutex
	ops []string
}

func (r *opRecorder) inject(op Op, name string) error {
	switch op {
	case OpOpen, OpList:
		return nil
	}
	r.mu.Lock()
	r.ops = append(r.ops, op.String()+" "+name)
	r.mu.Unlock()
	return nil
}

// TestOpenRejectsWithoutChanges: when Open rejects a log, for corruption or
// because Options.Check refuses a record, every file is as it was: the
// leftover temporary file and the torn tail are still there, and no
// operation that changes anything ran.
func TestOpenRejectsWithoutChanges(t *testing.T) {
	refuse := errors.New("record 17 makes no sense")
	for _, tc := range []struct {
		name   string
		damage func(fs *MemFS) // nil: none
		check  func(lsn uint64, p []byte) error
		id     uint64
		want   error
	}{
		{name: "bad record in a non-last segment", damage: func(fs *MemFS) {
			name := segFiles(t, fs)[1]
			b, _ := fs.ReadFile(name)
			offs := recordOffsets(t, b)
			b[offs[1]+RecordHeaderSize+1] ^= 0x40
			fs.WriteFile(name, b)
		}, want: ErrCorrupt},
		{name: "invalid record followed by a valid one in the last segment", damage: func(fs *MemFS) {
			files := segFiles(t, fs)
			name := files[len(files)-1]
			b, _ := fs.ReadFile(name)
			b[SegmentHeaderSize+RecordHeaderSize] ^= 0x40
			fs.WriteFile(name, b)
		}, want: ErrCorrupt},
		{name: "Check refuses a record", check: func(lsn uint64, p []byte) error {
			if lsn == 17 {
				return refuse
			}
			return nil
		}, want: refuse},
		{name: "Check refuses the last valid record", check: func(lsn uint64, p []byte) error {
			if lsn == 40 {
				return refuse
			}
			return nil
		}, want: refuse},
		{name: "other store", damage: func(fs *MemFS) {
			name := segFiles(t, fs)[0]
			b, _ := fs.ReadFile(name)
			fs.WriteFile(name, append(AppendSegmentHeader(nil, 1, 99), b[SegmentHeaderSize:]...))
		}, id: 98, want: ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := damagedLog(t)
			if tc.damage != nil {
				tc.damage(fs)
			}
			before := snapshot(t, fs)
			var rec opRecorder
			fs.SetInjector(rec.inject)
			_, err := Open(testDir, Options{FS: fs, Check: tc.check, StoreID: tc.id, Logger: quiet})
			fs.SetInjector(nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if after := snapshot(t, fs); !maps.Equal(before, after) {
				t.Fatalf("Open changed the files:\nbefore %v\nafter  %v", fileSizes(before), fileSizes(after))
			}
			if len(rec.ops) != 0 {
				t.Fatalf("Open ran %v", rec.ops)
			}
		})
	}
	// The same log with nothing wrong is repaired: the test above covers
	// the repairs.
	fs := damagedLog(t)
	before := snapshot(t, fs)
	l := mustOpen(t, fs, Options{Check: func(uint64, []byte) error { return nil }})
	l.Close()
	after := snapshot(t, fs)
	if len(after) != len(before)-1 || l.LastLSN() != 40 {
		t.Fatalf("repair: %v -> %v, last %d", fileSizes(before), fileSizes(after), l.LastLSN())
	}
}

func fileSizes(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, len(m[k])))
	}
	return strings.Join(parts, " ")
}

// TestOpenCheck: Options.Check sees every valid record once, in LSN order,
// not the torn tail, and its error comes back from Open.
func TestOpenCheck(t *testing.T) {
	fs := damagedLog(t)
	var got []uint64
	l := mustOpen(t, fs, Options{Check: func(lsn uint64, p []byte) error {
		if !bytes.Equal(p, payloadFor(0, lsn)) {
			t.Errorf("Check(%d): wrong payload", lsn)
		}
		got = append(got, lsn)
		return nil
	}})
	l.Close()
	want := make([]uint64, 40)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Check saw %v", got)
	}

	type myErr struct{ error }
	_, err := Open(testDir, Options{FS: fs, Logger: quiet, Check: func(lsn uint64, p []byte) error {
		if lsn == 5 {
			return myErr{errors.New("bad payload")}
		}
		return nil
	}})
	var me myErr
	if !errors.As(err, &me) || !strings.HasPrefix(err.Error(), "wal: ") || !strings.Contains(err.Error(), "LSN 5") {
		t.Fatalf("Open with a refusing Check: %v", err)
	}
}

// TestOpenVersion1Log: a log written by the previous release (24-byte
// headers) opens, replays, takes appends in its last segment, is repaired
// at the right offset, and gets version-2 segments from then on.
func TestOpenVersion1Log(t *testing.T) {
	fs := NewMemFS()
	fs.MkdirAll(testDir)
	seg := func(first, n uint64) []byte {
		b := appendSegmentHeaderV1(nil, first)
		for lsn := first; lsn < first+n; lsn++ {
			b = AppendRecord(b, lsn, payloadFor(0, lsn))
		}
		return b
	}
	fs.WriteFile(filepath.Join(testDir, SegmentName(1)), seg(1, 10))
	last := seg(11, 5)
	tornAt := len(last)
	fs.WriteFile(filepath.Join(testDir, SegmentName(11)), append(last, 1, 2, 3, 4, 5))

	res, err := Scan(testDir, ScanOptions{FS: fs, StoreID: 5}, nil)
	if err != nil || res.Segments[0].Header.Version != 1 || res.Segments[1].Header.Size != SegmentHeaderSizeV1 ||
		res.Segments[1].Tail == nil || res.Segments[1].Tail.Offset != int64(tornAt) {
		t.Fatalf("Scan: %v, %+v", err, res)
	}
	l := mustOpen(t, fs, Options{SegmentSize: 600, StoreID: 5})
	if l.FirstLSN() != 1 || l.LastLSN() != 15 || l.Size() != int64(len(seg(1, 10))+tornAt) {
		t.Fatalf("first %d last %d size %d", l.FirstLSN(), l.LastLSN(), l.Size())
	}
	for lsn := uint64(16); lsn <= 40; lsn++ {
		if _, err := l.Append(payloadFor(0, lsn)); err != nil {
			t.Fatal(err)
		}
	}
	if got := replayAll(t, l, 1); len(got) != 40 {
		t.Fatalf("replayed %d records", len(got))
	}
	l.Close()
	l = mustOpen(t, fs, Options{SegmentSize: 600, StoreID: 5})
	defer l.Close()
	got := replayAll(t, l, 1)
	for i, r := range got {
		if r.lsn != uint64(i+1) || !bytes.Equal(r.payload, payloadFor(0, r.lsn)) {
			t.Fatalf("record %d: lsn %d", i, r.lsn)
		}
	}
	res, err = Scan(testDir, ScanOptions{FS: fs}, nil)
	if err != nil || len(res.Segments) < 3 {
		t.Fatalf("Scan: %v, %d segments", err, len(res.Segments))
	}
	for i, s := range res.Segments {
		want := SegmentHeader{Version: 2, FirstLSN: s.FirstLSN, StoreID: 5, Size: SegmentHeaderSize}
		if i < 2 {
			want = SegmentHeader{Version: 1, FirstLSN: s.FirstLSN, Size: SegmentHeaderSizeV1}
		}
		if s.Header != want {
			t.Fatalf("segment %d: header %+v, want %+v", i, s.Header, want)
		}
	}

	// An empty version-1 last segment holds no record: StartSegment has
	// nothing to do.
	fs = NewMemFS()
	fs.MkdirAll(testDir)
	fs.WriteFile(filepath.Join(testDir, SegmentName(7)), seg(7, 0))
	l2 := mustOpen(t, fs, Options{})
	defer l2.Close()
	if err := l2.StartSegment(); err != nil || l2.Stats().Segments != 1 || l2.LastLSN() != 6 {
		t.Fatalf("StartSegment on an empty v1 segment: %v, %d segments, last %d", err, l2.Stats().Segments, l2.LastLSN())
	}
}

// TestReplayCorruption: Replay applies Open's checks to what the log
// wrote, and reports a segment shortened behind its back.
func TestReplayCorruption(t *testing.T) {
	fs := buildLog(t, 40, 512)
	l := mustOpen(t, fs, Options{SegmentSize: 512})
	defer l.Close()
	files := segFiles(t, fs)
	b, _ := fs.ReadFile(files[1])
	offs := recordOffsets(t, b)

	bad := bytes.Clone(b)
	bad[offs[2]+RecordHeaderSize] ^= 1
	fs.WriteFile(files[1], bad)
	err := l.Replay(1, func(uint64, []byte) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != filepath.Base(files[1]) || ce.Offset != offs[2] {
		t.Fatalf("flipped byte: %v", err)
	}

	fs.WriteFile(files[1], b[:offs[2]])
	err = l.Replay(1, func(uint64, []byte) error { return nil })
	if !errors.As(err, &ce) || ce.Segment != filepath.Base(files[1]) || !strings.Contains(ce.Reason, "the log wrote") {
		t.Fatalf("shortened segment: %v", err)
	}
}

// TestFailedSyncLinuxSemantics: after a failed fdatasync the log refuses
// everything; the records it wrote still read back after the process dies
// (a re-Open on Kill sees them), but a power loss loses them, even though
// the new process synced successfully.
func TestFailedSyncLinuxSemantics(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	defer l.Close()
	if lsn, _ := l.Append([]byte("a")); l.WaitDurable(lsn) != nil {
		t.Fatal("first WaitDurable failed")
	}
	if l.Err() != nil {
		t.Fatalf("Err() = %v before any failure", l.Err())
	}
	boom := errors.New("EIO")
	fs.SetInjector(func(op Op, name string) error {
		if op == OpSync {
			return boom
		}
		return nil
	})
	lsn, _ := l.Append([]byte("b"), []byte("c"))
	if err := l.WaitDurable(lsn); !errors.Is(err, boom) {
		t.Fatalf("WaitDurable: %v", err)
	}
	fs.SetInjector(nil)
	if !errors.Is(l.Err(), boom) {
		t.Fatalf("Err() = %v", l.Err())
	}
	if _, err := l.Append([]byte("d")); !errors.Is(err, boom) {
		t.Fatalf("Append after the failure: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, boom) || l.DurableLSN() != 1 {
		t.Fatalf("Sync after the failure: %v, durable %d", err, l.DurableLSN())
	}

	// The process dies; the OS keeps the page cache. A new process reads
	// the records, and its Open syncs "successfully".
	killed := fs.Kill()
	l2 := mustOpen(t, killed, Options{})
	if got := replayAll(t, l2, 1); len(got) != 3 || string(got[2].payload) != "c" {
		t.Fatalf("after Kill: %v", got)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	// Then the power goes: b and c were never on disk. They show up as a
	// torn tail (zeros), which Open truncates.
	for seed := uint64(0); seed < 20; seed++ {
		for _, img := range []*MemFS{killed, fs} {
			tornBefore := tornTails.Load()
			c := img.Crash(rand.New(rand.NewPCG(seed, 3)))
			l3, err := Open(testDir, Options{FS: c, Logger: countTorn})
			if err != nil {
				t.Fatalf("seed %d: Open after the crash: %v", seed, err)
			}
			got := replayAll(t, l3, 1)
			l3.Close()
			if len(got) != 1 || string(got[0].payload) != "a" {
				t.Fatalf("seed %d: after the crash: %v", seed, got)
			}
			if img == killed && tornTails.Load() == tornBefore {
				t.Fatalf("seed %d: no torn tail truncated", seed)
			}
		}
	}
}

// TestOpenMakesSegmentEntriesDurable: a segment whose creation's directory
// sync failed (the process that created it died, or the sync failed) has
// a name that a power loss may undo. Open syncs the directory, so records
// appended and synced after it survive a power loss.
func TestOpenMakesSegmentEntriesDurable(t *testing.T) {
	fs := NewMemFS()
	var failDirSync atomic.Bool
	fs.SetInjector(func(op Op, name string) error {
		if op == OpSyncDir && failDirSync.Load() {
			return errors.New("injected dir sync failure")
		}
		return nil
	})
	l := mustOpen(t, fs, Options{SegmentSize: MinSegmentSize})
	if _, err := l.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	failDirSync.Store(true)
	if err := l.StartSegment(); err == nil {
		t.Fatal("StartSegment with a failing directory sync succeeded")
	}
	// The process dies; the next one opens the log from the page cache.
	fs = fs.Kill()
	l = mustOpen(t, fs, Options{})
	lsn, err := l.Append([]byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(lsn); err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 20; seed++ {
		crashed := fs.Crash(rand.New(rand.NewPCG(seed, 0)))
		l2 := mustOpen(t, crashed, Options{})
		if got := l2.LastLSN(); got < lsn {
			t.Fatalf("seed %d: record %d was synced before the power loss, the log ends at %d", seed, lsn, got)
		}
		l2.Close()
	}
	l.Close()
}

// TestOpenTmpDirectory: a directory where a leftover temporary segment
// file would be fails Open with an error that names it and says what to
// do, and stays.
func TestOpenTmpDirectory(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	name := SegmentName(9) + tmpSuffix
	if err := os.MkdirAll(filepath.Join(dir, name, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "move it out of") {
		t.Fatalf("Open with a directory %s: %v, want an error naming it and saying what to do", name, err)
	}
	if _, err := os.Stat(filepath.Join(dir, name, "x")); err != nil {
		t.Fatalf("the directory's contents: %v", err)
	}
}
