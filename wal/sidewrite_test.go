package wal

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/testseed"
)

// syncGate is a hook that blocks the next file Sync until released, and
// says when one is blocked. Later Syncs pass.
type syncGate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	err     error // what the blocked Sync returns
}

func newSyncGate() *syncGate {
	g := &syncGate{entered: make(chan struct{}), release: make(chan struct{})}
	g.armed.Store(true)
	return g
}

func (g *syncGate) hook(op, name string) error {
	if op == "sync" && g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
		return g.err
	}
	return nil
}

// holdFirstWrite hooks hfs so that its next file Write says it began (on
// writeIn) and waits for writeGo to close, and its Syncs go through g.
func holdFirstWrite(hfs *hookFS, g *syncGate) (writeIn, writeGo chan struct{}) {
	writeIn, writeGo = make(chan struct{}), make(chan struct{})
	var writes atomic.Int32
	hfs.setHook(func(op, name string) error {
		if op == "write" && writes.Add(1) == 1 {
			close(writeIn)
			<-writeGo
		}
		return g.hook(op, name)
	})
	return writeIn, writeGo
}

// openOneWritten opens a SyncInterval log on hfs whose background sync
// never runs by itself, with record 1 written but not synced.
func openOneWritten(t *testing.T, hfs *hookFS) *Log {
	t.Helper()
	l := mustOpen(t, hfs, Options{Sync: SyncInterval, SyncEvery: time.Hour})
	if _, err := l.Append(payloadFor(0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitWritten(1); err != nil {
		t.Fatal(err)
	}
	return l
}

// appendWritten appends payload and waits for it to be written, in a
// goroutine; the channel gets WaitWritten's result.
func appendWritten(t *testing.T, l *Log, payload []byte) (uint64, chan error) {
	t.Helper()
	lsn, err := l.Append(payload)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- l.WaitWritten(lsn) }()
	return lsn, done
}

// TestSideWriteDuringSync: under SyncInterval, a record that needs only
// its write is written while the fdatasync in flight is stalled, instead
// of waiting for it; the stalled sync claims only the records written
// before it began; and the next sync covers the side-written record, so
// a power loss after it keeps that record. (Before side writes, WaitWritten
// waited out the stalled sync. The last check fails if a side write
// during a sync can leave the segment marked clean.)
func TestSideWriteDuringSync(t *testing.T) {
	mem := NewMemFS()
	hfs := &hookFS{FS: mem}
	l := openOneWritten(t, hfs)
	g := newSyncGate()
	hfs.setHook(g.hook)
	syncDone := make(chan error, 1)
	go func() { syncDone <- l.Sync() }() // leads: record 1 is written, not synced
	<-g.entered

	_, done := appendWritten(t, l, payloadFor(0, 2))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitWritten(2) during the stalled sync: %v", err)
		}
	case <-time.After(5 * time.Second):
		close(g.release)
		t.Fatal("WaitWritten(2) waited for the fdatasync in flight")
	}
	if st := l.Stats(); st.SideWrites != 1 {
		t.Errorf("Stats.SideWrites = %d, want 1", st.SideWrites)
	}
	if d := l.DurableLSN(); d != 0 {
		t.Errorf("DurableLSN during the stalled sync = %d, want 0", d)
	}
	close(g.release)
	if err := <-syncDone; err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if d := l.DurableLSN(); d != 1 {
		t.Fatalf("DurableLSN after the sync = %d, want 1: record 2 was written after it began", d)
	}
	syncs := l.Stats().Syncs
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := l.Stats().Syncs; got != syncs+1 {
		t.Fatalf("the Sync after a side write made %d fdatasyncs, want 1", got-syncs)
	}
	if d := l.DurableLSN(); d != 2 {
		t.Fatalf("DurableLSN = %d, want 2", d)
	}
	seed := testseed.Seed(t)
	for i := range 20 {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		l2 := mustOpen(t, mem.Crash(rng), Options{})
		got := replayAll(t, l2, 1)
		if len(got) != 2 {
			t.Fatalf("crash %d (seed %d) after the second Sync: %d records, want 2", i, seed, len(got))
		}
		l2.Close()
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSideWriteDuringFailingSync: a side write still in progress when
// the fdatasync in flight fails acknowledges nothing: the log's error
// reaches the waiter, and the log refuses appends.
func TestSideWriteDuringFailingSync(t *testing.T) {
	hfs := &hookFS{FS: NewMemFS()}
	l := openOneWritten(t, hfs)
	g := newSyncGate()
	g.err = syscall.EIO
	writeIn, writeGo := holdFirstWrite(hfs, g)
	syncDone := make(chan error, 1)
	go func() { syncDone <- l.Sync() }()
	<-g.entered
	_, done := appendWritten(t, l, payloadFor(0, 2))
	select {
	case <-writeIn: // the side write has begun
	case <-time.After(5 * time.Second):
		close(g.release)
		close(writeGo)
		t.Fatal("no side write during the stalled sync")
	}
	close(g.release) // the sync fails while it runs
	time.Sleep(20 * time.Millisecond)
	close(writeGo)
	if err := <-syncDone; !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v, want EIO", err)
	}
	if err := <-done; !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitWritten(2) of a side write that ended after the failed sync: %v, want the log's EIO", err)
	}
	if _, err := l.Append(payloadFor(0, 3)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append after the failed sync: %v, want EIO", err)
	}
	l.Close()
}

// TestSideWritesConcurrent: writers that wait only for writes, a
// background syncer whose fdatasyncs are slow, and small segments (so
// that records that start a segment are left to the leader): every
// record reads back once, in LSN order, with its payload, after Close
// and after a Kill; side writes happened.
func TestSideWritesConcurrent(t *testing.T) {
	seed := testseed.Seed(t)
	mem := NewMemFS()
	hfs := &hookFS{FS: mem}
	hfs.setHook(slowSync(2 * time.Millisecond))
	l := mustOpen(t, hfs, Options{Sync: SyncInterval, SyncEvery: time.Millisecond, SegmentSize: 16 << 10})
	writers, per := 4, 3000
	if testing.Short() {
		per = 800
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range per {
				n := 1 + rng.IntN(3)
				// Payloads name their LSN, which Append hands out: append
				// under a lock so that the LSNs are known in advance.
				appendMu.Lock()
				first := l.LastLSN() + 1
				ps := make([][]byte, n)
				for i := range ps {
					ps[i] = payloadFor(seed, first+uint64(i))
				}
				last, err := l.Append(ps...)
				appendMu.Unlock()
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				if err := l.WaitWritten(last); err != nil {
					t.Errorf("WaitWritten(%d): %v", last, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := l.Stats()
	t.Logf("seed %d: %d records, %d writes, %d side writes, %d syncs, %d segments", seed, st.Records, st.Writes, st.SideWrites, st.Syncs, st.Segments)
	if st.SideWrites == 0 {
		t.Errorf("no side write in %d syncs of 2 ms", st.Syncs)
	}
	last := l.LastLSN()
	killed := mem.Kill()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fs := range []FS{mem, killed} {
		l2 := mustOpen(t, fs, Options{})
		got := replayAll(t, l2, 1)
		if uint64(len(got)) != last {
			t.Fatalf("seed %d: %d records read back, want %d", seed, len(got), last)
		}
		for i, r := range got {
			if r.lsn != uint64(i)+1 || string(r.payload) != string(payloadFor(seed, r.lsn)) {
				t.Fatalf("seed %d: record %d is LSN %d with a wrong or misplaced payload", seed, i, r.lsn)
			}
		}
		l2.Close()
	}
}

// appendMu serializes TestSideWritesConcurrent's appends with their
// LSN reads.
var appendMu sync.Mutex

// TestSideWriteBackPressureWaiter: an Append held by back-pressure (over
// maxPending buffered) that began waiting while the leader was writing,
// before its fdatasync, is woken when the sync begins and writes its
// records then, as a WaitWritten caller in its place does. (It used to
// wait out the whole sync: only WaitWritten callers were counted as
// waiting for a write, and woken.)
func TestSideWriteBackPressureWaiter(t *testing.T) {
	for _, backPressure := range []bool{true, false} {
		hfs := &hookFS{FS: NewMemFS()}
		l := mustOpen(t, hfs, Options{Sync: SyncInterval, SyncEvery: time.Hour})
		payload := make([]byte, 512<<10)
		if _, err := l.Append(payload); err != nil {
			t.Fatal(err)
		}
		g := newSyncGate()
		writeIn, writeGo := holdFirstWrite(hfs, g)
		syncDone := make(chan error, 1)
		go func() { syncDone <- l.Sync() }()
		<-writeIn // the leader writes
		done := make(chan error, 1)
		go func() {
			if backPressure {
				ps := make([][]byte, maxPending/len(payload)+1)
				for i := range ps {
					ps[i] = payload
				}
				_, err := l.Append(ps...)
				done <- err
				return
			}
			_, w := appendWritten(t, l, payload)
			done <- <-w
		}()
		time.Sleep(50 * time.Millisecond) // it waits behind the leader's write
		close(writeGo)
		<-g.entered // the leader's fdatasync, stalled
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			close(g.release)
			<-done
			t.Fatalf("back-pressure %v: still waiting 5 s into the stalled fdatasync", backPressure)
		}
		close(g.release)
		if err := <-syncDone; err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
