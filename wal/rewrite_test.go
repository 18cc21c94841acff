package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// lostRecordLog appends records 1 (durable) and 2, whose fdatasync fails
// (MemFS: its bytes read back but are never durable), kills the process
// and returns the file system the next process sees, with records 3 and
// on, if more, in a second segment written and synced before the kill.
func lostRecordLog(t *testing.T, lost []byte, more int) *MemFS {
	t.Helper()
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	lsn, _ := l.Append([]byte("a"))
	if err := l.WaitDurable(lsn); err != nil {
		t.Fatal(err)
	}
	fs.SetInjector(func(op Op, _ string) error {
		if op == OpSync {
			return errors.New("EIO")
		}
		return nil
	})
	lsn, _ = l.Append(lost)
	if l.WaitDurable(lsn) == nil {
		t.Fatal("WaitDurable of the record whose sync failed succeeded")
	}
	fs.SetInjector(nil)
	k := fs.Kill()
	l.Close()
	if more > 0 {
		// The next process, as the store's Open before RewriteInherited
		// existed: it syncs (nothing to write), then appends to a
		// segment of its own.
		l2 := mustOpen(t, k, Options{})
		for i := range more {
			lsn, _ := l2.Append(fmt.Appendf(nil, "m%d", i))
			if err := l2.WaitDurable(lsn); err != nil {
				t.Fatal(err)
			}
		}
		k = k.Kill()
		l2.Close()
	}
	return k
}

// TestRewriteInheritedMakesLostRecordDurable: a record whose writer's
// fdatasync failed reads back in the next process; once that process has
// called RewriteInherited with an LSN below it, every later power loss
// keeps it whole, and a record appended after it is not taken for
// corruption behind a hole. Without the rewrite (after = 2: nothing to
// rewrite), the power loss leaves zeros where it was, which Open reports
// as corruption in a segment that is not the last (as
// TestFailedSyncThenNewWriter shows), so the test can fail.
func TestRewriteInheritedMakesLostRecordDurable(t *testing.T) {
	for _, lost := range [][]byte{[]byte("b"), bytes.Repeat([]byte{7}, 5000)} {
		for _, after := range []uint64{0, 1, 2} {
			k := lostRecordLog(t, lost, 0)
			l := mustOpen(t, k, Options{})
			if err := l.RewriteInherited(after); err != nil {
				t.Fatalf("RewriteInherited(%d): %v", after, err)
			}
			lsn, _ := l.Append([]byte("c"))
			if err := l.WaitDurable(lsn); err != nil || lsn != 3 {
				t.Fatalf("append after the rewrite: %d, %v", lsn, err)
			}
			l.Close()
			for seed := range uint64(20) {
				crashed := k.Crash(rand.New(rand.NewPCG(seed, 2)))
				l, err := Open(testDir, Options{FS: crashed, Logger: quiet})
				if after >= 2 {
					var ce *CorruptError
					if !errors.As(err, &ce) {
						t.Fatalf("len %d, after %d, crash seed %d: Open: %v; want the never-rewritten record reported corrupt", len(lost), after, seed, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("len %d, after %d, crash seed %d: Open after the crash: %v", len(lost), after, seed, err)
				}
				got := replayAll(t, l, 1)
				l.Close()
				want := []rec{{1, []byte("a")}, {2, lost}, {3, []byte("c")}}
				if len(got) != len(want) {
					t.Fatalf("len %d, after %d, crash seed %d: %d records after the crash, want %d", len(lost), after, seed, len(got), len(want))
				}
				for i := range want {
					if got[i].lsn != want[i].lsn || !bytes.Equal(got[i].payload, want[i].payload) {
						t.Fatalf("len %d, after %d, crash seed %d: record %d is %d (%d bytes), want %d (%d bytes)",
							len(lost), after, seed, i, got[i].lsn, len(got[i].payload), want[i].lsn, len(want[i].payload))
					}
				}
			}
		}
	}
}

// TestRewriteInheritedEarlierSegment: the record whose sync failed sits in
// a segment that another follows (a later process appended behind it):
// RewriteInherited copies that segment too, and a power loss then keeps
// every record.
func TestRewriteInheritedEarlierSegment(t *testing.T) {
	k := lostRecordLog(t, []byte("lost"), 2)
	l := mustOpen(t, k, Options{})
	if got := len(segFiles(t, k)); got != 2 {
		t.Fatalf("%d segments, want 2", got)
	}
	if err := l.RewriteInherited(1); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for seed := range uint64(20) {
		l, err := Open(testDir, Options{FS: k.Crash(rand.New(rand.NewPCG(seed, 3))), Logger: quiet})
		if err != nil {
			t.Fatalf("crash seed %d: Open: %v", seed, err)
		}
		if got := replayAll(t, l, 1); len(got) != 4 || string(got[1].payload) != "lost" {
			t.Fatalf("crash seed %d: %d records (%v), want 4 with record 2 kept", seed, len(got), got)
		}
		l.Close()
	}
}

// TestRewriteInheritedNothingToDo: after a clean Close, or with after at
// or past the last record, RewriteInherited writes nothing (a reopen stays
// a few syscalls) and the log appends as before.
func TestRewriteInheritedNothingToDo(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	for i := range 5 {
		lsn, _ := l.Append(fmt.Appendf(nil, "r%d", i))
		if err := l.WaitDurable(lsn); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	l = mustOpen(t, fs, Options{})
	before := l.Stats()
	var ops []string
	fs.SetInjector(func(op Op, name string) error {
		ops = append(ops, fmt.Sprint(op, " ", name))
		return nil
	})
	for _, after := range []uint64{5, 6, 100} {
		if err := l.RewriteInherited(after); err != nil {
			t.Fatalf("RewriteInherited(%d): %v", after, err)
		}
	}
	fs.SetInjector(nil)
	if st := l.Stats(); st.Syncs != before.Syncs || st.DirSyncs != before.DirSyncs || len(ops) != 0 {
		t.Fatalf("RewriteInherited with nothing to rewrite: syncs %d -> %d, dir syncs %d -> %d, file ops %v",
			before.Syncs, st.Syncs, before.DirSyncs, st.DirSyncs, ops)
	}
	lsn, err := l.Append([]byte("x"))
	if err != nil || l.WaitDurable(lsn) != nil || lsn != 6 {
		t.Fatalf("append: %d, %v", lsn, err)
	}
	l.Close()
}

// TestRewriteInheritedFailure: a failure of any step of the copy (create,
// write, sync, rename, directory sync) is returned and makes the log
// refuse appends. The copy never writes over the segment, so a power loss
// right then keeps record 1, which was durable, and at most drops the
// record whose sync failed; and a process that rewrites successfully later
// makes that one durable too.
func TestRewriteInheritedFailure(t *testing.T) {
	for _, failOp := range []Op{OpCreate, OpWrite, OpSync, OpRename, OpSyncDir} {
		k := lostRecordLog(t, []byte("lost"), 0)
		l := mustOpen(t, k, Options{})
		boom := errors.New("injected")
		k.SetInjector(func(op Op, _ string) error {
			if op == failOp {
				return boom
			}
			return nil
		})
		if err := l.RewriteInherited(0); !errors.Is(err, boom) {
			t.Fatalf("%v: RewriteInherited: %v, want the injected error", failOp, err)
		}
		k.SetInjector(nil)
		if _, err := l.Append([]byte("no")); err == nil {
			t.Fatalf("%v: Append after a failed rewrite succeeded", failOp)
		}
		l.Close()
		for seed := range uint64(10) {
			l, err := Open(testDir, Options{FS: k.Crash(rand.New(rand.NewPCG(seed, 5))), Logger: quiet})
			if err != nil {
				t.Fatalf("%v, crash seed %d: Open after a failed rewrite and a power loss: %v", failOp, seed, err)
			}
			got := replayAll(t, l, 1)
			l.Close()
			if len(got) < 1 || len(got) > 2 || string(got[0].payload) != "a" || len(got) == 2 && string(got[1].payload) != "lost" {
				t.Fatalf("%v, crash seed %d: %d records (%v), want record 1, and record 2 whole or not at all", failOp, seed, len(got), got)
			}
		}
		k2 := k.Kill()
		l = mustOpen(t, k2, Options{})
		if err := l.RewriteInherited(0); err != nil {
			t.Fatalf("%v: the next process's rewrite: %v", failOp, err)
		}
		l.Close()
		l, err := Open(testDir, Options{FS: k2.Crash(rand.New(rand.NewPCG(uint64(failOp), 4))), Logger: quiet})
		if err != nil {
			t.Fatalf("%v: Open after the crash: %v", failOp, err)
		}
		if got := replayAll(t, l, 1); len(got) != 2 || string(got[1].payload) != "lost" {
			t.Fatalf("%v: %d records (%v), want 2", failOp, len(got), got)
		}
		l.Close()
	}
}
