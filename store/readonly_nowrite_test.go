package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
)

// deadWriterCopyWithDebris returns a copy of a store whose writer died,
// holding what a writer's Open would clean up: WAL records after the
// checkpoint (adds, and a cuckoo delete), the session marker, a RESYNC
// marker, the layer file of a filter dropped after the checkpoint (an
// orphan, as a crash between the catalog commit and the file's removal
// leaves it) and garbage appended to the newest WAL segment (a torn
// tail). It has no LOCK. Filters b, c and n hold key(i) and bitmap m bit
// i for i in 0..399, less key(5) in c.
func deadWriterCopyWithDebris(t *testing.T) string {
	t.Helper()
	live := filepath.Join(t.TempDir(), "live")
	s := mustOpen(t, live, &Options{CheckpointEvery: -1})
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 256, Expansion: 2})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 500})
	must(t, err)
	m, err := s.CreateBitmap("m", 4096)
	must(t, err)
	layers := func() []string {
		ents, err := os.ReadDir(format.FiltersDir(live))
		must(t, err)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	had := layers()
	_, err = s.CreateBitmap("gone", 4096)
	must(t, err)
	orphans := map[string][]byte{}
	for _, name := range layers() {
		if !slices.Contains(had, name) {
			data, err := os.ReadFile(filepath.Join(format.FiltersDir(live), name))
			must(t, err)
			orphans[name] = data
		}
	}
	if len(orphans) == 0 {
		t.Fatal("creating a filter made no layer file")
	}
	for i := range 300 {
		must(t, second(b.Add(key(i))))
		must(t, c.Add(key(i)))
		must(t, n.Add(key(i)))
		must(t, second(m.Set(uint64(i))))
	}
	must(t, s.Checkpoint())
	for i := 300; i < 400; i++ {
		must(t, second(b.Add(key(i))))
		must(t, c.Add(key(i)))
		must(t, n.Add(key(i)))
		must(t, second(m.Set(uint64(i))))
	}
	_, err = c.Delete(key(5))
	must(t, err)
	must(t, s.Drop("gone"))

	dead := filepath.Join(t.TempDir(), "dead")
	copyTree(t, live, dead) // the live writer's files, SESSION included
	if _, err := os.Stat(filepath.Join(dead, format.SessionName)); err != nil {
		t.Fatalf("no session marker in the dead writer's copy: %v", err)
	}
	for name, data := range orphans {
		must(t, os.WriteFile(filepath.Join(format.FiltersDir(dead), name), data, 0o644))
	}
	must(t, os.WriteFile(filepath.Join(dead, format.ResyncName), []byte("an msync of a filter file failed: the next Open rewrites every page before trusting them\n"), 0o644))
	// A torn tail: garbage at the end of the newest segment.
	segs, err := filepath.Glob(filepath.Join(dead, "wal", "*.log"))
	must(t, err)
	if len(segs) == 0 {
		t.Fatal("no WAL segment in the dead writer's copy")
	}
	slices.Sort(segs)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write([]byte{0x13, 0x37, 0, 0, 0xff, 0xee, 1, 2, 3})
	must(t, err)
	must(t, f.Close())
	// A crash leaves LOCK, but without it the test sees whether the
	// read-only store makes one.
	must(t, os.Remove(filepath.Join(dead, format.LockName)))
	return dead
}

// TestReadOnlyOpenWritesNothing checks Options.ReadOnly's "opens the store
// without taking the writer lock and without writing anything" where a
// writer Open would write the most: on a store whose writer died
// (deadWriterCopyWithDebris: WAL records past the checkpoint, SESSION,
// RESYNC, an orphan layer file, a torn WAL tail; no LOCK). A read-only
// Open, its lookups, List, Info, Fill, Check, CheckFilter,
// ExternalDurable, the refused Add and Checkpoint, and Close leave every
// file and directory as it was (contents, size, mode, modification
// time) and make no LOCK; the lookups still find every acknowledged key.
func TestReadOnlyOpenWritesNothing(t *testing.T) {
	dead := deadWriterCopyWithDebris(t)
	// Let a write after the snapshot show in a modification time even
	// where timestamps are coarse.
	time.Sleep(20 * time.Millisecond)
	before := treeState(t, dead)
	rs, err := Open(dead, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of the dead writer's store: %v", err)
	}
	b, err := rs.Bloom("b")
	must(t, err)
	c, err := rs.Cuckoo("c")
	must(t, err)
	n, err := rs.Counting("n")
	must(t, err)
	m, err := rs.Bitmap("m")
	must(t, err)
	for i := range 400 {
		if !b.Has(key(i)) || (i != 5 && !c.Has(key(i))) || !n.Has(key(i)) || !m.Get(uint64(i)) {
			t.Fatalf("read-only store: acknowledged key %d absent", i)
		}
	}
	_, err = rs.List()
	must(t, err)
	_, err = b.Info()
	must(t, err)
	_, err = c.Fill()
	must(t, err)
	rep, err := rs.Check()
	t.Logf("Check: %+v, %v", rep, err)
	_, _ = rs.CheckFilter("n")
	_ = rs.ExternalDurable()
	if _, err := b.Add([]byte("x")); err == nil {
		t.Errorf("Add on a read-only store succeeded")
	}
	if err := rs.Checkpoint(); err == nil {
		t.Errorf("Checkpoint of a read-only store succeeded")
	}
	if err := rs.Close(); err != nil {
		t.Errorf("Close of the read-only store: %v", err)
	}
	if d := treeDiff(before, treeState(t, dead)); len(d) > 0 {
		t.Fatalf("a read-only Open changed the store:\n%s", strings.Join(d, "\n"))
	}
	if _, err := os.Lstat(filepath.Join(dead, format.LockName)); err == nil {
		t.Fatalf("a read-only Open made %s", format.LockName)
	}
}
