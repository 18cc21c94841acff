package store

// Issue #9 G: a filter whose files are missing or damaged opens broken —
// lookups "maybe", changes, Info and Fill ErrCorrupt naming the file, Drop works
// — while every other filter works; its WAL records are kept until it is
// dropped, so restoring its file brings it back whole.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
)

func TestBrokenFilterAvailability(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("f%d", i)
		switch i % 4 {
		case 0:
			b, err := s.CreateBloom(name, BloomConfig{Capacity: 1000})
			must(t, err)
			must(t, b.Load(rangeKeys(0, 500)))
		case 1:
			c, err := s.CreateCuckoo(name, CuckooConfig{Capacity: 1000})
			must(t, err)
			must(t, c.Load(rangeKeys(0, 500)))
		case 2:
			n, err := s.CreateCounting(name, BloomConfig{Capacity: 1000})
			must(t, err)
			must(t, n.Load(rangeKeys(0, 500)))
		case 3:
			m, err := s.CreateBitmap(name, 1024)
			must(t, err)
			for off := uint64(0); off < 512; off += 3 {
				must(t, second(m.Set(off)))
			}
		}
	}
	must(t, s.Checkpoint())
	const victim = "f3" // a bitmap
	m, _ := s.Bitmap(victim)
	file := s.layerPath(m.b.id, 0)
	saved, err := os.ReadFile(file) // as of the checkpoint
	must(t, err)
	for off := uint64(600); off < 700; off++ { // after the checkpoint: WAL only
		must(t, second(m.Set(off)))
	}
	s.abandonForTest()
	must(t, os.Remove(file))

	s, err = Open(dir, &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatalf("Open with one layer file missing: %v", err)
	}
	m, err = s.Bitmap(victim)
	must(t, err)
	rel := filepath.Join(format.FiltersName, filepath.Base(file))
	if !m.Get(1) || !m.Get(650) {
		t.Fatal("a broken bitmap answered a bit clear")
	}
	if _, err := m.Set(5); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), rel) {
		t.Fatalf("Set on a broken bitmap: %v, want ErrCorrupt naming %s", err, rel)
	}
	if in, err := m.Info(); !errors.Is(err, ErrCorrupt) || in.State != "broken" || !strings.Contains(in.Reason, rel) {
		t.Fatalf("Info of a broken bitmap: %+v, %v", in, err)
	}
	if _, err := m.Fill(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), rel) {
		t.Fatalf("Fill of a broken bitmap: %v, want ErrCorrupt naming %s", err, rel)
	}
	list, err := s.List()
	must(t, err)
	if len(list) != 10 {
		t.Fatalf("List has %d filters, want 10", len(list))
	}
	for _, in := range list {
		want := "ok"
		if in.Name == victim {
			want = "broken"
		}
		if in.State != want {
			t.Fatalf("List: %s is %q (%s), want %s", in.Name, in.State, in.Reason, want)
		}
	}
	// Every other filter works: lookups and changes.
	b, _ := s.Bloom("f0")
	c, _ := s.Cuckoo("f1")
	n, _ := s.Counting("f2")
	for i := 0; i < 500; i++ {
		if !b.Has(key(i)) || !c.Has(key(i)) || !n.Has(key(i)) {
			t.Fatalf("key %d lost in a healthy filter", i)
		}
	}
	must(t, second(b.Add(key(9999))))
	must(t, c.Add(key(9999)))
	must(t, s.Checkpoint())
	must(t, s.Close())

	// A read-only store sees the same.
	r, err := Open(dir, &Options{ReadOnly: true})
	must(t, err)
	rm, _ := r.Bitmap(victim)
	if !rm.Get(2) {
		t.Fatal("a broken bitmap in a read-only store answered a bit clear")
	}
	must(t, r.Close())

	// The file comes back (from a backup taken at the checkpoint): the
	// WAL kept the records after it, and reopening replays them.
	must(t, os.WriteFile(file, saved, 0o644))
	s = mustOpen(t, dir, &Options{CheckpointEvery: -1})
	m, _ = s.Bitmap(victim)
	for off := uint64(600); off < 700; off++ {
		if !m.Get(off) {
			t.Fatalf("bit %d, set after the checkpoint, lost: the WAL was not kept for the broken filter", off)
		}
	}
	if _, err := m.Set(5); err != nil {
		t.Fatalf("the restored bitmap: %v", err)
	}
	must(t, s.Close())

	// Broken again, and dropped.
	must(t, os.Remove(file))
	s = mustOpen(t, dir, nil)
	defer s.Close()
	must(t, s.Drop(victim))
	if _, err := s.Bitmap(victim); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after Drop: %v", err)
	}
	must(t, s.Checkpoint())
	if l, _ := s.List(); len(l) != 9 {
		t.Fatalf("List after Drop: %d filters", len(l))
	}
}

// TestDamagedFileIsBroken: a layer file with a bad header, the wrong size
// or another filter's header makes its filter broken, not the store.
func TestDamagedFileIsBroken(t *testing.T) {
	for _, damage := range []string{"header", "size", "swapped"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
			must(t, err)
			z, err := s.CreateBloom("z", BloomConfig{Capacity: 1000})
			must(t, err)
			must(t, second(z.Add(key(1))))
			pa, pz := s.layerPath(a.b.id, 0), s.layerPath(z.b.id, 0)
			must(t, s.Close())
			switch damage {
			case "header":
				f, err := os.OpenFile(pa, os.O_WRONLY, 0)
				must(t, err)
				_, err = f.WriteAt([]byte{0xff}, 20)
				must(t, err)
				f.Close()
			case "size":
				must(t, os.Truncate(pa, 4096))
			case "swapped":
				data, err := os.ReadFile(pz)
				must(t, err)
				must(t, os.WriteFile(pa, data, 0o644))
			}
			s = mustOpen(t, dir, nil)
			defer s.Close()
			a, _ = s.Bloom("a")
			if _, err := a.Add(key(2)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("add to the damaged filter: %v, want ErrCorrupt", err)
			}
			z, _ = s.Bloom("z")
			if !z.Has(key(1)) {
				t.Fatal("the healthy filter lost its key")
			}
		})
	}
}

// TestFIFOInPlaceOfAFile: a FIFO where a layer file or a WAL segment
// should be (opening a FIFO to read waits for a writer) makes a read-only
// open, a writer's open and a backup fail or open the filter broken, at
// once, instead of hanging.
func TestFIFOInPlaceOfAFile(t *testing.T) {
	for _, where := range []string{"layer", "wal"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
			a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
			must(t, err)
			z, err := s.CreateBloom("z", BloomConfig{Capacity: 1000})
			must(t, err)
			must(t, second(a.Add(key(1))))
			must(t, second(z.Add(key(1))))
			path := s.layerPath(a.b.id, 0)
			must(t, s.Close())
			if where == "wal" {
				segs, err := filepath.Glob(filepath.Join(dir, format.WALName, "*.log"))
				must(t, err)
				path = segs[len(segs)-1]
			}
			must(t, os.Remove(path))
			must(t, syscall.Mkfifo(path, 0o644))
			backups := t.TempDir()
			for _, ro := range []bool{true, false} {
				done := make(chan error, 1)
				// The store is closed before the answer is sent: a Close
				// still writing when the test ends raced the removal of
				// its directory ("directory not empty", a CI run under
				// -race).
				go func() {
					done <- func() error {
						s, err := Open(dir, &Options{ReadOnly: ro})
						if err != nil {
							return err
						}
						defer s.Close()
						if a, err := s.Bloom("a"); err != nil || !a.Has(key(2)) {
							return fmt.Errorf("the filter whose file is a FIFO: %v, or not broken (it answers absent)", err)
						}
						if !ro {
							t.Logf("Backup: %v", s.Backup(filepath.Join(backups, "backup")))
						}
						if z, _ := s.Bloom("z"); !z.Has(key(1)) {
							return errors.New("the healthy filter lost its key")
						}
						return nil
					}()
				}()
				select {
				case err := <-done:
					t.Logf("ReadOnly=%v: %v", ro, err)
					if where == "layer" && err != nil {
						t.Fatalf("ReadOnly=%v: %v, want the store open with the filter broken", ro, err)
					}
					if where == "wal" && !errors.Is(err, ErrCorrupt) {
						t.Fatalf("ReadOnly=%v: Open = %v, want ErrCorrupt", ro, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("ReadOnly=%v: Open (or a backup) still blocked after 10 s", ro)
				}
			}
		})
	}
}
