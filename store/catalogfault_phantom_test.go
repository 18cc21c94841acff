//go:build filterstore_testhooks

package store

import (
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// After a Create whose commit landed but returned ENOSPC, a Backup: the
// backup must open with no broken filter and every acknowledged key.
func TestLandedCreateENOSPCThenBackup(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(landedName(landed), func(t *testing.T) {
			dir, s, _ := storeWithKeys(t, 50)
			failCreate(t, s, dir, "p", landed)
			bk := filepath.Join(t.TempDir(), "bk")
			must(t, s.Backup(bk))
			must(t, s.Close())
			b, err := Open(bk, nil)
			if err != nil {
				t.Fatalf("open backup: %v", err)
			}
			defer b.Close()
			for _, in := range must2(t, b.List) {
				if in.State == "broken" {
					t.Errorf("backup: filter %q broken: %s", in.Name, in.Reason)
				}
			}
			a, err := b.Bloom("a")
			must(t, err)
			for i := range 50 {
				if !a.Has(key(i)) {
					t.Fatalf("backup: key %d absent", i)
				}
			}
		})
	}
}

// After a landed-but-failed Create of p: the name p reused by a Create
// with another configuration, by a Rename onto it, or by Ensure; then
// Close and reopen: p must be what the store acknowledged last.
func TestLandedCreateENOSPCNameReused(t *testing.T) {
	for _, how := range []string{"create", "rename", "ensure"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
			f := armCatalogFault(t, dir, "(*Store).create", 1, syscall.ENOSPC, true)
			_, err := s.CreateCuckoo("p", CuckooConfig{Capacity: 100})
			f.disarm()
			f.mustHaveFired(t)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("create: %v", err)
			}
			var p *Bloom
			switch how {
			case "create":
				p, err = s.CreateBloom("p", BloomConfig{Capacity: 500})
			case "ensure":
				p, err = s.EnsureBloom("p", BloomConfig{Capacity: 500})
			case "rename":
				p, err = s.CreateBloom("x", BloomConfig{Capacity: 500})
				must(t, err)
				must(t, s.Rename("x", "p"))
			}
			must(t, err)
			for i := range 50 {
				must(t, second(p.Add(key(i))))
			}
			must(t, s.Close())
			s = mustOpen(t, dir, nil)
			defer s.Close()
			p, err = s.Bloom("p")
			if err != nil {
				t.Fatalf("p after reopen: %v", err)
			}
			for i := range 50 {
				if !p.Has(key(i)) {
					t.Fatalf("key %d absent", i)
				}
			}
			if in := mustInfo(t, p); in.Capacity != 500 {
				t.Fatalf("p: %+v", in)
			}
		})
	}
}

// After a landed-but-failed Create and a checkpoint, a read-only Open
// beside the running writer.
func TestLandedCreateENOSPCReadOnlyOpen(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(landedName(landed), func(t *testing.T) {
			dir, s, _ := storeWithKeys(t, 50)
			defer s.Close()
			failCreate(t, s, dir, "p", landed)
			must(t, s.Checkpoint())
			r, err := Open(dir, &Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only open beside the writer: %v", err)
			}
			defer r.Close()
			ra, err := r.Bloom("a")
			must(t, err)
			for i := range 50 {
				if !ra.Has(key(i)) {
					t.Fatalf("key %d absent", i)
				}
			}
		})
	}
}

// A Create whose commit lands but reports ENOSPC while a Backup copies
// layer files (after the Backup's own checkpoint, before its catalog
// copy): the copied catalog holds the entry of p, whose file Backup never
// copies (p is not among the store's filters). The backup opens with no
// broken filter: it leaves out such entries, as the checkpoint deletes
// them (before, p opened broken in the backup; found by a reviewer).
func TestLandedCreateDuringBackup(t *testing.T) {
	dir, s, _ := storeWithKeys(t, 50)
	var once sync.Once
	var cerr error
	var f *catalogFault
	s.hooks.backupFile = func(string) error {
		once.Do(func() {
			f = armCatalogFault(t, dir, "(*Store).create", 1, syscall.ENOSPC, true)
			_, cerr = s.CreateBloom("p", BloomConfig{Capacity: 1000})
			f.disarm()
		})
		return nil
	}
	bk := filepath.Join(t.TempDir(), "bk")
	must(t, s.Backup(bk))
	s.hooks.backupFile = nil
	f.mustHaveFired(t)
	if !errors.Is(cerr, syscall.ENOSPC) {
		t.Fatalf("create: %v", cerr)
	}
	must(t, s.Close())
	b, err := Open(bk, nil)
	if err != nil {
		t.Fatalf("open backup: %v", err)
	}
	defer b.Close()
	for _, in := range must2(t, b.List) {
		if in.State == "broken" {
			t.Errorf("backup: filter %q (which Create reported failed) is broken: %s", in.Name, in.Reason)
		}
	}
}

// TestLandedCreateReadOnlyWindow: what store/doc.go says of a create that
// reported ENOSPC although its commit landed: a read-only Open beside the
// writer finds the filter (empty) until the writer's next checkpoint, and
// one after that checkpoint does not.
func TestLandedCreateReadOnlyWindow(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer s.Close()
	f := armCatalogFault(t, dir, "(*Store).create", 1, syscall.ENOSPC, true)
	_, err := s.CreateBloom("p", BloomConfig{Capacity: 1000})
	f.disarm()
	f.mustHaveFired(t)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create: %v", err)
	}
	r, err := Open(dir, &Options{ReadOnly: true})
	must(t, err)
	defer r.Close()
	p, err := r.Bloom("p")
	if err != nil {
		t.Fatalf("before the checkpoint, a read-only open beside the writer: %v, want the filter", err)
	}
	if p.Has([]byte("k")) {
		t.Error("the filter a failed create left is not empty")
	}
	must(t, s.Checkpoint())
	r2, err := Open(dir, &Options{ReadOnly: true})
	must(t, err)
	defer r2.Close()
	if _, err := r2.Bloom("p"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after the checkpoint, a read-only open: %v, want ErrNotFound", err)
	}
}
