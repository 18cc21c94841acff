package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTruncateBeforeFailedDirSync: a TruncateBefore whose directory sync
// fails after a segment's file was removed reports the error and takes
// the segment out of the log's list: FirstLSN names a segment that exists
// and Replay from it works. Before, the list kept the removed segment
// until a later TruncateBefore succeeded, and Replay(FirstLSN()) failed
// on the missing file (an adversarial review's finding).
func TestTruncateBeforeFailedDirSync(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: MinSegmentSize + 40})
	defer l.Close()
	for i := range 6 {
		lsn, err := l.Append(fmt.Appendf(nil, "record %02d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(lsn); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want 3 segments or more, have %v", l.Segments())
	}
	fs.SetInjector(func(op Op, name string) error {
		if op == OpSyncDir {
			return errors.New("injected EIO")
		}
		return nil
	})
	terr := l.TruncateBefore(l.LastLSN())
	fs.SetInjector(nil)
	if terr == nil {
		t.Fatal("TruncateBefore with a failing directory sync succeeded")
	}
	first := l.FirstLSN()
	if _, err := fs.Open(testDir + "/" + SegmentName(first)); err != nil {
		t.Errorf("after the failed TruncateBefore (%v), FirstLSN %d names no file: %v (segments %v)", terr, first, err, l.Segments())
	}
	n := 0
	if err := l.Replay(first, func(uint64, []byte) error { n++; return nil }); err != nil || n == 0 {
		t.Errorf("Replay(FirstLSN()) after the failed TruncateBefore: %d records, %v", n, err)
	}
}

// TestSyncReturnsStickyError: after a failed fdatasync (here of a new
// segment's file, in StartSegment, with every record synced before it)
// Sync returns the log's sticky error, as Err's doc says. Before, it
// returned nil, having no record left to wait for (an adversarial
// review's finding).
func TestSyncReturnsStickyError(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	defer l.Close()
	if _, err := l.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	fs.SetInjector(func(op Op, name string) error {
		if op == OpSync && strings.HasSuffix(name, ".tmp") {
			return errors.New("injected EIO")
		}
		return nil
	})
	serr := l.StartSegment()
	fs.SetInjector(nil)
	if serr == nil || l.Err() == nil {
		t.Fatalf("StartSegment with a failing fdatasync: %v, Err %v", serr, l.Err())
	}
	if _, err := l.Append([]byte("b")); err == nil {
		t.Error("Append after the failure succeeded")
	}
	if err := l.Sync(); err == nil || !errors.Is(err, l.Err()) {
		t.Errorf("Sync after the failure: %v, want the sticky error %v", err, l.Err())
	}
}

// TestCloseReturnsStickyError: Close of a log whose segment change failed,
// with every record synced before it, returns the sticky error, as Sync
// does. Before, it returned nil (listed open in the twenty-third session).
func TestCloseReturnsStickyError(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	if _, err := l.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	fs.SetInjector(func(op Op, name string) error {
		if op == OpSync && strings.HasSuffix(name, ".tmp") {
			return errors.New("injected EIO")
		}
		return nil
	})
	serr := l.StartSegment()
	fs.SetInjector(nil)
	if serr == nil || l.Err() == nil {
		t.Fatalf("StartSegment with a failing fdatasync: %v, Err %v", serr, l.Err())
	}
	if err := l.Close(); err == nil || !errors.Is(err, l.Err()) {
		t.Errorf("Close after the failure: %v, want the sticky error %v", err, l.Err())
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

// statsHandler is a slog.Handler that calls Stats of its log for every
// record, as an engine's handler might to add the WAL's counters to its
// error records.
type statsHandler struct {
	l     *Log
	calls atomic.Int64
}

func (h *statsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *statsHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *statsHandler) WithGroup(string) slog.Handler            { return h }
func (h *statsHandler) Handle(context.Context, slog.Record) error {
	if h.l != nil {
		h.l.Stats()
		h.calls.Add(1)
	}
	return nil
}

// TestLoggerMayCallStats: a Logger whose handler calls Stats does not
// hang the log when it logs a failed write (an adversarial review found
// the store's writers, background sync and Close waiting for ever there)
// or a failed trim at Close (the log's mutex was held while it logged
// that too).
func TestLoggerMayCallStats(t *testing.T) {
	for _, fault := range []Op{OpWrite, OpTruncate} {
		t.Run(opNames[fault], func(t *testing.T) {
			fs := NewMemFS()
			h := &statsHandler{}
			l := mustOpen(t, fs, Options{Logger: slog.New(h)})
			h.l = l
			if _, err := l.Append([]byte("a")); err != nil {
				t.Fatal(err)
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			fs.SetInjector(func(op Op, name string) error {
				if op == fault {
					return errors.New("injected EIO")
				}
				return nil
			})
			done := make(chan error, 1)
			go func() {
				if fault == OpWrite {
					if _, err := l.Append([]byte("b")); err == nil {
						if err := l.Sync(); err == nil {
							done <- errors.New("Append and Sync of a record whose write fails returned nil")
							return
						}
					}
				}
				done <- l.Close()
			}()
			select {
			case err := <-done:
				if fault == OpWrite && err == nil {
					t.Errorf("Close after a failed write: nil, want the sticky error")
				}
				if err != nil && fault == OpTruncate {
					t.Errorf("Close whose trim failed: %v, want nil (the records are durable)", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the log hung logging a failed %s with a handler that calls Stats", opNames[fault])
			}
			if h.calls.Load() == 0 {
				t.Errorf("no record was logged for the failed %s", opNames[fault])
			}
		})
	}
}
