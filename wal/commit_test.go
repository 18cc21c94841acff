package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// TestGroupCommit: 64 goroutines appending with WaitDurable under
// SyncAlways share fsyncs, and every acknowledged record survives reopen.
func TestGroupCommit(t *testing.T) {
	const goroutines, perG = 64, 40
	hfs := &hookFS{FS: NewMemFS(), hook: slowSync(200 * time.Microsecond)}
	l := mustOpen(t, hfs, Options{SegmentSize: 64 << 10})
	var mu sync.Mutex
	acked := map[uint64][]byte{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				p := make([]byte, 8+g%13)
				binary.LittleEndian.PutUint32(p, uint32(g))
				binary.LittleEndian.PutUint32(p[4:], uint32(i))
				lsn, err := l.Append(p)
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.WaitDurable(lsn); err != nil {
					t.Error(err)
					return
				}
				if l.DurableLSN() < lsn {
					t.Errorf("WaitDurable(%d) returned with DurableLSN %d", lsn, l.DurableLSN())
				}
				mu.Lock()
				acked[lsn] = p
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	t.Logf("stats: %+v (%.1f records per sync)", st, float64(st.Records)/float64(st.Syncs))
	if st.Records != goroutines*perG {
		t.Fatalf("Records = %d", st.Records)
	}
	if st.Syncs*4 > st.Records {
		t.Fatalf("group commit ineffective: %d syncs for %d records", st.Syncs, st.Records)
	}
	if st.Writes*4 > st.Records {
		t.Fatalf("group commit ineffective: %d writes for %d records", st.Writes, st.Records)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, hfs.FS, Options{SegmentSize: 64 << 10})
	defer l.Close()
	n := 0
	err := l.Replay(1, func(lsn uint64, p []byte) error {
		n++
		if want, ok := acked[lsn]; !ok || !bytes.Equal(p, want) {
			t.Fatalf("record %d: %x, acknowledged %x (%v)", lsn, p, want, ok)
		}
		return nil
	})
	if err != nil || n != len(acked) {
		t.Fatalf("replayed %d of %d: %v", n, len(acked), err)
	}
}

// TestConcurrentEverything runs appends, waits, syncs, replays and
// truncations at once, for the race detector.
func TestConcurrentEverything(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		fs := NewMemFS()
		l := mustOpen(t, fs, Options{SegmentSize: 2048, Sync: mode, SyncEvery: time.Millisecond})
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					lsn, err := l.Append(payloadFor(uint64(g), uint64(i)), []byte{byte(i)})
					if err != nil {
						t.Error(err)
						return
					}
					if i%3 == 0 {
						if err := l.WaitDurable(lsn); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		var bg sync.WaitGroup
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				prev := uint64(0)
				err := l.Replay(l.FirstLSN(), func(lsn uint64, p []byte) error {
					if prev != 0 && lsn != prev+1 {
						t.Errorf("replay: %d after %d", lsn, prev)
					}
					prev = lsn
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.TruncateBefore(l.DurableLSN() / 2); err != nil {
					t.Error(err)
					return
				}
				_ = l.Size()
				_ = l.Stats()
				if err := l.Sync(); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Wait()
		close(stop)
		bg.Wait()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, fs, Options{SegmentSize: 2048})
		if l.LastLSN() != 8*200*2 {
			t.Fatalf("%v: LastLSN %d", mode, l.LastLSN())
		}
		l.Close()
	}
}

// TestWaitWrittenWritesWithoutSync: WaitWritten writes the pending
// records to the segment file and syncs nothing, in either mode; the
// records are then in the file for any reader (here the segment's bytes).
func TestWaitWrittenWritesWithoutSync(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		fs := NewMemFS()
		l := mustOpen(t, fs, Options{Sync: mode, SyncEvery: time.Hour})
		// A first record, synced, creates the segment (whose creation
		// syncs it too).
		if _, err := l.Append([]byte("zero")); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		before := l.Stats()
		lsn, err := l.Append([]byte("first"), []byte("second"))
		if err != nil {
			t.Fatal(err)
		}
		if st := l.Stats(); st.Bytes != before.Bytes {
			t.Fatalf("mode %v: Append wrote %d bytes before any wait", mode, st.Bytes-before.Bytes)
		}
		if err := l.WaitWritten(lsn); err != nil {
			t.Fatal(err)
		}
		st := l.Stats()
		if st.Syncs != before.Syncs || l.DurableLSN() >= lsn {
			t.Fatalf("mode %v: WaitWritten synced (syncs %d -> %d, durable LSN %d)", mode, before.Syncs, st.Syncs, l.DurableLSN())
		}
		if want := uint64(2*RecordHeaderSize + len("first") + len("second")); st.Bytes-before.Bytes != want {
			t.Fatalf("mode %v: WaitWritten wrote %d record bytes, want %d", mode, st.Bytes-before.Bytes, want)
		}
		segs := segFiles(t, fs)
		f, err := fs.Open(segs[len(segs)-1])
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if !bytes.Contains(data, []byte("first")) || !bytes.Contains(data, []byte("second")) {
			t.Fatalf("mode %v: the segment file lacks the records after WaitWritten", mode)
		}
		if err := l.WaitWritten(lsn + 1); !errors.Is(err, ErrInvalid) {
			t.Fatalf("mode %v: WaitWritten of an LSN not appended = %v, want ErrInvalid", mode, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitWrittenDoesNotWaitForSync: a record that a sync round takes is
// released to its WaitWritten callers once it is written, while the
// round's fdatasync still runs (here it blocks until the test lets it
// go): a SyncInterval add, or an external apply, does not wait out the
// background sync of its own record.
func TestWaitWrittenDoesNotWaitForSync(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{Sync: SyncInterval, SyncEvery: time.Hour})
	if _, err := l.Append([]byte("zero")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SetInjector(func(op Op, name string) error {
		if op == OpSync {
			once.Do(func() { close(started) })
			<-release
		}
		return nil
	})
	lsn, err := l.Append([]byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan error, 1)
	go func() { synced <- l.Sync() }()
	<-started // the round wrote the record and is in its fdatasync
	written := make(chan error, 1)
	go func() { written <- l.WaitWritten(lsn) }()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		<-written
		t.Fatal("WaitWritten waited for the fdatasync of a record already written")
	}
	if l.DurableLSN() >= lsn {
		t.Fatalf("durable LSN %d before the fdatasync ended", l.DurableLSN())
	}
	close(release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if l.DurableLSN() < lsn {
		t.Fatalf("durable LSN %d after Sync, want %d", l.DurableLSN(), lsn)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
