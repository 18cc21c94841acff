package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// TestVerifyOrphanFates: for each kind of file the catalog does not list,
// verify says what the next writer Open does with it (removes it, leaves
// it alone, or fails with ErrCorrupt), and a writer Open then does that.
func TestVerifyOrphanFates(t *testing.T) {
	mk := mkOrphanStore
	other := filepath.Join(t.TempDir(), "other")
	mk(t, other, nil)
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the orphan's path
		code  int                                   // verify's exit
		says  string
		fate  string // "removed", "kept" or "corrupt"
	}{
		{"dropped filter's file", func(t *testing.T, dir string) string {
			var path string
			var data []byte
			mk(t, dir, func(s *store.Store) {
				if _, err := s.CreateBloom("d", store.BloomConfig{Capacity: 1000}); err != nil {
					t.Fatal(err)
				}
				path = layerFile(t, dir, "d", 0)
				var err error
				if data, err = os.ReadFile(path); err != nil {
					t.Fatal(err)
				}
				if err := s.Drop("d"); err != nil {
					t.Fatal(err)
				}
			})
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}, 0, "the next writer Open removes it", "removed"},
		{"catalog older than the files", func(t *testing.T, dir string) string {
			var old []byte
			var path string
			mk(t, dir, func(s *store.Store) {
				if err := s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
				var err error
				if old, err = os.ReadFile(filepath.Join(dir, "catalog.db")); err != nil {
					t.Fatal(err)
				}
				x, err := s.CreateBloom("x", store.BloomConfig{Capacity: 1000})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := x.Add([]byte("k")); err != nil {
					t.Fatal(err)
				}
				path = layerFile(t, dir, "x", 0)
			})
			if err := os.WriteFile(filepath.Join(dir, "catalog.db"), old, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}, 1, "the next writer Open fails with ErrCorrupt", "corrupt"},
		{"headerless temporary file", func(t *testing.T, dir string) string {
			mk(t, dir, nil)
			path := filepath.Join(dir, "filters", "7-0.flt.tmp")
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}, 0, "the next writer Open removes it", "removed"},
		{"temporary file with a zero header page", func(t *testing.T, dir string) string {
			mk(t, dir, nil)
			path := filepath.Join(dir, "filters", "7-0.flt.tmp")
			if err := os.WriteFile(path, make([]byte, 3*4096), 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}, 0, "the next writer Open removes it", "removed"},
		{"empty files from the next id on (failed creates')", func(t *testing.T, dir string) string {
			path := olderCatalogWithEmpty(t, dir, "b", "c")
			return filepath.Join(filepath.Dir(path), "3-0.flt")
		}, 0, "the next writer Open removes it", "removed"},
		{"empty file past a gap", func(t *testing.T, dir string) string {
			path := olderCatalogWithEmpty(t, dir, "b", "", "d")
			return filepath.Join(filepath.Dir(path), "4-0.flt")
		}, 1, "the next writer Open fails with ErrCorrupt", "corrupt"},
		{"another store's file", func(t *testing.T, dir string) string {
			mk(t, dir, nil)
			data, err := os.ReadFile(layerFile(t, other, "a", 0))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "filters", "9-0.flt")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}, 0, "of another store", "kept"},
		{"junk named as a layer file", func(t *testing.T, dir string) string {
			mk(t, dir, nil)
			path := filepath.Join(dir, "filters", "1-1.flt")
			if err := os.WriteFile(path, []byte(strings.Repeat("junk", 3000)), 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}, 0, "whose header cannot be read", "kept"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			path := c.setup(t, dir)
			r := mustRun(t, c.code, "verify", dir)
			line := ""
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.Contains(l, filepath.Base(path)) {
					line = l
				}
			}
			if !strings.Contains(line, c.says) || !strings.Contains(line, "writer Open") {
				t.Fatalf("verify's line for %s: %q, want it to say %q\n%s", filepath.Base(path), line, c.says, r)
			}
			s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
			if err == nil {
				defer s.Close()
			}
			_, statErr := os.Stat(path)
			got := "kept"
			switch {
			case errors.Is(err, store.ErrCorrupt):
				got = "corrupt"
			case err != nil:
				t.Fatalf("writer Open: %v", err)
			case errors.Is(statErr, os.ErrNotExist):
				got = "removed"
			}
			if got != c.fate {
				t.Fatalf("verify said %q; the writer Open: %s (err %v), want %s", line, got, err, c.fate)
			}
		})
	}
}

// TestFIFOInPlaceOfALayerFile: with a FIFO where a layer file should be
// (opening a FIFO to read waits for a writer), every command returns at
// once with the filter broken or the file reported, instead of hanging.
func TestFIFOInPlaceOfALayerFile(t *testing.T) {
	dir := testStore(t)
	path := layerFile(t, dir, "users", 0)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ls", dir}, {"info", dir, "users"}, {"stats", dir, "users"}, {"verify", dir}, {"check", dir, "users", "k"}, {"file", path}} {
		done := make(chan result, 1)
		go func() { done <- runCLI(args...) }()
		select {
		case r := <-done:
			checkClean(t, args, r)
			if out := r.stdout + r.stderr; !strings.Contains(out, "broken") && !strings.Contains(out, "not a regular file") && !strings.Contains(out, "it is a FIFO") {
				t.Errorf("inspect %s: neither a broken filter nor the FIFO reported:\n%s", strings.Join(args, " "), r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("inspect %s still blocked after 10 s", strings.Join(args, " "))
		}
	}
}

// olderCatalogWithEmpty builds a store in dir (mkOrphanStore), copies its catalog,
// creates the named filters (ids 2, 3, ...; "" is created and dropped)
// with no data, closes the store and puts the copy back: their files lie
// at and past the copy's next id, all zero. It returns the path of filter
// 1's layer file.
func olderCatalogWithEmpty(t *testing.T, dir string, names ...string) string {
	t.Helper()
	var old []byte
	mkOrphanStore(t, dir, func(s *store.Store) {
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		var err error
		if old, err = os.ReadFile(filepath.Join(dir, "catalog.db")); err != nil {
			t.Fatal(err)
		}
		for i, name := range names {
			drop := name == ""
			if drop {
				name = fmt.Sprint("dropped", i)
			}
			if _, err := s.CreateBloom(name, store.BloomConfig{Capacity: 1000}); err != nil {
				t.Fatal(err)
			}
			if drop {
				if err := s.Drop(name); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "catalog.db"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "filters", "1-0.flt")
}

// TestVerifyNotesRootMarkers: verify notes a RESYNC marker and a stray
// catalog.db.tmp in the store's directory, saying what each means, and
// stays clean (exit 0): neither is a problem. It used to say nothing of
// either.
func TestVerifyNotesRootMarkers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateBloom("a", store.BloomConfig{Capacity: 100}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, says := range map[string]string{"RESYNC": "rewrites every page", "catalog.db.tmp": "can be deleted"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := mustRun(t, 0, "verify", dir)
		if !strings.Contains(r.stdout, name) || !strings.Contains(r.stdout, says) {
			t.Fatalf("verify with %s in the directory says nothing of it:\n%s", name, r)
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVerifySymlinkedLayerFileLeftAlone: a symbolic link named as a layer
// file the catalog does not list is not counted among a failed create's
// files, nor judged an orphan the next Open removes: the store lists
// regular files only and leaves it alone, so Open fails for the file past
// it, and verify says so. Verify used to follow the link, count it into
// the run and answer 0 ("removes it") where Open failed with ErrCorrupt.
func TestVerifySymlinkedLayerFileLeftAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	olderCatalogWithEmpty(t, dir, "b", "c") // 2-0.flt, 3-0.flt past next id 2
	two := filepath.Join(dir, "filters", "2-0.flt")
	moved := filepath.Join(t.TempDir(), "2-0.flt")
	if err := os.Rename(two, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, two); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 1, "verify", dir)
	if !strings.Contains(r.stdout, "not a regular file") || !strings.Contains(r.stdout, "fails with ErrCorrupt") {
		t.Fatalf("verify with 2-0.flt a symlink:\n%s", r)
	}
	if s, err := store.Open(dir, nil); !errors.Is(err, store.ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("writer Open: %v, want ErrCorrupt (3-0.flt past the symlink)", err)
	}
}

// mkOrphanStore builds a store in dir with filter "a" (id 1) holding a
// key, runs between (with the open store) and closes it.
func mkOrphanStore(t *testing.T, dir string, between func(s *store.Store)) {
	t.Helper()
	s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.CreateBloom("a", store.BloomConfig{Capacity: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Add([]byte("k")); err != nil {
		t.Fatal(err)
	}
	if between != nil {
		between(s)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
