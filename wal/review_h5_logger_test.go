package wal

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// h5Handler runs fn on every record.
type h5Handler struct{ fn func(r slog.Record) }

func (h h5Handler) Enabled(context.Context, slog.Level) bool { return true }
func (h h5Handler) Handle(_ context.Context, r slog.Record) error {
	h.fn(r)
	return nil
}
func (h h5Handler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h h5Handler) WithGroup(string) slog.Handler      { return h }

// h5Within runs fn and fails t if it does not return within d; it
// returns fn's panic.
func h5Within(t *testing.T, d time.Duration, what string, fn func()) (ok bool, p any) {
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

// TestReviewH5LoggerPanicsMidRound: the Logger's handler panics at a
// record the leader logs mid-round, with l.mu released (a failed
// reservation, a postponed rotation) or held (a failed write). The panic
// reaches the caller; the log must then refuse further appends (the
// round's records may be unwritten), and Close must return, not hang
// (leading left set) nor kill the process (await's deferred Unlock of a
// mutex the panic left unlocked: "fatal error: sync: unlock of unlocked
// mutex").
func TestReviewH5LoggerPanicsMidRound(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   Op
		err  error
		msg  string
	}{
		{"write", OpWrite, syscall.EIO, "wal: write failed; the log refuses further appends"},
		{"allocate", OpAllocate, syscall.ENOSPC, "wal: cannot reserve segment space; appending without"},
		{"rotate", OpCreate, syscall.ENOSPC, "wal: cannot start a new segment; appending to the active one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewMemFS()
			var armed atomic.Bool
			l := mustOpen(t, fs, Options{Sync: SyncAlways, SegmentSize: MinSegmentSize, Logger: slog.New(h5Handler{fn: func(r slog.Record) {
				if armed.Load() && r.Message == tc.msg {
					armed.Store(false)
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
			fail.Store(true)
			armed.Store(true)
			ok, p := h5Within(t, 10*time.Second, "appends until the handler panics", func() {
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
				t.Fatalf("the handler never panicked (armed %v)", armed.Load())
			}
			t.Logf("panic %v; acknowledged through %d", p, acked)
			ok, _ = h5Within(t, 10*time.Second, "Append and WaitDurable after the panic", func() {
				lsn, err := l.Append(payload)
				if err == nil {
					err = l.WaitDurable(lsn)
				}
				if err == nil {
					t.Errorf("a record appended after the handler's panic mid-round was acknowledged")
				}
			})
			if !ok {
				return
			}
			fail.Store(false)
			h5Within(t, 10*time.Second, "Close", func() { t.Logf("Close: %v", l.Close()) })
			l2 := mustOpen(t, fs, Options{Sync: SyncAlways, SegmentSize: MinSegmentSize})
			defer l2.Close()
			if got := l2.LastLSN(); got < acked {
				t.Errorf("reopened log ends at %d, before the acknowledged %d", got, acked)
			}
		})
	}
}

// TestReviewH5BlockedHandler: while the leader's handler is blocked in
// the record of a failed write (l.mu released: logUnlocked), the other
// calls of the log must neither acknowledge the failed record nor any
// later one, nor deadlock; Close waits for the leader and then returns.
func TestReviewH5BlockedHandler(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(map[SyncMode]string{SyncAlways: "always", SyncInterval: "interval"}[mode], func(t *testing.T) {
			fs := NewMemFS()
			entered := make(chan struct{})
			release := make(chan struct{})
			var once sync.Once
			l := mustOpen(t, fs, Options{Sync: mode, SyncEvery: time.Millisecond, SegmentSize: MinSegmentSize, Logger: slog.New(h5Handler{fn: func(r slog.Record) {
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
				ok, p := h5Within(t, 5*time.Second, what, func() { err = fn() })
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
