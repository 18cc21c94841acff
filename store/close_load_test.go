package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// holdCheckpointHandler is a slog handler that, once armed, signals on the first
// "checkpoint" record (logged while the checkpoint holds the commit gate
// exclusively) and then holds the logging goroutine (and so the gate)
// for a while, so that a Load batch queues for the gate meanwhile.
type holdCheckpointHandler struct {
	armed  atomic.Bool
	signal chan struct{}
}

func (h *holdCheckpointHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdCheckpointHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "checkpoint" && h.armed.CompareAndSwap(true, false) {
		close(h.signal)
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
func (h *holdCheckpointHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *holdCheckpointHandler) WithGroup(string) slog.Handler      { return h }

// TestCloseDuringLoadLeavesChecksumsCurrent: Close runs while a Load's
// next batch waits for the commit gate behind Close's checkpoint (a
// logger that holds the checkpoint, gate held, makes the batch queue).
// The batch gets ErrClosed, or lands before the checkpoint; either way
// the next Open's Check finds no problem. Before, Close checkpointed,
// released the gate and took it again to mark itself closed: the batch
// went between, wrote words no record or checksum covers, and with the
// session marker removed every later Check reported its pages as damage
// (an adversarial review's finding).
func TestCloseDuringLoadLeavesChecksumsCurrent(t *testing.T) {
	for _, kind := range []string{"bloom", "counting", "cuckoo"} {
		for _, nkeys := range []int{loadBatch + 100, 3*loadBatch + 7, 12 * loadBatch} {
			t.Run(fmt.Sprintf("%s/%d", kind, nkeys), func(t *testing.T) {
				h := &holdCheckpointHandler{signal: make(chan struct{})}
				dir := t.TempDir()
				s := mustOpen(t, dir, &Options{CheckpointEvery: -1, Logger: slog.New(h)})
				var load func(keys func(func([]byte, error) bool)) error
				switch kind {
				case "bloom":
					f, err := s.CreateBloom("ld", BloomConfig{Capacity: 200000})
					must(t, err)
					load = func(k func(func([]byte, error) bool)) error { return f.Load(k) }
				case "counting":
					f, err := s.CreateCounting("ld", BloomConfig{Capacity: 200000})
					must(t, err)
					load = func(k func(func([]byte, error) bool)) error { return f.Load(k) }
				case "cuckoo":
					f, err := s.CreateCuckoo("ld", CuckooConfig{Capacity: 200000})
					must(t, err)
					load = func(k func(func([]byte, error) bool)) error { return f.Load(k) }
				}
				var closeErr error
				var cw sync.WaitGroup
				lerr := load(func(y func([]byte, error) bool) {
					for j := 0; j < nkeys; j++ {
						if !y([]byte(fmt.Sprintf("l%d", j)), nil) {
							return
						}
					}
					// The source is done: Close now, and return once its
					// checkpoint holds the gate.
					h.armed.Store(true)
					cw.Add(1)
					go func() { defer cw.Done(); closeErr = s.Close() }()
					<-h.signal
				})
				cw.Wait()
				t.Logf("load: %v; close: %v", lerr, closeErr)
				if closeErr != nil {
					t.Fatalf("Close: %v", closeErr)
				}
				s2 := mustOpen(t, dir, nil)
				defer s2.Close()
				if l, err := s2.List(); err == nil {
					for _, in := range l {
						t.Logf("after reopen: %s state %s", in.Name, in.State)
					}
				}
				if rep, err := s2.Check(); err != nil {
					msg := err.Error()
					t.Errorf("Check after a clean Close: %d problems (%d pages), the first: %s", len(rep.Problems), rep.Pages, msg[:strings.IndexByte(msg+"\n", '\n')])
				}
			})
		}
	}
}
