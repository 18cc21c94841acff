package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestRotationPostponedForWantOfRoom: while a new segment's temporary file
// cannot be created, written, synced or renamed into place for want of
// room or file descriptors, the log goes on appending to its active
// segment and every record is acknowledged (a StartSegment postpones
// too); once room is back it starts new segments again; and every
// acknowledged record survives a power loss at the end, in LSN order with
// its payload, as well as a clean reopen.
func TestRotationPostponedForWantOfRoom(t *testing.T) {
	seed := testseed.Seed(t)
	cases := []struct {
		name string
		op   Op
		err  error
	}{
		{"create ENOSPC", OpCreate, syscall.ENOSPC},
		{"create EMFILE", OpCreate, syscall.EMFILE},
		{"header write EDQUOT", OpWrite, syscall.EDQUOT},
		{"header sync ENOSPC", OpSync, syscall.ENOSPC},
		{"rename ENOSPC", OpRename, syscall.ENOSPC}, // a failed rename changes no name
	}
	for _, tc := range cases {
		for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				runPostponed(t, seed, tc.op, tc.err, mode)
			})
		}
	}
}

func runPostponed(t *testing.T, seed uint64, failOp Op, failErr error, mode SyncMode) {
	fs := NewMemFS()
	var full atomic.Bool
	var refused atomic.Int64
	fs.SetInjector(func(op Op, name string) error {
		if full.Load() && op == failOp && strings.HasSuffix(name, tmpSuffix) {
			refused.Add(1)
			return failErr
		}
		return nil
	})
	const segSize = MinSegmentSize + 300
	l := mustOpen(t, fs, Options{SegmentSize: segSize, Sync: mode})
	var last uint64
	appendN := func(n int) {
		t.Helper()
		for range n {
			lsn, err := l.Append(payloadFor(seed, last+1))
			if err != nil {
				t.Fatalf("Append after LSN %d: %v", last, err)
			}
			if err := l.WaitDurable(lsn); err != nil {
				t.Fatalf("WaitDurable(%d): %v", lsn, err)
			}
			last = lsn
		}
	}
	appendN(20)
	before := l.Stats().Segments
	if before < 3 {
		t.Fatalf("20 records made %d segments of %d bytes, want several", before, segSize)
	}
	full.Store(true)
	appendN(60)
	st := l.Stats()
	if refused.Load() == 0 || st.PostponedRotations == 0 {
		t.Fatalf("no rotation was tried while the disk was full (%d refused, %d postponed)", refused.Load(), st.PostponedRotations)
	}
	if st.Segments != before {
		t.Fatalf("segments went from %d to %d while no new one could be made", before, st.Segments)
	}
	// A checkpoint's StartSegment postpones too, and the log goes on.
	if err := l.StartSegment(); err != nil {
		t.Fatalf("StartSegment with no room for a segment: %v", err)
	}
	if got := l.Stats().PostponedRotations; got != st.PostponedRotations+1 {
		t.Fatalf("StartSegment: %d rotations postponed, want %d", got, st.PostponedRotations+1)
	}
	appendN(5)
	if err := l.Err(); err != nil {
		t.Fatalf("the log failed: %v", err)
	}
	full.Store(false)
	appendN(40)
	if got := l.Stats().Segments; got <= before {
		t.Fatalf("with room back the log made no new segment (%d segments, %d before)", got, before)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}

	check := func(what string, got []rec) {
		t.Helper()
		if uint64(len(got)) != last {
			t.Fatalf("%s: %d records, want %d", what, len(got), last)
		}
		for i, r := range got {
			if want := uint64(i + 1); r.lsn != want || !bytes.Equal(r.payload, payloadFor(seed, want)) {
				t.Fatalf("%s: record %d is LSN %d with payload %x, want LSN %d", what, i, r.lsn, r.payload, want)
			}
		}
	}
	lost := fs.Crash(rand.New(rand.NewPCG(seed, 7)))
	l2 := mustOpen(t, lost, Options{SegmentSize: segSize, Sync: mode})
	check("after a power loss", replayAll(t, l2, 1))
	l2.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l3 := mustOpen(t, fs, Options{SegmentSize: segSize, Sync: mode})
	check("after Close", replayAll(t, l3, 1))
	l3.Close()
}

// TestRotationFailuresThatStillFailTheLog: a new segment whose directory
// sync fails (its name is in the directory, durably or not), one whose
// temporary file fails with an I/O error, and a rotation away from the
// segment Open found, fail the log as before, even for want of room.
func TestRotationFailuresThatStillFailTheLog(t *testing.T) {
	seed := testseed.Seed(t)
	eio := errors.New("injected EIO")
	for _, tc := range []struct {
		name   string
		op     Op
		err    error
		reopen bool
	}{
		{"dir sync ENOSPC", OpSyncDir, syscall.ENOSPC, false},
		{"create EIO", OpCreate, eio, false},
		{"create ENOSPC leaving the segment Open found", OpCreate, syscall.ENOSPC, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewMemFS()
			const segSize = MinSegmentSize + 300
			l := mustOpen(t, fs, Options{SegmentSize: segSize})
			var last uint64
			for range 5 {
				lsn, err := l.Append(payloadFor(seed, last+1))
				if err == nil {
					err = l.WaitDurable(lsn)
				}
				if err != nil {
					t.Fatal(err)
				}
				last = lsn
			}
			if tc.reopen {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = mustOpen(t, fs, Options{SegmentSize: segSize})
			}
			var full atomic.Bool
			full.Store(true)
			fs.SetInjector(func(op Op, name string) error {
				if !full.Load() || op != tc.op {
					return nil
				}
				if op == OpSyncDir || strings.HasSuffix(name, tmpSuffix) {
					return tc.err
				}
				return nil
			})
			var err error
			for i := 0; i < 40 && err == nil; i++ {
				var lsn uint64
				if lsn, err = l.Append(payloadFor(seed, last+1)); err == nil {
					if err = l.WaitDurable(lsn); err == nil {
						last = lsn
					}
				}
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("appends with every new segment failing (%v): got %v, want the failure", tc.err, err)
			}
			if l.Err() == nil {
				t.Fatalf("the log did not fail")
			}
			if _, err := l.Append([]byte("x")); err == nil {
				t.Fatalf("the failed log took an append")
			}
			full.Store(false)
			l.Close()
			l2 := mustOpen(t, fs, Options{SegmentSize: segSize})
			defer l2.Close()
			got := replayAll(t, l2, 1)
			if uint64(len(got)) < last {
				t.Fatalf("reopened: %d records, want at least the %d acknowledged", len(got), last)
			}
		})
	}
}

// TestRotationPostponedInEmptySegmentOpenFound: a segment Open found
// holding no record (a StartSegment's, say) takes this log's records, so a
// rotation away from it postpones for want of room as from one this log
// made; the records survive a reopen.
func TestRotationPostponedInEmptySegmentOpenFound(t *testing.T) {
	seed := testseed.Seed(t)
	fs := NewMemFS()
	const segSize = MinSegmentSize + 300
	l := mustOpen(t, fs, Options{SegmentSize: segSize})
	var last uint64
	appendN := func(n int) {
		t.Helper()
		for range n {
			lsn, err := l.Append(payloadFor(seed, last+1))
			if err == nil {
				err = l.WaitDurable(lsn)
			}
			if err != nil {
				t.Fatalf("record %d: %v", last+1, err)
			}
			last = lsn
		}
	}
	appendN(5)
	if err := l.StartSegment(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, fs, Options{SegmentSize: segSize})
	fs.SetInjector(func(op Op, name string) error {
		if op == OpCreate && strings.HasSuffix(name, tmpSuffix) {
			return syscall.ENOSPC
		}
		return nil
	})
	appendN(30)
	if l.Stats().PostponedRotations == 0 {
		t.Fatal("30 records in segments of 300 bytes postponed no rotation")
	}
	fs.SetInjector(nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, fs, Options{SegmentSize: segSize})
	defer l.Close()
	if got := replayAll(t, l, 1); uint64(len(got)) != last {
		t.Fatalf("reopened: %d records, want %d", len(got), last)
	}
}
