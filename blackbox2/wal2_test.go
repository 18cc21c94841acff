package blackbox2_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/wal"
)

type panicHandler struct{}

func (panicHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panicHandler) Handle(context.Context, slog.Record) error { panic("logger exploded") }
func (h panicHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h panicHandler) WithGroup(string) slog.Handler           { return h }

// TestWALLoggerPanicRecovered checks Options.Logger's "a panic in it is
// recovered and the record goes to standard error instead": Open of a log
// with a torn tail (which it logs) succeeds with a panicking handler.
func TestWALLoggerPanicRecovered(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{})
	l.Append([]byte("a"))
	l.Close()
	name := "/w/" + wal.SegmentName(1)
	d, _ := fs.ReadFile(name)
	fs.WriteFile(name, append(d, 9, 9, 9))
	var err error
	noPanic(t, "Open", func() {
		var l2 *wal.Log
		l2, err = wal.Open("/w", wal.Options{FS: fs, Logger: slog.New(panicHandler{})})
		if err == nil {
			l2.Close()
		}
	})
	if err != nil {
		t.Errorf("Open with a panicking logger: %v", err)
	}
}

// TestWALOnSegmentError checks OnSegment's "An error fails that creation
// like a failed write: the log refuses further appends".
func TestWALOnSegmentError(t *testing.T) {
	fs := wal.NewMemFS()
	no := errors.New("cannot record segment")
	calls := 0
	l := openMem(t, fs, wal.Options{SegmentSize: 100, OnSegment: func(first uint64) error {
		calls++
		if first > 1 {
			return no
		}
		return nil
	}})
	defer l.Close()
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		var n uint64
		n, err = l.Append([]byte("0123456789012345678901234567890123456789"))
		if err == nil {
			err = l.WaitDurable(n)
		}
	}
	if !errors.Is(err, no) || !errors.Is(l.Err(), no) {
		t.Errorf("after OnSegment failed: err %v, Err %v", err, l.Err())
	}
	if _, err := l.Append([]byte("x")); err == nil {
		t.Error("Append accepted after OnSegment failed")
	}
}

// TestWALPostponedRotation checks the package doc's "A new segment that
// cannot be made for want of room (ENOSPC ...) ... is not such a failure, if
// its name never reached the directory ...: the log logs it, counts it
// (Stats.PostponedRotations) and goes on appending to the active segment,
// which grows past SegmentSize".
func TestWALPostponedRotation(t *testing.T) {
	fs := wal.NewMemFS()
	l := openMem(t, fs, wal.Options{SegmentSize: 100})
	defer l.Close()
	l.Append([]byte("first"))
	must(t, l.Sync())
	fs.SetInjector(func(op wal.Op, name string) error {
		if op == wal.OpCreate && strings.HasSuffix(name, ".tmp") {
			return syscall.ENOSPC
		}
		return nil
	})
	for range 10 {
		n, err := l.Append([]byte("0123456789012345678901234567890123456789"))
		if err != nil {
			t.Fatalf("Append with rotation postponed: %v", err)
		}
		if err := l.WaitDurable(n); err != nil {
			t.Fatalf("WaitDurable with rotation postponed: %v", err)
		}
	}
	fs.SetInjector(nil)
	st := l.Stats()
	if st.PostponedRotations == 0 || l.Err() != nil {
		t.Errorf("Stats %+v, Err %v", st, l.Err())
	}
	n, err := l.Append([]byte("after"))
	must(t, err)
	must(t, l.WaitDurable(n))
	lsns, _ := replayAll(t, l, 1)
	if len(lsns) != 12 {
		t.Errorf("records %v", lsns)
	}
}

// TestWALFailedSyncLostOnCrash checks MemFS's fsyncgate model: "every byte
// written to the file since its last Successful Sync is lost. A lost byte
// still reads back ... but no later Sync makes it durable ... Crash never
// keeps it" — so records whose WaitDurable failed are absent after any Crash,
// while Kill keeps them ("still reads back ... also across Kill").
func TestWALFailedSyncLostOnCrash(t *testing.T) {
	for seed := range 20 {
		fs := wal.NewMemFS()
		l := openMem(t, fs, wal.Options{})
		n, _ := l.Append([]byte("durable"))
		must(t, l.WaitDurable(n))
		fs.SetInjector(func(op wal.Op, name string) error {
			if op == wal.OpSync {
				return errAlloc
			}
			return nil
		})
		n, _ = l.Append([]byte("lost-one"), []byte("lost-two"))
		if err := l.WaitDurable(n); err == nil {
			t.Fatal("WaitDurable succeeded under an injected sync failure")
		}
		fs.SetInjector(nil)
		killed := fs.Kill()
		l.CloseUntrimmed()
		crashed := fs.Crash(rand.New(rand.NewPCG(uint64(seed), 9)))
		c, err := wal.Open("/w", memOpts(crashed))
		if err != nil {
			t.Fatalf("seed %d: Open after crash: %v", seed, err)
		}
		if c.LastLSN() != 1 {
			t.Errorf("seed %d: after crash LastLSN %d, want 1 (the failed sync's records lost)", seed, c.LastLSN())
		}
		c.Close()
		k, err := wal.Open("/w", memOpts(killed))
		must(t, err)
		if k.LastLSN() != 3 {
			t.Errorf("seed %d: after Kill LastLSN %d, want 3 (lost bytes still read back)", seed, k.LastLSN())
		}
		k.Close()
	}
}
