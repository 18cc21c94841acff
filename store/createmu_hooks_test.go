//go:build filterstore_testhooks

package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/catalog"
)

// reviewCommitGate arms catalog.AfterCommitHook: the first catalog update
// whose caller is (*Store).create stops, its commit on the file, until
// release is closed, and then returns ret (nil: the commit's own result).
type reviewCommitGate struct {
	once    sync.Once
	skip    int // creates let through first (under the catalog lock)
	in      chan struct{}
	release chan struct{}
	ret     error
}

func armReviewCommitGate(t *testing.T, ret error) *reviewCommitGate {
	g := &reviewCommitGate{in: make(chan struct{}), release: make(chan struct{}), ret: ret}
	catalog.AfterCommitHook = func(path string, err error) error {
		if err != nil || !strings.Contains(caller(), "(*Store).create") {
			return err
		}
		if g.skip > 0 {
			g.skip--
			return err
		}
		stopped := false
		g.once.Do(func() { stopped = true })
		if !stopped {
			return err
		}
		close(g.in)
		<-g.release
		return g.ret
	}
	t.Cleanup(func() { catalog.AfterCommitHook = nil })
	return g
}

// waitsFor reports whether ch is still open after d.
func reviewStillWaiting(ch <-chan error, d time.Duration) bool {
	select {
	case <-ch:
		return false
	case <-time.After(d):
		return true
	}
}

// TestLandedCreateCommitWindow: a create stopped between its catalog
// commit and its filter's addition to the map. Lookups answer (not found),
// the map stays consistent, a checkpoint, a Backup, a Drop of another
// filter and a Rename wait; a second create of the name is ErrExists, an
// Ensure gets the first's filter; the Backup's copy holds the filter
// whole or not at all.
func TestLandedCreateCommitWindow(t *testing.T) {
	dir := t.TempDir()
	// Armed before Open: the hook is not synchronized with the background
	// checkpoints' commits.
	g := armReviewCommitGate(t, nil)
	g.skip = 2 // "a" and "other"
	s := mustOpen(t, dir, &Options{CheckpointEvery: time.Millisecond})
	defer s.Close()
	a, err := s.CreateBitmap("a", 1024)
	must(t, err)
	must(t, second(a.Set(3)))
	must(t, second(s.CreateBitmap("other", 64)))
	first := make(chan error, 1)
	var firstID uint64
	go func() {
		b, err := s.CreateBitmap("w", 1024)
		if err == nil {
			firstID = b.base().id
		}
		first <- err
	}()
	<-g.in
	if _, err := s.Bitmap("w"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup in the window: %v", err)
	}
	if _, err := s.Bitmap("a"); err != nil {
		t.Errorf("lookup of a in the window: %v", err)
	}
	if err := reviewMapConsistent(s); err != nil {
		t.Error(err)
	}
	ckpt := make(chan error, 1)
	go func() { ckpt <- s.Checkpoint() }()
	bdir := filepath.Join(t.TempDir(), "bk")
	bk := make(chan error, 1)
	go func() { bk <- s.Backup(bdir) }()
	drop := make(chan error, 1)
	go func() { drop <- s.Drop("other") }()
	ren := make(chan error, 1)
	go func() { ren <- s.Rename("a", "w") }()
	dup := make(chan error, 1)
	go func() { dup <- second(s.CreateBitmap("w", 1024)) }()
	imp := make(chan error, 1)
	go func() { imp <- second(s.CreateBloom("w", BloomConfig{Capacity: 10})) }()
	ens := make(chan error, 1)
	var ensID uint64
	go func() {
		b, err := s.EnsureBitmap("w", 8)
		if err == nil {
			ensID = b.base().id
		}
		ens <- err
	}()
	for what, ch := range map[string]chan error{"checkpoint": ckpt, "drop": drop, "rename": ren, "dup": dup, "ensure": ens} {
		if !reviewStillWaiting(ch, 50*time.Millisecond) {
			t.Errorf("%s did not wait for the create in its commit", what)
		}
	}
	close(g.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for what, ch := range map[string]chan error{"checkpoint": ckpt, "backup": bk, "drop": drop} {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	// The rename ran after the create (it waits for the gate) or before
	// it took the gate (then the create of w is ErrExists... which it was
	// not): either way, w is a's or the create's now.
	renErr := <-ren
	if err := <-dup; !errors.Is(err, ErrExists) {
		t.Errorf("second create: %v", err)
	}
	if err := <-imp; !errors.Is(err, ErrExists) {
		t.Errorf("bloom create: %v", err)
	}
	if err := <-ens; err != nil && !errors.Is(err, ErrWrongKind) {
		t.Errorf("ensure: %v", err)
	}
	t.Logf("first id %d, ensure id %d, rename: %v", firstID, ensID, renErr)
	if err := reviewMapConsistent(s); err != nil {
		t.Error(err)
	}
	must(t, s.Checkpoint())
	if err := reviewCatalogMatches(s, dir); err != nil {
		t.Fatal(err)
	}
	c, err := Open(bdir, &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := reviewCatalogMatches(c, bdir); err != nil {
		t.Fatal("backup:", err)
	}
	for _, in := range mustList(t, c) {
		if in.State != "ok" {
			t.Errorf("backup: %s is %s", in.Name, in.State)
		}
	}
}

// TestLandedCreateQueuedBehindFailedCommit: a create waiting for the
// create mutex while the create holding it fails the store (its catalog
// commit's fdatasync reports EIO) goes on with its own file and catalog
// commit, and reports success, in a store that has failed.
func TestLandedCreateQueuedBehindFailedCommit(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer s.Close()
	g := armReviewCommitGate(t, syscall.EIO)
	first := make(chan error, 1)
	go func() { first <- second(s.CreateBitmap("p", 1024)) }()
	<-g.in
	queued := make(chan error, 1)
	go func() { queued <- second(s.CreateBitmap("q", 1024)) }()
	time.Sleep(100 * time.Millisecond) // q waits for createMu
	close(g.release)
	if err := <-first; err == nil {
		t.Fatal("the failed commit's create succeeded")
	}
	if s.failed() == nil {
		t.Fatal("store not failed")
	}
	err := <-queued
	t.Logf("queued create after the store failed: %v", err)
	if err == nil {
		t.Errorf("a create queued behind a create that failed the store succeeded after the failure")
	}
	if _, err := os.Stat(filepath.Join(dir, "RESYNC")); err != nil {
		t.Logf("resync marker: %v", err)
	}
}

// TestLandedCreateAfterENOSPC: a create whose commit landed although
// it reported ENOSPC, while an Ensure of the same name waits: the Ensure
// makes the filter at the next id, and the catalog names that one.
func TestLandedCreateAfterENOSPC(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	g := armReviewCommitGate(t, syscall.ENOSPC)
	first := make(chan error, 1)
	go func() { first <- second(s.CreateBitmap("p", 1024)) }()
	<-g.in
	ens := make(chan *Bitmap, 1)
	go func() {
		b, err := s.EnsureBitmap("p", 1024)
		if err != nil {
			t.Error(err)
		}
		ens <- b
	}()
	time.Sleep(50 * time.Millisecond)
	close(g.release)
	if err := <-first; err == nil {
		t.Fatal("create succeeded")
	}
	b := <-ens
	if b == nil {
		t.FailNow()
	}
	must(t, second(b.Set(5)))
	if err := reviewCatalogMatches(s, dir); err != nil {
		t.Fatal(err)
	}
	id := b.base().id
	s.abandonForTest()
	s = mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer s.Close()
	c, err := s.Bitmap("p")
	must(t, err)
	if c.base().id != id || !c.Get(5) {
		t.Fatalf("p: id %d want %d, bit: %v", c.base().id, id, c.Get(5))
	}
}
