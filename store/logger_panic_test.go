package store

import (
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/wal"
)

// TestLoggerPanicOnWALFailure: a Logger whose handler panics at the
// WAL's "write failed" record (logged by the WAL's leader mid-round).
// The panic reaches no caller (package safelog): the change fails with
// the write's error, later calls and Close return, and the next Open
// recovers every acknowledged key. (An adversarial review found the
// panic, which then reached the caller, leaving the WAL's round led by
// no one: Close hung.)
func TestLoggerPanicOnWALFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode SyncMode
		op   wal.Op
		// inClose: the failure is met by Close's checkpoint (a sync
		// under SyncInterval), not by an Add.
		inClose bool
		// msg: the record whose handler panics.
		msg string
		err error
	}{
		{"SyncAlways-write-Add", SyncAlways, wal.OpWrite, false, walFailedMsg, syscall.EIO},
		{"SyncAlways-sync-Add", SyncAlways, wal.OpSync, false, walFailedMsg, syscall.EIO},
		{"SyncInterval-sync-Close", SyncInterval, wal.OpSync, true, walFailedMsg, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSimWorld(t, tc.mode)
			w.opts.SyncEvery = time.Hour
			w.opts.CheckpointEvery = -1
			fail := &failSwitch{err: tc.err}
			w.fs.SetInjector(fail.wal(tc.op))
			var armed atomic.Bool
			h := reentryHandler{fn: func(r slog.Record) {
				if armed.Load() && r.Level >= slog.LevelError && r.Message == tc.msg {
					armed.Store(false)
					panic("logger broke")
				}
			}}
			w.opts.Logger = slog.New(h)
			s, err := w.open(t)
			must(t, err)
			f, err := s.CreateBloom("f", BloomConfig{Capacity: 1000})
			must(t, err)
			for i := range 100 {
				_, err := f.Add(key(i))
				must(t, err)
			}
			fail.on.Store(true)
			armed.Store(true)
			if !tc.inClose {
				ok, p := within(t, reentryDeadline, "Add whose WAL write fails, the logger panicking", func() {
					// Past a rotation, for the reservation of a new
					// segment (SegmentSize 64 KiB).
					for i := 1000; i < 20000 && armed.Load(); i++ {
						f.Add(key(i))
					}
				})
				if !ok {
					return
				}
				if p != nil {
					t.Fatalf("the handler's panic reached Add's caller: %v", p)
				}
				ok, _ = within(t, reentryDeadline, "Add after the panic", func() {
					if _, err := f.Add(key(1001)); err == nil {
						t.Error("Add after a failed WAL write returned nil")
					}
				})
				if !ok {
					return
				}
			}
			ok, p := within(t, reentryDeadline, "Close", func() { s.Close() })
			if !ok {
				return
			}
			if p != nil {
				t.Fatalf("the handler's panic reached Close's caller: %v", p)
			}
			fail.on.Store(false)
			w.opts.Logger = nil
			if tc.mode == SyncAlways {
				// Every key was acknowledged durable: a power loss keeps it.
				w.powerLoss(nil, rand.New(rand.NewPCG(1, 2)))
			}
			s2, err := w.open(t)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer s2.Close()
			f2, err := s2.Bloom("f")
			must(t, err)
			for i := range 100 {
				if !f2.Has(key(i)) {
					t.Fatalf("acknowledged key %d lost", i)
				}
			}
		})
	}
}

const walFailedMsg = "wal: write failed; the log refuses further appends"
