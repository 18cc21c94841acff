package store

import (
	"errors"
	"testing"
	"time"

	"github.com/filterstore/filterstore/mmapbits"
)

// blockingCreateMapper is the OS mapper whose Create tells entered and
// then waits for release: a create stuck in its file's I/O (fallocate,
// fsync, the directory's fsync).
type blockingCreateMapper struct {
	mmapbits.OS
	entered chan struct{}
	release chan struct{}
}

func (m blockingCreateMapper) Create(path string, h mmapbits.Header) (mmapbits.Region, error) {
	m.entered <- struct{}{}
	<-m.release
	return m.OS.Create(path, h)
}

// TestLookupNotBlockedByCreateIO: a handle lookup by name (Store.Bloom),
// List and an ApplyExternal's resolution of filter ids take the store's
// filter map lock, which a create held through its file's I/O and its
// catalog commit (four fsyncs): an engine that creates a filter per new
// SSTable stalled every lookup by name for the create's whole time
// (beside a loop of creates, p50 1.3 ms, max 9-109 ms on the development
// VM; TestManyFiltersStall). Before the fix, the lookup below waited until
// the create was released.
func TestLookupNotBlockedByCreateIO(t *testing.T) {
	opts := &Options{CheckpointEvery: -1}
	m := blockingCreateMapper{entered: make(chan struct{}, 1), release: make(chan struct{})}
	opts.mapper = m
	s := mustOpen(t, t.TempDir(), opts)
	defer s.Close()
	close(m.release) // the first create goes through
	if _, err := s.CreateBloom("old", BloomConfig{Capacity: 1000}); err != nil {
		t.Fatal(err)
	}
	<-m.entered
	m.release = make(chan struct{})
	s.opts.mapper = m
	done := make(chan error, 1)
	go func() {
		_, err := s.CreateBloom("new", BloomConfig{Capacity: 1000})
		done <- err
	}()
	<-m.entered // the create is in its file's I/O
	looked := make(chan error, 1)
	go func() {
		_, err := s.Bloom("old")
		if err == nil {
			_, err = s.List()
		}
		looked <- err
	}()
	select {
	case err := <-looked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		close(m.release)
		<-looked
		t.Fatal("a lookup by name waited for another filter's create to finish its I/O")
	}
	// A second create of the same name meanwhile is refused once the
	// first is done, not made twice.
	dup := make(chan error, 1)
	go func() {
		_, err := s.CreateBloom("new", BloomConfig{Capacity: 1000})
		dup <- err
	}()
	time.Sleep(10 * time.Millisecond)
	close(m.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-dup; !errors.Is(err, ErrExists) {
		t.Fatalf("second create of the same name: %v, want ErrExists", err)
	}
	if _, err := s.Bloom("new"); err != nil {
		t.Fatal(err)
	}
}
