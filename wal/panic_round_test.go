package wal

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/safelog"
)

// funcHandler runs fn on every record.
type funcHandler struct{ fn func(r slog.Record) }

func (h funcHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h funcHandler) Handle(_ context.Context, r slog.Record) error {
	h.fn(r)
	return nil
}
func (h funcHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h funcHandler) WithGroup(string) slog.Handler      { return h }

// withinOrHang runs fn and fails t if it does not return within d; it
// returns fn's panic.
func withinOrHang(t *testing.T, d time.Duration, what string, fn func()) (ok bool, p any) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	select {
	case p := <-done:
		return true, p
	case <-time.After(d):
		t.Errorf("%s: HANG after %v", what, d)
		return false, nil
	}
}

// TestPanicMidRound: the caller's FS panics mid-round: in a segment's
// write (l.mu released), in its reservation (l.mu released, reached from
// the leader's flush) or in a new segment's creation (a rotation). The
// panic reaches the caller; the log must then refuse further appends (the
// round's records may be unwritten), and Close must return, not hang (a
// round left led by no one) nor kill the process (await's deferred
// Unlock of a mutex the panic left unlocked: "fatal error: sync: unlock
// of unlocked mutex"); every record acknowledged before is there after a
// reopen. (An adversarial review found the hang and the fatal error with
// a Logger whose handler panicked at the failure's record; a Logger
// cannot panic through the log now, package safelog, and
// TestLoggerPanicMidRound checks that.)
func TestPanicMidRound(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   Op
	}{
		{"write", OpWrite},
		{"allocate", OpAllocate},
		{"rotate", OpCreate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewMemFS()
			l := mustOpen(t, fs, Options{Sync: SyncAlways, SegmentSize: MinSegmentSize})
			var armed atomic.Bool
			fs.SetInjector(func(op Op, name string) error {
				if op == tc.op && armed.Load() {
					armed.Store(false)
					panic("the FS broke")
				}
				return nil
			})
			payload := make([]byte, 512)
			var acked uint64
			for range 10 {
				lsn, err := l.Append(payload)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.WaitDurable(lsn); err != nil {
					t.Fatal(err)
				}
				acked = lsn
			}
			armed.Store(true)
			ok, p := withinOrHang(t, 10*time.Second, "appends until the FS panics", func() {
				for i := 0; i < 4096 && armed.Load(); i++ {
					lsn, err := l.Append(payload)
					if err != nil {
						return
					}
					if l.WaitDurable(lsn) == nil {
						acked = lsn
					}
				}
			})
			if !ok {
				return
			}
			if p == nil {
				t.Fatalf("the FS never panicked (armed %v)", armed.Load())
			}
			t.Logf("panic %v; acknowledged through %d", p, acked)
			ok, _ = withinOrHang(t, 10*time.Second, "Append and WaitDurable after the panic", func() {
				lsn, err := l.Append(payload)
				if err == nil {
					err = l.WaitDurable(lsn)
				}
				if err == nil {
					t.Errorf("a record appended after the FS's panic mid-round was acknowledged")
				}
			})
			if !ok {
				return
			}
			withinOrHang(t, 10*time.Second, "Close", func() { t.Logf("Close: %v", l.Close()) })
			l2 := mustOpen(t, fs, Options{Sync: SyncAlways, SegmentSize: MinSegmentSize})
			defer l2.Close()
			if got := l2.LastLSN(); got < acked {
				t.Errorf("reopened log ends at %d, before the acknowledged %d", got, acked)
			}
		})
	}
}

// TestLoggerPanicMidRound: a Logger whose handler panics at the records
// the leader logs mid-round (a failed write, a failed reservation, a
// postponed rotation) panics nobody: the record goes to the fallback
// (package safelog), the failed write fails the log as it would anyway,
// a failed reservation or rotation does not, and Close returns.
func TestLoggerPanicMidRound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    Op
		err   error
		msg   string
		fails bool
	}{
		{"write", OpWrite, syscall.EIO, "wal: write failed; the log refuses further appends", true},
		{"allocate", OpAllocate, syscall.ENOSPC, "wal: cannot reserve segment space; appending without", false},
		{"rotate", OpCreate, syscall.ENOSPC, "wal: cannot start a new segment; appending to the active one", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fb bytes.Buffer
			old := safelog.Fallback
			safelog.Fallback = slog.NewTextHandler(&fb, nil)
			defer func() { safelog.Fallback = old }()
			fs := NewMemFS()
			var panics atomic.Int64
			l := mustOpen(t, fs, Options{Sync: SyncAlways, SegmentSize: MinSegmentSize, Logger: slog.New(funcHandler{fn: func(r slog.Record) {
				if r.Message == tc.msg {
					panics.Add(1)
					panic("logger broke")
				}
			}})})
			var fail atomic.Bool
			fs.SetInjector(func(op Op, name string) error {
				if op == tc.op && fail.Load() {
					return tc.err
				}
				return nil
			})
			payload := make([]byte, 512)
			fail.Store(true)
			var lastErr error
			ok, p := withinOrHang(t, 10*time.Second, "appends until the handler panics", func() {
				for i := 0; i < 4096 && panics.Load() == 0; i++ {
					lsn, err := l.Append(payload)
					if err == nil {
						err = l.WaitDurable(lsn)
					}
					lastErr = err
					if err != nil {
						return
					}
				}
			})
			if !ok {
				return
			}
			if p != nil {
				t.Fatalf("the handler's panic reached the log's caller: %v", p)
			}
			if panics.Load() == 0 {
				t.Fatal("the handler never saw the record")
			}
			if !strings.Contains(fb.String(), "logger broke") {
				t.Errorf("the fallback got %q, want the record and the panic's value", fb.String())
			}
			fail.Store(false)
			if tc.fails != (lastErr != nil) || tc.fails != (l.Err() != nil) {
				t.Errorf("after the record: last append %v, Err %v; want the log failed: %v", lastErr, l.Err(), tc.fails)
			}
			if !tc.fails {
				lsn, err := l.Append(payload)
				if err == nil {
					err = l.WaitDurable(lsn)
				}
				if err != nil {
					t.Errorf("append after the handler's panic at a record that fails nothing: %v", err)
				}
			}
			withinOrHang(t, 10*time.Second, "Close", func() { t.Logf("Close: %v", l.Close()) })
		})
	}
}

// TestBlockedLoggerHandler: while the leader's handler is blocked in
// the record of a failed write (l.mu released: logUnlocked), the other
// calls of the log must neither acknowledge the failed record nor any
// later one, nor deadlock; Close waits for the leader and then returns.
func TestBlockedLoggerHandler(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(map[SyncMode]string{SyncAlways: "always", SyncInterval: "interval"}[mode], func(t *testing.T) {
			fs := NewMemFS()
			entered := make(chan struct{})
			release := make(chan struct{})
			var once sync.Once
			l := mustOpen(t, fs, Options{Sync: mode, SyncEvery: time.Millisecond, SegmentSize: MinSegmentSize, Logger: slog.New(funcHandler{fn: func(r slog.Record) {
				if r.Level >= slog.LevelError {
					once.Do(func() { close(entered) })
					<-release
				}
			}})})
			first, err := l.Append([]byte("a"))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.WaitDurable(first); err != nil {
				t.Fatal(err)
			}
			var fail atomic.Bool
			fs.SetInjector(func(op Op, name string) error {
				if (op == OpWrite || op == OpSync) && fail.Load() {
					return errors.New("injected EIO")
				}
				return nil
			})
			fail.Store(true)
			lsn, err := l.Append([]byte("b"))
			if err != nil {
				t.Fatal(err)
			}
			leaderErr := make(chan error, 1)
			go func() { leaderErr <- l.WaitDurable(lsn) }()
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("no error record")
			}
			fail.Store(false) // from here writes would succeed
			check := func(what string, fn func() error, wantErr bool) {
				t.Helper()
				var err error
				ok, p := withinOrHang(t, 5*time.Second, what, func() { err = fn() })
				if !ok {
					return
				}
				if p != nil {
					t.Errorf("%s: panic %v", what, p)
				}
				if wantErr && err == nil {
					t.Errorf("%s: nil while the log has failed", what)
				}
				t.Logf("%s: %v", what, err)
			}
			check("Stats", func() error { l.Stats(); return nil }, false)
			check("Err", func() error { return l.Err() }, true)
			check("WaitDurable(first)", func() error { return l.WaitDurable(first) }, false)
			check("WaitDurable(failed)", func() error { return l.WaitDurable(lsn) }, true)
			check("Append", func() error { _, err := l.Append([]byte("c")); return err }, true)
			check("Sync", func() error { return l.Sync() }, true)
			check("WaitWritten(failed)", func() error {
				if mode == SyncInterval {
					return l.WaitWritten(lsn)
				}
				return errors.New("n/a")
			}, true)
			check("StartSegment", func() error { return l.StartSegment() }, true)
			check("TruncateBefore", func() error { return l.TruncateBefore(first) }, false)
			if d := l.DurableLSN(); d >= lsn {
				t.Errorf("DurableLSN %d covers the failed record %d", d, lsn)
			}
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			select {
			case err := <-closed:
				t.Logf("Close returned while the leader's handler runs: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			select {
			case err := <-leaderErr:
				if err == nil {
					t.Error("the leader's WaitDurable of the failed record returned nil")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("leader HANG after release")
			}
			select {
			case err := <-closed:
				if err == nil {
					t.Error("Close of a failed log returned nil")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close HANG after release")
			}
			if d := l.DurableLSN(); d >= lsn {
				t.Errorf("DurableLSN %d covers the failed record %d", d, lsn)
			}
		})
	}
}

// TestPanicInAdminChange: the FS panics in a segment change the caller
// asked for (StartSegment's new segment): the panic reaches the caller,
// the log refuses further appends, and Close returns (a change left
// leading set for ever before).
func TestPanicInAdminChange(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{Sync: SyncAlways})
	lsn, err := l.Append([]byte("a"))
	if err == nil {
		err = l.WaitDurable(lsn)
	}
	if err != nil {
		t.Fatal(err)
	}
	fs.SetInjector(func(op Op, name string) error {
		if op == OpCreate {
			panic("the FS broke")
		}
		return nil
	})
	ok, p := withinOrHang(t, 10*time.Second, "StartSegment", func() { l.StartSegment() })
	if !ok {
		return
	}
	fs.SetInjector(nil)
	if p == nil {
		t.Fatal("the FS's panic in StartSegment did not reach the caller")
	}
	if _, err := l.Append([]byte("b")); err == nil {
		t.Error("Append after a panic in a segment change: nil, want the log failed")
	}
	withinOrHang(t, 10*time.Second, "Close", func() { t.Logf("Close: %v", l.Close()) })
	l2 := mustOpen(t, fs, Options{Sync: SyncAlways})
	defer l2.Close()
	if got := l2.LastLSN(); got < lsn {
		t.Errorf("reopened log ends at %d, before the acknowledged %d", got, lsn)
	}
}
