package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// TestFailedStoreWritesNothingMore: "Close of a failed store writes
// nothing more", "the store records no checkpoint and deletes no WAL
// segment from then on". After a failed WAL fdatasync or filter msync,
// the calls that fail (changes, Checkpoint, Create, Drop, Rename, Load)
// and Close make no mutating call to the mapper or the WAL file system,
// and leave the catalog and the session marker as they were; the next
// Open finds every key. (Before, Close of a store whose msync had failed
// trimmed the WAL's reserved space: a truncate and an fdatasync. From an
// audit of the package doc's promises.)
func TestFailedStoreWritesNothingMore(t *testing.T) {
	for _, what := range []string{"msync", "fdatasync"} {
		for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
			t.Run(fmt.Sprintf("%s/%v", what, mode), func(t *testing.T) {
				w := newSimWorld(t, mode)
				fail := &failSwitch{err: syscall.EIO}
				var mu sync.Mutex
				var rec []string
				recording := false
				w.sim.SetInjector(func(op mmapbits.Op, p string) error {
					mu.Lock()
					if recording && op != mmapbits.OpOpen && op != mmapbits.OpList {
						rec = append(rec, "mapper "+op.String()+" "+filepath.Base(p))
					}
					mu.Unlock()
					return fail.sim(mmapbits.OpSync)(op, p)
				})
				w.fs.SetInjector(func(op wal.Op, p string) error {
					mu.Lock()
					if recording && op != wal.OpOpen && op != wal.OpList {
						rec = append(rec, "wal "+op.String()+" "+filepath.Base(p))
					}
					mu.Unlock()
					return fail.wal(wal.OpSync)(op, p)
				})
				s, err := w.open(t)
				must(t, err)
				b, err := s.CreateBloom("b", BloomConfig{Capacity: 5000})
				must(t, err)
				c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 5000})
				must(t, err)
				for i := range 1000 {
					must(t, second(b.Add(key(i))))
					must(t, c.Add(key(i)))
					if i == 500 {
						must(t, s.Checkpoint())
					}
				}
				must(t, s.log.Sync())
				fail.on.Store(true)
				var ferr error
				if what == "msync" {
					ferr = s.Checkpoint()
				} else if ferr = c.Add(key(1000)); ferr == nil {
					ferr = s.Checkpoint()
				}
				if !errors.Is(ferr, ErrFailed) {
					t.Fatalf("failed sync gave %v", ferr)
				}
				fail.on.Store(false)
				cat, err := os.ReadFile(filepath.Join(w.dir, format.CatalogName))
				must(t, err)
				sess, err := os.ReadFile(filepath.Join(w.dir, format.SessionName))
				must(t, err)
				segsBefore, _ := w.fs.List(filepath.Join(w.dir, "wal"))
				mu.Lock()
				recording = true
				mu.Unlock()
				_ = second(b.Add(key(5000)))
				_ = c.Add(key(5000))
				_ = s.Checkpoint()
				_ = second(s.CreateBitmap("m", 64))
				_ = s.Drop("b")
				_ = s.Rename("c", "b")
				_ = b.Load(Keys(func(yield func([]byte) bool) { yield(key(6000)) }))
				mu.Lock()
				rec = append(rec, "--- Close ---")
				mu.Unlock()
				if err := s.Close(); !errors.Is(err, ErrFailed) {
					t.Fatalf("Close: %v", err)
				}
				mu.Lock()
				got := append([]string(nil), rec...)
				mu.Unlock()
				if len(got) > 1 {
					t.Errorf("the failed store still wrote: %v", got)
				}
				cat2, err := os.ReadFile(filepath.Join(w.dir, format.CatalogName))
				must(t, err)
				if !bytes.Equal(cat, cat2) {
					t.Errorf("the failed store changed the catalog")
				}
				sess2, err := os.ReadFile(filepath.Join(w.dir, format.SessionName))
				if err != nil || !bytes.Equal(sess, sess2) {
					t.Errorf("the failed store changed or removed SESSION: %v", err)
				}
				if segs, _ := w.fs.List(filepath.Join(w.dir, "wal")); fmt.Sprint(segs) != fmt.Sprint(segsBefore) {
					t.Errorf("WAL files %v -> %v", segsBefore, segs)
				}
				w.sim.SetInjector(nil)
				w.fs.SetInjector(nil)
				s, err = w.open(t)
				must(t, err)
				defer s.Close()
				b, err = s.Bloom("b")
				must(t, err)
				c, err = s.Cuckoo("c")
				must(t, err)
				for i := range 1000 {
					if !b.Has(key(i)) || !c.Has(key(i)) {
						t.Fatalf("key %d absent after the reopen", i)
					}
				}
			})
		}
	}
}

// TestFailedStoreCloseSyncsWrittenRecords: where the WAL itself has not
// failed, Close of a failed store still fdatasyncs the records already
// written to it (its one WAL call; no trim), so that changes acknowledged
// under SyncInterval survive a power loss after it. The store fails here
// by a direct call (as a failed msync or catalog commit would fail it),
// with 100 adds written to the WAL and not yet synced.
func TestFailedStoreCloseSyncsWrittenRecords(t *testing.T) {
	w := newSimWorld(t, SyncInterval)
	w.opts.SyncEvery = time.Hour
	s, err := w.open(t)
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	must(t, s.log.Sync())
	for i := range 100 {
		must(t, c.Add(key(i)))
	}
	var mu sync.Mutex
	var rec []string
	w.fs.SetInjector(func(op wal.Op, p string) error {
		if op != wal.OpOpen && op != wal.OpList {
			mu.Lock()
			rec = append(rec, op.String())
			mu.Unlock()
		}
		return nil
	})
	s.fail(errors.New("injected failure"))
	if err := s.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close: %v, want ErrFailed", err)
	}
	mu.Lock()
	got := fmt.Sprint(rec)
	mu.Unlock()
	if got != "[sync]" {
		t.Fatalf("Close of the failed store made the WAL calls %v, want one fdatasync", got)
	}
	w.fs.SetInjector(nil)
	w.powerLoss(nil, newTestRand(1))
	s, err = w.open(t)
	must(t, err)
	defer s.Close()
	c, err = s.Cuckoo("c")
	must(t, err)
	for i := range 100 {
		if !c.Has(key(i)) {
			t.Fatalf("key %d, acknowledged before the failure, absent after a power loss", i)
		}
	}
}
