package store

import (
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// gateFS is a wal.FS whose next file Sync, once armed, says it began and
// blocks until released.
type gateFS struct {
	*wal.MemFS
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

type gateFile struct {
	wal.File
	fs *gateFS
}

func (f gateFile) Sync() error {
	f.fs.mu.Lock()
	armed := f.fs.armed
	f.fs.armed = false
	f.fs.mu.Unlock()
	if armed {
		close(f.fs.entered)
		<-f.fs.release
	}
	return f.File.Sync()
}

func (g *gateFS) Create(name string) (wal.File, error) {
	f, err := g.MemFS.Create(name)
	return gateFile{f, g}, err
}

func (g *gateFS) OpenAppend(name string) (wal.File, error) {
	f, err := g.MemFS.OpenAppend(name)
	return gateFile{f, g}, err
}

// TestSyncIntervalWriteSkipsStalledSync: under SyncInterval an add, a
// bitmap set and an external apply need their records written, not
// synced, and none of them waits for the background fdatasync in flight,
// however long it takes (they used to wait it out: on a busy disk, tens
// of milliseconds on an engine's commit path).
func TestSyncIntervalWriteSkipsStalledSync(t *testing.T) {
	fs := &gateFS{MemFS: wal.NewMemFS(), entered: make(chan struct{}), release: make(chan struct{})}
	s, err := Open(t.TempDir(), WithSeams(Options{Sync: SyncInterval, SyncEvery: time.Millisecond, CheckpointEvery: -1}, mmapbits.NewSim(), fs))
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	m, err := s.CreateBitmap("m", 64)
	must(t, err)
	must(t, second(b.Add(key(0))))
	fs.mu.Lock()
	fs.armed = true
	fs.mu.Unlock()
	// A record for the background sync to sync, written once the gate is
	// armed: key 0's may have been synced already (a race stage in CI
	// found the test waiting for a sync that had nothing left to do).
	must(t, second(b.Add(key(3))))
	select {
	case <-fs.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no background sync began")
	}
	done := make(chan error, 1)
	go func() {
		if _, err := b.Add(key(1)); err != nil {
			done <- err
			return
		}
		if _, err := m.Set(5); err != nil {
			done <- err
			return
		}
		nb := s.NewBatch()
		nb.BloomAdd(b, key(2))
		rec, err := nb.Encode()
		if err != nil {
			done <- err
			return
		}
		_, err = s.ApplyExternal(rec)
		done <- err
	}()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(5 * time.Second):
		close(fs.release)
		<-done
		t.Fatal("a SyncInterval write waited for the background fdatasync in flight")
	}
	close(fs.release)
	for i := range 3 {
		if !b.Has(key(i)) {
			t.Errorf("key %d absent", i)
		}
	}
	must(t, s.Close())
}
