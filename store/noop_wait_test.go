package store

import (
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// stallFS is a wal.FS whose file Syncs block while stalled.
type stallFS struct {
	*wal.MemFS
	mu      sync.Mutex
	stalled bool
	release chan struct{}
}

type stallFile struct {
	wal.File
	fs *stallFS
}

func (f stallFile) Sync() error {
	f.fs.mu.Lock()
	stalled, ch := f.fs.stalled, f.fs.release
	f.fs.mu.Unlock()
	if stalled {
		<-ch
	}
	return f.File.Sync()
}

func (s *stallFS) Create(name string) (wal.File, error) {
	f, err := s.MemFS.Create(name)
	return stallFile{f, s}, err
}

func (s *stallFS) OpenAppend(name string) (wal.File, error) {
	f, err := s.MemFS.OpenAppend(name)
	return stallFile{f, s}, err
}

// TestNoopAnswerWaitsForDurability: an add that finds its key present
// because of another writer's change must not be acknowledged before that
// change is durable, or a power loss could lose an acknowledged key.
func TestNoopAnswerWaitsForDurability(t *testing.T) {
	fs := &stallFS{MemFS: wal.NewMemFS(), release: make(chan struct{})}
	s, err := Open(t.TempDir(), WithSeams(Options{CheckpointEvery: -1}, mmapbits.NewSim(), fs))
	must(t, err)
	defer s.Close()
	b, _ := s.CreateBloom("b", BloomConfig{Capacity: 100})
	bm, _ := s.CreateBitmap("m", 64)

	fs.mu.Lock()
	fs.stalled = true
	fs.mu.Unlock()
	done := make(chan string, 4)
	go func() { b.Add([]byte("k")); done <- "first bloom add" }()
	go func() { bm.Set(3); done <- "first bitmap set" }()
	time.Sleep(50 * time.Millisecond) // let both log and block in fsync
	go func() { b.Add([]byte("k")); done <- "second bloom add" }()
	go func() { bm.Set(3); done <- "second bitmap set" }()
	release := func() {
		fs.mu.Lock()
		fs.stalled = false
		close(fs.release)
		fs.mu.Unlock()
	}
	select {
	case who := <-done:
		release() // so Close does not wait forever
		t.Fatalf("%s returned while the fsync of the first change was stalled", who)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	for i := 0; i < 4; i++ {
		<-done
	}
}
