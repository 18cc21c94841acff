package store

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
)

// TestBrokenFilterNoCheckpointStorm: with a broken filter keeping the WAL
// from its last checkpoint, the WAL's size stays above CheckpointBytes;
// the size trigger counts the bytes written since the last checkpoint,
// so an idle store runs no checkpoints, and a writing one one per
// CheckpointBytes. It used to run a checkpoint every 100 ms tick, forever,
// even idle, each one a fdatasync, a catalog commit and a new WAL segment.
func TestBrokenFilterNoCheckpointStorm(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	_, err := s.CreateBloom("a", BloomConfig{Capacity: 1 << 20})
	must(t, err)
	_, err = s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	must(t, s.Close())
	must(t, os.Remove(filepath.Join(dir, format.FiltersName, "2-0.flt"))) // b opens broken

	var ckpts checkpointCounter
	s = mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointBytes: 64 << 10, SegmentSize: 64 << 10, CheckpointEvery: -1,
		Logger: slog.New(&ckpts)})
	defer s.Close()
	a, err := s.Bloom("a")
	must(t, err)
	keys := make([][]byte, 1000)
	for round := range 20 { // about 20 x 16 KiB of records: past the threshold
		for i := range keys {
			keys[i] = key(round*len(keys) + i)
		}
		must(t, second(a.AddMany(keys)))
	}
	deadline := time.Now().Add(5 * time.Second)
	for ckpts.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // a size-triggered checkpoint ran
	}
	time.Sleep(300 * time.Millisecond) // the last one settles
	before := ckpts.n.Load()
	time.Sleep(1 * time.Second) // idle: 10 ticks of the size trigger
	if st := s.Stats(); st.WALSize < 3*(64<<10) {
		t.Fatalf("WALSize %d: the broken filter should keep about 20 records of 16 KiB", st.WALSize)
	}
	if n := ckpts.n.Load() - before; n > 1 {
		t.Fatalf("an idle store with a broken filter ran %d checkpoints in 1 s", n)
	}
	if before == 0 || before > 8 {
		t.Fatalf("%d checkpoints for about 5 times CheckpointBytes of records", before)
	}
}

// checkpointCounter is a slog.Handler counting the store's "checkpoint"
// events.
type checkpointCounter struct{ n atomic.Int64 }

func (c *checkpointCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *checkpointCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "checkpoint" {
		c.n.Add(1)
	}
	return nil
}
func (c *checkpointCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *checkpointCounter) WithGroup(string) slog.Handler      { return c }
