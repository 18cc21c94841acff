//go:build filterstore_testhooks

package store

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
)

// TestLandedCatalogFailureLoggerPanicWritesResync: Close's checkpoint
// commit fails with EIO after it reached the file (its fdatasync failed),
// and the Logger's handler panics at the "store failed" record that
// catalogFailed's fail logs. The panic reaches nobody (package safelog),
// and the RESYNC marker, which every failed catalog commit writes so that
// the next Open drops the catalog's cached pages, is written. (An
// adversarial review found the marker skipped when the panic went on to
// Close's caller.)
func TestLandedCatalogFailureLoggerPanicWritesResync(t *testing.T) {
	dir := t.TempDir()
	var armed atomic.Bool
	h := reentryHandler{fn: func(r slog.Record) {
		if armed.Load() && r.Message == "store failed: refusing changes until reopened" {
			armed.Store(false)
			panic("logger broke")
		}
	}}
	s := mustOpen(t, dir, &Options{Logger: slog.New(h), CheckpointEvery: -1})
	f, err := s.CreateBloom("f", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range 100 {
		must(t, second(f.Add(key(i))))
	}
	catalog.AfterCommitHook = func(_ string, err error) error {
		if err != nil {
			return err
		}
		return syscall.EIO // the commit landed, its sync failed
	}
	t.Cleanup(func() { catalog.AfterCommitHook = nil })
	armed.Store(true)
	ok, p := within(t, reentryDeadline, "Close", func() { s.Close() })
	catalog.AfterCommitHook = nil
	if !ok {
		return
	}
	if p != nil || armed.Load() {
		t.Fatalf("Close: panic %v (want none); the handler saw the failure record: %v", p, !armed.Load())
	}
	if _, err := os.Stat(filepath.Join(dir, format.ResyncName)); err != nil {
		t.Errorf("no %s after a failed catalog commit whose failure record's handler panicked: %v", format.ResyncName, err)
	}
	s2, err := Open(dir, nil)
	must(t, err)
	defer s2.Close()
	wantKeysClean(t, s2, "f", 100)
}
