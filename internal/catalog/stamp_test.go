package catalog

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
)

// TestUpdateChecksOnlyChangedFile: the writer's update checks the whole
// file (verifyCatalog) the first time, and again only once the file
// changed since its last commit: written in place by someone else (the
// same bytes: the change time moves all the same) or replaced. Before,
// every update read and walked the whole file, so the n-th create of a
// store paid for all n-1 filters (2.9-3.1 ms a create at 8,000 filters).
// TestVerifyCatalogRejectsBadPointers holds that damage written after a
// commit is still found by the next update.
func TestUpdateChecksOnlyChangedFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the change time is read on Linux only; elsewhere every update checks the file")
	}
	c := newOwned(t)
	put := func(name string, id uint64) {
		t.Helper()
		must(t, c.PutFilters(id+1, map[string]*format.FilterMeta{name: testMeta(id)}))
	}
	checks := func() int64 { return verifications.Load() }
	put("b", 2) // the first update of this Catalog: checked
	before := checks()
	put("c", 3)
	put("d", 4)
	must(t, c.DeleteFilter("d"))
	if n := checks() - before; n != 0 {
		t.Fatalf("%d whole-file checks for 3 updates of a file nobody else wrote, want 0", n)
	}
	// Someone writes the file in place, the same bytes, a clock tick
	// after the commit (where file times advance once a tick, a write
	// within it would keep them: see stamp.go).
	time.Sleep(20 * time.Millisecond)
	data, err := os.ReadFile(c.Path)
	must(t, err)
	f, err := os.OpenFile(c.Path, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt(data[:64], 0)
	must(t, f.Close())
	must(t, err)
	put("e", 5)
	if n := checks() - before; n != 1 {
		t.Fatalf("%d whole-file checks for an update after another writer wrote the file, want 1", n)
	}
	put("f", 6)
	if n := checks() - before; n != 1 {
		t.Fatalf("%d whole-file checks, want still 1 after an update of the writer's own commit", n)
	}
	// Replaced by a copy of itself (a new inode, the same bytes and, with
	// its times kept, the same times): checked.
	data, err = os.ReadFile(c.Path)
	must(t, err)
	st, err := os.Stat(c.Path)
	must(t, err)
	tmp := c.Path + ".copy"
	must(t, os.WriteFile(tmp, data, 0o644))
	must(t, os.Chtimes(tmp, st.ModTime(), st.ModTime()))
	must(t, os.Rename(tmp, c.Path))
	put("g", 7)
	if n := checks() - before; n != 2 {
		t.Fatalf("%d whole-file checks for an update after the file was replaced, want 2", n)
	}
}
