package store

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// panicWriter panics on its first Write.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("writer boom") }

// TestWriteToPanickingWriter: WriteTo runs the caller's writer with the
// filter's mutex and the commit gate held; a writer that panics hands the
// panic back with both released (before, the filter's next Add and every
// Checkpoint and Close blocked for good). A nil writer is ErrInvalid.
func TestWriteToPanickingWriter(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	if _, err := b.WriteTo(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("WriteTo(nil): %v, want ErrInvalid", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "writer boom" {
				t.Fatalf("WriteTo's panic: %v, want the writer's", r)
			}
		}()
		b.WriteTo(panicWriter{})
	}()
	done := make(chan error, 1)
	go func() {
		if _, err := b.Add([]byte("after")); err != nil {
			done <- err
			return
		}
		done <- s.Checkpoint()
	}()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Add and Checkpoint after a panicking WriteTo did not return: a lock was left held")
	}
	if _, err := b.WriteTo(io.Discard); err != nil {
		t.Fatalf("WriteTo after the panic: %v", err)
	}
}

// TestLoadKeysNil: Load(Keys(nil)) is refused as Load(nil) is, with
// ErrInvalid and the filter as it was (before, Keys ranged over the nil
// sequence inside the Load, which panicked and left the filter
// incomplete).
func TestLoadKeysNil(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	must(t, second(b.Add([]byte("k"))))
	if err := b.Load(Keys(nil)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load(Keys(nil)): %v, want ErrInvalid", err)
	}
	if st := mustInfo(t, b).State; st != "ok" {
		t.Fatalf("after Load(Keys(nil)) the filter is %q, want ok", st)
	}
	must(t, second(b.Add([]byte("k2"))))
}

// TestOpenRefusesBadPaths: Open of an empty path, or with options out of
// range, fails with ErrInvalid before it creates anything (before, Open("")
// built a store in the working directory and then failed, and a
// SegmentSize above the WAL's 1 TiB limit was refused only after the
// directory was made); a path through a file, with a NUL byte or too
// long for the system is ErrInvalid (before, a raw OS error); a read-only
// Open of a directory with no catalog is ErrNotFound. Import of a nil
// reader and Backup to an empty path are ErrInvalid.
func TestOpenRefusesBadPaths(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	if _, err := Open("", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf(`Open(""): %v, want ErrInvalid`, err)
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Fatalf(`Open("") left %d entries in the working directory`, len(ents))
	}
	dir := filepath.Join(t.TempDir(), "s")
	if _, err := Open(dir, &Options{SegmentSize: 1<<40 + 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open with SegmentSize 1 TiB + 1: %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Open made its directory: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o644))
	if _, err := Open(filepath.Join(file, "s"), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open under a file: %v, want ErrInvalid", err)
	}
	for _, p := range []string{filepath.Join(t.TempDir(), "a\x00b"), filepath.Join(t.TempDir(), strings.Repeat("a", 5000))} {
		if _, err := Open(p, nil); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Open of a path with a NUL byte or of 5000 bytes: %v, want ErrInvalid", err)
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none"), &Options{ReadOnly: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read-only Open of a missing store: %v, want ErrNotFound", err)
	}

	s := mustOpen(t, dir, nil)
	defer s.Close()
	if err := s.Import("x", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Import of a nil reader: %v, want ErrInvalid", err)
	}
	if err := s.Backup(""); !errors.Is(err, ErrInvalid) {
		t.Fatalf(`Backup(""): %v, want ErrInvalid`, err)
	}
	if l, err := s.List(); err != nil || len(l) != 0 {
		t.Fatalf("List after refused calls: %v, %v", l, err)
	}
}

// TestBadNamesEverywhere: a name no filter could have (empty, past 200
// bytes, with a slash or NUL, not UTF-8) is ErrInvalid from every call
// that takes a name; CheckFilter said ErrNotFound before (an adversarial
// review's finding).
func TestBadNamesEverywhere(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"", strings.Repeat("a", 201), "a/b", "a\x00", "\xff"} {
		for call, err := range map[string]error{
			"Bloom":       second(s.Bloom(name)),
			"Cuckoo":      second(s.Cuckoo(name)),
			"Counting":    second(s.Counting(name)),
			"Bitmap":      second(s.Bitmap(name)),
			"Drop":        s.Drop(name),
			"Rename from": s.Rename(name, "x"),
			"Rename to":   s.Rename("x", name),
			"CheckFilter": second(s.CheckFilter(name)),
		} {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s(%q): %v, want ErrInvalid", call, name, err)
			}
		}
	}
}
