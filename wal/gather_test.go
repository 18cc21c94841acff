package wal

import (
	"sync"
	"testing"
	"time"
)

// closedLoop runs writers goroutines that each append and wait for
// durability perG times in a row, as a storage engine's request handlers
// do, and returns the log's stats.
func closedLoop(t *testing.T, l *Log, writers, perG int) Stats {
	t.Helper()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range perG {
				lsn, err := l.Append([]byte("record"))
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.WaitDurable(lsn); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return l.Stats()
}

// TestGatherFormsWholeGroups: closed-loop writers under SyncAlways share
// each sync as one group. Without gathering they split into two halves
// that alternate between the sync in flight and the next one: a sync then
// carries about half the writers' records and every write waits two syncs.
func TestGatherFormsWholeGroups(t *testing.T) {
	const writers, perG = 16, 25
	hfs := &hookFS{FS: NewMemFS(), hook: slowSync(2 * time.Millisecond)}
	l := mustOpen(t, hfs, Options{})
	defer l.Close()
	st := closedLoop(t, l, writers, perG)
	perSync := float64(st.Records) / float64(st.Syncs)
	t.Logf("%d records, %d syncs (%.1f records per sync), %d gathers", st.Records, st.Syncs, perSync, st.Gathers)
	if perSync < 0.75*writers {
		t.Errorf("%.1f records per sync from %d closed-loop writers, want at least %.0f", perSync, writers, 0.75*writers)
	}
	if st.Gathers == 0 {
		t.Errorf("no sync gathered its group")
	}
}

// TestGatherLoneWriter: a single writer, or writers that stopped coming,
// never make a sync wait for anyone: one writer's rounds never gather, and
// after a burst of one-shot writers a lone writer waits for them at most
// once.
func TestGatherLoneWriter(t *testing.T) {
	hfs := &hookFS{FS: NewMemFS(), hook: slowSync(time.Millisecond)}
	l := mustOpen(t, hfs, Options{})
	defer l.Close()
	if st := closedLoop(t, l, 1, 20); st.Gathers != 0 {
		t.Fatalf("a lone writer's syncs gathered %d times, want 0", st.Gathers)
	}
	// A burst of one-shot writers, then a lone writer again.
	closedLoop(t, l, 32, 1)
	before := l.Stats().Gathers
	if st := closedLoop(t, l, 1, 20); st.Gathers-before > 1 {
		t.Fatalf("a lone writer after a burst gathered %d times, want at most 1", st.Gathers-before)
	}
}
