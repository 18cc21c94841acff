package store

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// filterFiles returns the layer files in dir's filters directory, sorted.
func filterFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, format.FiltersName))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// namedFiles returns the layer files s's filters name, sorted.
func namedFiles(s *Store) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, h := range s.filters {
		b := h.base()
		for i := range b.meta.Layers {
			out = append(out, format.LayerName(b.id, i))
		}
	}
	slices.Sort(out)
	return out
}

// names returns the names List reports.
func names(t *testing.T, s *Store) []string {
	t.Helper()
	l, err := s.List()
	must(t, err)
	var out []string
	for _, in := range l {
		out = append(out, in.Name)
	}
	return out
}

// TestRenameToFreeName: the filter answers to its new name only, its
// handles keep working, and a reopen (after a clean Close, or after a
// kill that leaves the adds made since in the WAL) finds it under the new
// name with every item.
func TestRenameToFreeName(t *testing.T) {
	for _, kill := range []bool{false, true} {
		dir := t.TempDir()
		s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
		f, err := s.CreateBloom("users.next", BloomConfig{Capacity: 100})
		must(t, err)
		must(t, f.Load(rangeKeys(0, 50)))
		must(t, s.Rename("users.next", "users"))
		if _, err := s.Bloom("users.next"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the old name after Rename: %v, want ErrNotFound", err)
		}
		g, err := s.Bloom("users")
		must(t, err)
		if g != f {
			t.Fatal("the new name gives another handle than the renamed filter's")
		}
		// The old handle is the filter: changes go on, logged by id, and
		// the layers they grow are recorded under the new name.
		for i := 50; i < 600; i++ {
			must(t, second(f.Add(key(i))))
		}
		if in := mustInfo(t, f); in.Layers < 3 {
			t.Fatalf("%d layers after 600 adds to a filter of capacity 100", in.Layers)
		}
		if in := mustInfo(t, f); in.Name != "users" {
			t.Fatalf("Info of the renamed filter names %q", in.Name)
		}
		if got := names(t, s); !slices.Equal(got, []string{"users"}) {
			t.Fatalf("List after Rename: %v", got)
		}
		if kill {
			s.abandonForTest()
		} else {
			must(t, s.Close())
		}
		s = mustOpen(t, dir, nil)
		if _, err := s.Bloom("users.next"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("kill=%v: the old name after reopening: %v, want ErrNotFound", kill, err)
		}
		f, err = s.Bloom("users")
		must(t, err)
		for i := 0; i < 600; i++ {
			if !f.Has(key(i)) {
				t.Fatalf("kill=%v: %s lost by the Rename and reopen", kill, key(i))
			}
		}
		must(t, s.Close())
	}
}

// TestRenameReplaces: a Rename over an existing filter (of the same kind
// or another) replaces it in one step: the new name gives the renamed
// filter, the replaced one's handles answer "maybe" and ErrClosed, its
// files are gone, and a reopen agrees.
func TestRenameReplaces(t *testing.T) {
	for _, sameKind := range []bool{true, false} {
		dir := t.TempDir()
		s := mustOpen(t, dir, nil)
		next, err := s.CreateCuckoo("next", CuckooConfig{Capacity: 1000})
		must(t, err)
		must(t, next.Load(rangeKeys(0, 300)))
		var old interface {
			Has([]byte) bool
			Info() (Info, error)
		}
		var oldAdd func() error
		if sameKind {
			c, err := s.CreateCuckoo("live", CuckooConfig{Capacity: 1000})
			must(t, err)
			must(t, c.Add([]byte("old only")))
			old, oldAdd = c, func() error { return c.Add(key(1)) }
		} else {
			b, err := s.CreateBloom("live", BloomConfig{Capacity: 1000})
			must(t, err)
			must(t, second(b.Add([]byte("old only"))))
			old, oldAdd = b, func() error { return second(b.Add(key(1))) }
		}
		oldFiles := filterFiles(t, dir)
		must(t, s.Rename("next", "live"))
		c, err := s.Cuckoo("live")
		must(t, err)
		if c != next {
			t.Fatal("the new name gives another handle than the renamed filter's")
		}
		if c.Has([]byte("old only")) {
			t.Fatal("the new name answers from the replaced filter")
		}
		if !sameKind {
			if _, err := s.Bloom("live"); !errors.Is(err, ErrWrongKind) {
				t.Fatalf("the replaced kind under the new name: %v, want ErrWrongKind", err)
			}
		}
		if !old.Has([]byte("never added")) {
			t.Fatal("a handle of the replaced filter answers absent")
		}
		if err := oldAdd(); !errors.Is(err, ErrClosed) {
			t.Fatalf("a change through a handle of the replaced filter: %v, want ErrClosed", err)
		}
		if _, err := old.Info(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Info of the replaced filter: %v, want ErrClosed", err)
		}
		if got, want := filterFiles(t, dir), namedFiles(s); !slices.Equal(got, want) || len(got) >= len(oldFiles) {
			t.Fatalf("files after replacing: %v, want %v (before: %v)", got, want, oldFiles)
		}
		must(t, s.Close())
		s = mustOpen(t, dir, nil)
		c, err = s.Cuckoo("live")
		must(t, err)
		for i := 0; i < 300; i++ {
			if !c.Has(key(i)) {
				t.Fatalf("%s lost by the Rename and reopen", key(i))
			}
		}
		if got := names(t, s); !slices.Equal(got, []string{"live"}) {
			t.Fatalf("List after reopening: %v", got)
		}
		must(t, s.Close())
	}
}

// TestRenameErrors: a missing source, a bad name, a read-only, closed or
// failed store change nothing; a Rename to the filter's own name is a
// no-op, as RENAME is.
func TestRenameErrors(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	a, err := s.CreateBloom("a", BloomConfig{})
	must(t, err)
	must(t, second(s.CreateBitmap("b", 64)))
	must(t, second(a.Add([]byte("x"))))
	for _, c := range []struct {
		from, to string
		want     error
	}{
		{"missing", "a", ErrNotFound},
		{"missing", "missing", ErrNotFound},
		{"a", "", ErrInvalid},
		{"", "a", ErrInvalid},
		{"a", "x/y", ErrInvalid},
		{"a", strings.Repeat("n", MaxNameLen+1), ErrInvalid},
		{"a", "a", nil},
	} {
		if err := s.Rename(c.from, c.to); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("Rename(%q, %q) = %v, want %v", c.from, c.to, err, c.want)
		}
	}
	if got := names(t, s); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("failed renames changed the store: %v", got)
	}
	if !a.Has([]byte("x")) || a.Has([]byte("y")) {
		t.Fatal("a Rename to its own name changed the filter")
	}
	must(t, s.Close())

	r := mustOpen(t, dir, &Options{ReadOnly: true})
	if err := r.Rename("a", "c"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Rename in a read-only store: %v, want ErrReadOnly", err)
	}
	must(t, r.Close())
	if err := s.Rename("a", "c"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Rename in a closed store: %v, want ErrClosed", err)
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	if got := names(t, s); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after reopening: %v", got)
	}
}

// TestRenameRacingWriters: changes to both filters, checkpoints, Info,
// List and a Rename over one of them run at once (run with -race); every change
// acknowledged to the renamed filter is there under its new name after a
// reopen, and the replaced one's writers stop with ErrClosed.
func TestRenameRacingWriters(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1, Sync: SyncInterval, SyncEvery: 1e6})
	next, err := s.CreateCounting("next", BloomConfig{Capacity: 10_000})
	must(t, err)
	live, err := s.CreateCounting("live", BloomConfig{Capacity: 10_000})
	must(t, err)
	var wg sync.WaitGroup
	var acked []int
	var liveErr error
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ {
			if err := next.Add(key(i)); err != nil {
				t.Error(err)
				return
			}
			acked = append(acked, i)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			if liveErr = live.Add(key(i)); liveErr != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			if err := s.Checkpoint(); err != nil {
				t.Error(err)
			}
		}
	}()
	stop := make(chan struct{})
	readers := make(chan struct{})
	go func() {
		defer close(readers)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Info and List read the name.
			if in, err := next.Info(); err != nil || in.Name != "next" && in.Name != "live" {
				t.Errorf("Info of the renamed filter: %q, %v", in.Name, err)
			}
			if _, err := s.List(); err != nil {
				t.Error(err)
			}
		}
	}()
	must(t, s.Rename("next", "live"))
	wg.Wait()
	close(stop)
	<-readers
	if !errors.Is(liveErr, ErrClosed) {
		t.Fatalf("the replaced filter's writer stopped with %v, want ErrClosed", liveErr)
	}
	if live.Count(key(0)) != math.MaxUint64 {
		t.Fatal("the replaced filter's Count is not \"unknown\"")
	}
	s.abandonForTest()
	s = mustOpen(t, dir, nil)
	defer s.Close()
	c, err := s.Counting("live")
	must(t, err)
	for _, i := range acked {
		if c.Count(key(i)) == 0 {
			t.Fatalf("acknowledged add of %s to the renamed filter lost", key(i))
		}
	}
	if got, want := filterFiles(t, dir), namedFiles(s); !slices.Equal(got, want) {
		t.Fatalf("files after reopening: %v, want %v", got, want)
	}
}

// TestRenameDuringLoad: a filter renamed while its Load runs (paused in
// its key source, between batches) finishes the Load under its new name:
// the closing checkpoint records it complete there, and a reopen finds
// every key and no entry under the old name.
func TestRenameDuringLoad(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	f, err := s.CreateCuckoo("next", CuckooConfig{Capacity: 20_000})
	must(t, err)
	paused, resume := make(chan struct{}), make(chan struct{})
	loaded := make(chan error, 1)
	go func() {
		loaded <- f.Load(func(yield func([]byte, error) bool) {
			for i := range 10_000 {
				if i == 3*loadBatch/2 {
					close(paused)
					<-resume
				}
				if !yield(key(i), nil) {
					return
				}
			}
		})
	}()
	<-paused
	must(t, s.Rename("next", "live"))
	close(resume)
	must(t, <-loaded)
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	if got := names(t, s); !slices.Equal(got, []string{"live"}) {
		t.Fatalf("after reopening: %v", got)
	}
	c, err := s.Cuckoo("live")
	must(t, err)
	if in := mustInfo(t, c); in.State != "ok" || in.Items != 10_000 {
		t.Fatalf("the loaded filter after reopening: state %q, %d items", in.State, in.Items)
	}
	for i := range 10_000 {
		if !c.Has(key(i)) {
			t.Fatalf("%s lost", key(i))
		}
	}
}

// TestDropAndRenameRemovalFailure: a Drop, or a Rename over a filter,
// whose removal of the old files fails is done all the same: the error
// says so (the filter is gone, a second Drop gets ErrNotFound), the store
// goes on, and the next Open removes the files. Before, Drop returned
// the bare removal error, which read as a Drop that had not happened (an
// adversarial review's finding).
func TestDropAndRenameRemovalFailure(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	for _, name := range []string{"a", "b", "c"} {
		must(t, second(s.CreateBloom(name, BloomConfig{Capacity: 10})))
	}
	w.sim.SetInjector(func(op mmapbits.Op, _ string) error {
		if op == mmapbits.OpRemove {
			return syscall.EIO
		}
		return nil
	})
	err = s.Drop("a")
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "dropped, but") {
		t.Fatalf("Drop with the removal failing: %v, want an error saying it dropped, wrapping EIO", err)
	}
	if err := s.Drop("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second Drop: %v, want ErrNotFound", err)
	}
	err = s.Rename("b", "c")
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "renamed, but") {
		t.Fatalf("Rename over a filter with the removal failing: %v, want an error saying it renamed, wrapping EIO", err)
	}
	w.sim.SetInjector(nil)
	must(t, s.failed())
	must(t, second(s.Bloom("c")))
	if n := len(w.sim.Paths()); n != 3 {
		t.Fatalf("%d filter files before the reopen, want 3 (c's and the two left over)", n)
	}
	must(t, s.Close())
	s, err = w.open(t)
	must(t, err)
	defer s.Close()
	if got := w.sim.Paths(); len(got) != 1 {
		t.Fatalf("files after the reopen: %v, want c's alone", got)
	}
}
