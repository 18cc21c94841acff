package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/store"
)

// TestVerifyMarkerNotOwnFile: LOCK, SESSION or RESYNC that is not a
// regular file with one name (a directory, a FIFO, a symbolic link,
// dangling or not, a hard link to the catalog) makes a writer's Open
// refuse the store; verify reports it as a problem naming the file
// (exit 1), and says nothing of what RESYNC would make the next Open do.
// Before, verify printed "0 problems" for each (an adversarial review's
// finding), and for RESYNC the note that the next writer Open rewrites
// every page.
func TestVerifyMarkerNotOwnFile(t *testing.T) {
	kinds := []struct {
		name string
		make func(path, dir string) error
	}{
		{"directory", func(p, _ string) error { return os.Mkdir(p, 0o755) }},
		{"FIFO", func(p, _ string) error { return syscall.Mkfifo(p, 0o644) }},
		{"dangling symlink", func(p, dir string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) }},
		{"symlink to the catalog", func(p, dir string) error { return os.Symlink(filepath.Join(dir, format.CatalogName), p) }},
		{"hard link to the catalog", func(p, dir string) error { return os.Link(filepath.Join(dir, format.CatalogName), p) }},
	}
	for _, marker := range []string{format.LockName, format.SessionName, format.ResyncName} {
		for _, k := range kinds {
			t.Run(marker+"/"+k.name, func(t *testing.T) {
				dir := testStore(t)
				path := filepath.Join(dir, marker)
				if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
				if err := k.make(path, dir); err != nil {
					t.Fatal(err)
				}
				s, err := store.Open(dir, nil)
				if err == nil {
					s.Close()
					t.Fatalf("a writer's Open took the store with %s as a %s", marker, k.name)
				}
				r := mustRun(t, 1, "verify", dir)
				if !strings.Contains(r.stdout, "problem  "+marker+": a writer's Open refuses the store for it: ") {
					t.Errorf("verify does not report %s:\n%s", marker, r)
				}
				if strings.Contains(r.stdout, "rewrites every page") {
					t.Errorf("verify notes what RESYNC makes the next Open do, which refuses the store:\n%s", r)
				}
			})
		}
	}
	// A regular RESYNC: the note, no problem.
	dir := testStore(t)
	if err := os.WriteFile(filepath.Join(dir, format.ResyncName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "verify", dir)
	if !strings.Contains(r.stdout, "note     RESYNC: an msync of a filter file or a catalog commit failed") {
		t.Errorf("verify of a store with a regular RESYNC:\n%s", r)
	}
}
