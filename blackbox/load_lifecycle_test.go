package blackbox_test

import (
	"bytes"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// gatedSource yields n keys, blocking before key `at` until gate closes.
func gatedSource(prefix string, n, at int, gate <-chan struct{}) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for i := range n {
			if i == at {
				<-gate
			}
			if !yield(keyN(prefix, i), nil) {
				return
			}
		}
	}
}

func waitOrFail(t *testing.T, what string, ch <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		return nil
	}
}

// Load(nil): LoadParallel says "No source, or a nil one, is ErrInvalid. With
// one source it is Load."
func TestLoadNilSource(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Load(nil) panicked: %v", r)
			}
		}()
		err = f.Load(nil)
	}()
	wantIs(t, "Load(nil)", err, store.ErrInvalid)
	in, _ := f.Info()
	if in.State != "ok" {
		t.Errorf("Load(nil) left state %q", in.State)
	}
}

// "Changes to other filters, and checkpoints, go on between batches of 4096
// keys"; a source "may use the store (not to change the filter it loads)".
func TestCheckpointAndOtherFiltersDuringLoad(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateBloom("f", store.BloomConfig{Capacity: 100000})
	o, _ := s.CreateCuckoo("o", store.CuckooConfig{})
	gate := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- f.Load(func(yield func([]byte, error) bool) {
			for i := range 20000 {
				if i == 10000 {
					<-gate
				}
				if i%1000 == 0 {
					// the source uses the store: another filter
					if err := o.Add(keyN("src", i)); err != nil {
						yield(nil, err)
						return
					}
				}
				if !yield(keyN("cl", i), nil) {
					return
				}
			}
		})
	}()
	time.Sleep(30 * time.Millisecond)
	cp := make(chan error, 1)
	go func() { cp <- s.Checkpoint() }()
	must(t, waitOrFail(t, "Checkpoint during a paused Load", cp, 2*time.Second))
	ad := make(chan error, 1)
	go func() { ad <- o.Add([]byte("outside")) }()
	must(t, waitOrFail(t, "Add to another filter during a Load", ad, 2*time.Second))
	close(gate)
	must(t, waitOrFail(t, "Load", done, 5*time.Second))
	for i := range 20000 {
		if !f.Has(keyN("cl", i)) {
			t.Fatalf("lost cl-%d", i)
		}
	}
	if !o.Has(keyN("src", 19000)) {
		t.Error("source's adds lost")
	}
}

// Close while a Load runs: "Close marks the store closed and checkpoints
// under one hold of the gate: the batch gets ErrClosed, the filter stays
// incomplete ("maybe")"; after reopen it is incomplete.
func TestCloseDuringLoad(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	f, _ := s.CreateCounting("f", store.BloomConfig{Capacity: 100000})
	gate := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- f.Load(gatedSource("cd", 20000, 9000, gate)) }()
	time.Sleep(30 * time.Millisecond)
	cl := make(chan error, 1)
	go func() { cl <- s.Close() }()
	// Close may wait for the source's batch or not; release the source.
	time.Sleep(30 * time.Millisecond)
	close(gate)
	lerr := waitOrFail(t, "Load after Close", done, 5*time.Second)
	cerr := waitOrFail(t, "Close during Load", cl, 5*time.Second)
	t.Logf("Load: %v; Close: %v", lerr, cerr)
	if lerr == nil {
		t.Log("Load completed before Close took effect")
		return
	}
	wantIs(t, "Load cut by Close", lerr, store.ErrIncomplete)
	s = openStore(t, dir, nil)
	defer s.Close()
	f2, _ := s.Counting("f")
	in, _ := f2.Info()
	if in.State != "incomplete" {
		t.Errorf("after reopen: state %q, want incomplete", in.State)
	}
	if _, err := s.Check(); err != nil {
		t.Errorf("Check after Close during Load: %v", err)
	}
}

// Drop while a Load runs: the doc does not say whether Drop waits; it must
// neither hang nor leave the store unusable.
func TestDropDuringLoad(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateBloom("f", store.BloomConfig{Capacity: 100000})
	gate := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- f.Load(gatedSource("dd", 20000, 9000, gate)) }()
	time.Sleep(30 * time.Millisecond)
	dr := make(chan error, 1)
	go func() { dr <- s.Drop("f") }()
	var derr error
	select {
	case derr = <-dr:
		t.Logf("Drop returned during the Load: %v", derr)
		close(gate)
	case <-time.After(100 * time.Millisecond):
		t.Log("Drop waits for the Load")
		close(gate)
		derr = waitOrFail(t, "Drop", dr, 5*time.Second)
	}
	lerr := waitOrFail(t, "Load", done, 5*time.Second)
	t.Logf("Drop: %v; Load: %v", derr, lerr)
	if _, err := s.CreateBloom("f", store.BloomConfig{}); derr == nil && err != nil {
		t.Errorf("re-create after Drop: %v", err)
	}
}

// Backup during a Load: "A Load that has not ended when Backup copies the
// catalog is incomplete in the copy."
func TestBackupDuringLoad(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateCuckoo("f", store.CuckooConfig{Capacity: 100000})
	gate := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- f.Load(gatedSource("bd", 20000, 9000, gate)) }()
	time.Sleep(30 * time.Millisecond)
	root := t.TempDir()
	bk := make(chan error, 1)
	go func() { bk <- s.Backup(root + "/copy") }()
	berr := waitOrFail(t, "Backup during a paused Load", bk, 5*time.Second)
	close(gate)
	must(t, waitOrFail(t, "Load", done, 5*time.Second))
	must(t, berr)
	c := openStore(t, root+"/copy", nil)
	defer c.Close()
	cf, _ := c.Cuckoo("f")
	in, _ := cf.Info()
	if in.State != "incomplete" {
		t.Errorf("copy state %q, want incomplete", in.State)
	}
	if !cf.Has([]byte("never-zz")) {
		t.Error("incomplete copy must answer maybe")
	}
}

// WriteTo of an incomplete filter: "A closed, dropped, broken or incomplete
// filter ... return the error a mutation would".
func TestWriteToIncomplete(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateBloom("f", store.BloomConfig{})
	_ = f.Load(func(yield func([]byte, error) bool) { yield(nil, errors.New("x")) })
	var buf bytes.Buffer
	_, err := f.WriteTo(&buf)
	wantIs(t, "WriteTo(incomplete)", err, store.ErrIncomplete)
}

// Info State while a Load runs: inspect's help says "incomplete  a bulk Load
// is running, or was interrupted".
func TestInfoDuringLoad(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateBloom("f", store.BloomConfig{Capacity: 100000})
	gate := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- f.Load(gatedSource("il", 20000, 9000, gate)) }()
	time.Sleep(30 * time.Millisecond)
	in, err := f.Info()
	t.Logf("Info during Load: state %q, err %v", in.State, err)
	so, _, code := run(t, "ls", s2dir(t, s))
	t.Logf("inspect ls during Load (exit %d):\n%s", code, so)
	close(gate)
	must(t, waitOrFail(t, "Load", done, 5*time.Second))
	in, _ = f.Info()
	if in.State != "ok" {
		t.Errorf("after Load: %q", in.State)
	}
}

var storeDirs = map[*store.Store]string{}

func s2dir(t *testing.T, s *store.Store) string {
	t.Helper()
	d, ok := storeDirs[s]
	if !ok {
		t.Skip("no dir recorded")
	}
	return d
}
