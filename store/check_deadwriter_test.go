package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// deadWriterKnown says whether this system lets a reader tell a dead
// writer from a live one (the session marker's lock: Linux).
const deadWriterKnown = runtime.GOOS == "linux"

// crashedCopy returns a copy of a store whose writer is alive and idle:
// a store whose writer died, with checkKinds' filters checkpointed and
// changes after the checkpoint (which its WAL explains) to every
// filter but the counting one (a small filter: it would cover its pages).
func crashedCopy(t *testing.T) string {
	t.Helper()
	live := t.TempDir()
	s := mustOpen(t, live, &Options{CheckpointEvery: -1})
	defer s.Close()
	checkKinds(t, s, 1500)
	must(t, s.Checkpoint())
	ck, err := s.Cuckoo("cuckoo")
	must(t, err)
	bm, err := s.Bitmap("bitmap")
	must(t, err)
	for i := range 20 {
		k := fmt.Appendf(nil, "after-%d", i)
		must(t, second(mustBloom(t, s, "bloom").Add(k)))
		must(t, ck.Add(k))
		must(t, second(bm.Set(uint64(i)*40009%(1<<20))))
	}
	dir := filepath.Join(t.TempDir(), "crashed")
	must(t, os.CopyFS(dir, os.DirFS(live))) // SESSION is copied, unlocked
	return dir
}

// TestReadOnlyCheckOfDeadWriterFindsDamage: a read-only Check (what
// inspect verify runs) of a store whose writer died, before any writer
// opens it again, reports a damaged cuckoo, counting or bitmap page that
// no WAL record after the checkpoint covers, and counts a Bloom page as
// changed (a dead writer's Bloom pages may hold bits of adds whose
// records were lost). It tells the dead writer from a live one by the
// session marker's lock. Before, every such page was Unsettled ("a
// writer may be running"): damage went unreported until a writer
// recovered the store.
func TestReadOnlyCheckOfDeadWriterFindsDamage(t *testing.T) {
	dir := crashedCopy(t)
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	rep, err := r.Check()
	must(t, r.Close())
	if err != nil || rep.Unsettled != 0 || rep.Changed == 0 || rep.Pages == 0 {
		if deadWriterKnown || err != nil {
			t.Fatalf("undamaged: %+v, %v: want no problem, no unsettled page, changed pages (the WAL's)", rep, err)
		}
	}
	for _, kind := range []string{"counting", "cuckoo", "bitmap", "bloom"} {
		t.Run(kind, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "damaged")
			must(t, os.CopyFS(d, os.DirFS(dir)))
			checkDeadWriterDamage(t, d, kind)
		})
	}
}

// checkDeadWriterDamage flips a bit in the middle page of the first
// layer of filter kind in dir, a store whose writer died, and checks what
// a read-only Check reports: that page (counting, cuckoo, bitmap), a
// changed page and no problem (bloom), or an unsettled page where a dead
// writer cannot be told from a running one.
func checkDeadWriterDamage(t *testing.T, dir, kind string) {
	t.Helper()
	page := damageMiddlePage(t, layerFiles(t, dir, kind)[0], flipBit)
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	defer r.Close()
	rep, err := r.Check()
	var pe *PageError
	switch {
	case !deadWriterKnown:
		if err != nil || rep.Unsettled == 0 {
			t.Fatalf("%+v, %v: want the page unsettled (a writer may be running)", rep, err)
		}
	case kind == "bloom":
		if err != nil || rep.Unsettled != 0 || len(rep.Problems) != 0 {
			t.Fatalf("%+v, %v: want the Bloom page counted as changed", rep, err)
		}
	case !errors.As(err, &pe) || pe.Filter != kind || pe.Page != page || len(rep.Problems) != 1 || rep.Unsettled != 0:
		t.Fatalf("%+v, %v: want the damaged page %d of %s reported", rep, err, page, kind)
	}
}

// TestReadOnlyCheckAfterWriterRanSinceOpen: a read-only store opened
// while the writer was dead, beside which a writer then opens, changes
// cuckoo, counting and bitmap pages through records the reader never
// read, and dies (or, in the second case, stays open). The reader's
// Check finds the marker unlocked again, but the WAL changed since it
// opened: the pages are unsettled, not damage.
func TestReadOnlyCheckAfterWriterRanSinceOpen(t *testing.T) {
	for _, dies := range []bool{true, false} {
		t.Run(fmt.Sprintf("dies=%v", dies), func(t *testing.T) {
			dir := crashedCopy(t)
			r := mustOpen(t, dir, &Options{ReadOnly: true})
			defer r.Close()
			w := mustOpen(t, dir, nil)
			ck, err := w.Cuckoo("cuckoo")
			must(t, err)
			bm, err := w.Bitmap("bitmap")
			must(t, err)
			cn, err := w.Counting("counting")
			must(t, err)
			for i := range 200 {
				k := fmt.Appendf(nil, "later-%d", i)
				must(t, ck.Add(k))
				must(t, cn.Add(k))
				must(t, second(bm.Set(uint64(i)*5003%(1<<20))))
			}
			if dies {
				w.abandonForTest()
			} else {
				defer w.Close()
			}
			rep, err := r.Check()
			if err != nil || rep.Unsettled == 0 {
				t.Fatalf("%+v, %v: want no problem, the writer's pages unsettled", rep, err)
			}
		})
	}
}

// TestSessionLockTellsLiveFromDead: the writer holds the session
// marker's lock from its Open to its Close; a writer that dies (or whose
// store is abandoned) leaves the marker unlocked; a clean Close leaves no
// marker. Off Linux the lock cannot be asked.
func TestSessionLockTellsLiveFromDead(t *testing.T) {
	dir := t.TempDir()
	want := func(when string, state writerState) {
		t.Helper()
		if !deadWriterKnown && state == writerDead {
			state = writerLive
		}
		if got, _ := writerNow(dir); got != state {
			t.Fatalf("%s: writer state %d, want %d", when, got, state)
		}
	}
	want("no store", writerNone)
	s := mustOpen(t, dir, nil)
	want("writer open", writerLive)
	r := mustOpen(t, dir, &Options{ReadOnly: true}) // takes no lock
	want("writer and reader open", writerLive)
	must(t, r.Close())
	s.abandonForTest()
	want("writer dead", writerDead)
	s = mustOpen(t, dir, nil)
	want("recovering writer open", writerLive)
	must(t, s.Close())
	want("after a clean Close", writerNone)
}

// TestReadOnlyCheckAfterWriterDroppedFilter: a read-only store opened
// with no writer; a writer then changes a cuckoo filter's pages through
// records the reader never read, drops the filter (its files unlinked,
// still mapped by the reader, their checksums never stored) and closes
// cleanly. The reader's Check counts those pages as changed, not as
// damage: the catalog no longer names the filter. (It reported every
// such page as damage before: a reviewer's finding, older than the dead
// writer's check.)
func TestReadOnlyCheckAfterWriterDroppedFilter(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	ck, err := s.CreateCuckoo("cuckoo", CuckooConfig{Capacity: 100000})
	must(t, err)
	for i := range 100 {
		must(t, ck.Add(fmt.Appendf(nil, "before-%d", i)))
	}
	must(t, s.Close())
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	defer r.Close()
	w := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	ck, err = w.Cuckoo("cuckoo")
	must(t, err)
	for i := range 2000 {
		must(t, ck.Add(fmt.Appendf(nil, "later-%d", i)))
	}
	must(t, w.Drop("cuckoo"))
	must(t, w.Close())
	rep, err := r.Check()
	if err != nil || rep.Changed == 0 {
		t.Fatalf("%+v, %v: want the dropped filter's pages counted as changed, no problem", rep, err)
	}
}

// killForTest is abandonForTest without closing the WAL: a killed
// process does not trim the space the WAL reserved.
func (s *Store) killForTest() {
	s.closed.Store(true)
	close(s.stop)
	s.bg.Wait()
	for _, h := range s.filters {
		h.base().closeRegions()
	}
	s.closeSession()
	s.lock.release()
}

// TestReadOnlyCheckWriterRanLeavingSameFiles: the dead writer died with
// an empty, reserved WAL segment; after a read-only store opens, a
// writer truncates the reservation, appends into the same file,
// reserves the same size again, changes cuckoo pages and is killed: the
// WAL's entries keep their names, inodes and sizes, and with the
// modification times set back (a file system with coarse timestamps)
// they look as the reader recorded them. The writer's session id in the
// marker still tells the reader it ran: no problem. (Before session ids,
// the reader reported the writer's pages as damage: a reviewer's
// finding.)
func TestReadOnlyCheckWriterRanLeavingSameFiles(t *testing.T) {
	live := t.TempDir()
	s := mustOpen(t, live, &Options{CheckpointEvery: -1})
	ck, err := s.CreateCuckoo("cuckoo", CuckooConfig{Capacity: 100000})
	must(t, err)
	for i := range 50 {
		must(t, ck.Add(fmt.Appendf(nil, "k-%d", i)))
	}
	must(t, s.Checkpoint())
	dir := filepath.Join(t.TempDir(), "crashed")
	must(t, os.CopyFS(dir, os.DirFS(live)))
	must(t, s.Close())
	ents, err := os.ReadDir(filepath.Join(dir, "wal"))
	must(t, err)
	must(t, os.Truncate(filepath.Join(dir, "wal", ents[len(ents)-1].Name()), 1<<20)) // the dead writer's reservation
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	defer r.Close()
	if deadWriterKnown && r.roDead == nil {
		t.Fatal("the reader does not know the writer dead")
	}
	var before []fs.FileInfo
	if r.roDead != nil {
		before = r.roDead.files
	}
	w := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	ck, err = w.Cuckoo("cuckoo")
	must(t, err)
	for i := range 300 {
		must(t, ck.Add(fmt.Appendf(nil, "later-%d", i)))
	}
	w.killForTest()
	after, err := r.writerFiles()
	must(t, err)
	same := 0
	for i := range min(len(before), len(after)) {
		if a, b := before[i], after[i]; a.Name() == b.Name() && os.SameFile(a, b) && a.Size() == b.Size() {
			path := filepath.Join(dir, "wal", a.Name())
			if i == 0 {
				path = r.cat.Path
			}
			must(t, os.Chtimes(path, a.ModTime(), a.ModTime()))
			same++
		}
	}
	if deadWriterKnown && (same != len(before) || len(after) != len(before)) {
		t.Fatalf("%d of %d entries kept name, inode and size (%d now): the case does not arise", same, len(before), len(after))
	}
	rep, err := r.Check()
	if err != nil || rep.Unsettled == 0 {
		t.Fatalf("%+v, %v: want the writer's pages unsettled, no problem", rep, err)
	}
}

// TestSessionMarkerRewrittenWhole: a recovering writer leaves the marker
// exactly as long as its content, whatever was there (bytes appended from
// outside; an older build's shorter marker), so that it parses again.
// Before, a marker longer than its content stayed unparseable: every
// later Open skipped the newest-segment check, and readers took every
// writer for a running one.
func TestSessionMarkerRewrittenWhole(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	s.abandonForTest()
	marker := filepath.Join(dir, sessionFile)
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	must(t, second(f.Write([]byte("trailing bytes written from outside"))))
	must(t, f.Close())
	s = mustOpen(t, dir, nil)
	s.abandonForTest()
	content, err := os.ReadFile(marker)
	must(t, err)
	if _, session, ok := format.ParseSession(content); !ok || session == 0 || len(content) != format.SessionLen {
		t.Fatalf("the marker after a recovering Open: %q (%d bytes): want exactly its content", content, len(content))
	}
}
