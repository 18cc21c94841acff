package store

// Issue #9 C: a lost, emptied, foreign or damaged catalog fails Open with
// ErrCorrupt, touches no file, and leaks nothing.

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
	bolt "go.etcd.io/bbolt"
)

// entryState is what treeState records of one entry under a directory.
type entryState struct {
	sum   [32]byte // SHA-256 of the contents; zero for a directory
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

// treeState maps every entry under dir, by its path relative to dir ("."
// for dir itself), to its entryState: directories and LOCK included, and
// with modification times, so that a write of the same bytes, or a file
// made and removed again (its directory's mtime), shows. A symbolic
// link's hash is its target's contents.
func treeState(t *testing.T, dir string) map[string]entryState {
	t.Helper()
	out := map[string]entryState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entryState{size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime()}
		if !d.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.sum = sha256.Sum256(data)
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// treeDiff lists, sorted, the entries that differ between two treeStates.
func treeDiff(before, after map[string]entryState) []string {
	var d []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			d = append(d, "removed "+p)
		case a.sum != b.sum:
			d = append(d, "contents changed: "+p)
		case a.size != b.size || a.mode != b.mode:
			d = append(d, fmt.Sprintf("size or mode changed: %s: %d %v -> %d %v", p, b.size, b.mode, a.size, a.mode))
		case !a.mtime.Equal(b.mtime):
			d = append(d, fmt.Sprintf("modification time changed: %s: %v -> %v", p, b.mtime, a.mtime))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			d = append(d, "created "+p)
		}
	}
	slices.Sort(d)
	return d
}

// dirState maps every file under dir but LOCK (whose pid the lock rewrites)
// to its hash: treeState less directories, LOCK, sizes, modes and times.
func dirState(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	for rel, e := range treeState(t, dir) {
		if !e.mode.IsDir() && filepath.Base(rel) != format.LockName {
			out[rel] = e.sum
		}
	}
	return out
}

func sameDir(t *testing.T, before, after map[string][32]byte) {
	t.Helper()
	for name, h := range before {
		if got, ok := after[name]; !ok {
			t.Errorf("%s was removed", name)
		} else if got != h {
			t.Errorf("%s was changed", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s was created", name)
		}
	}
}

// populatedStore makes a store in dir with every kind of filter, some of
// it checkpointed and some only in the WAL, and leaves it as a crash would.
func populatedStore(t *testing.T, dir string) {
	t.Helper()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	must(t, second(s.CreateCounting("n", BloomConfig{Capacity: 1000})))
	must(t, second(s.CreateBitmap("m", 1000)))
	for i := 0; i < 100; i++ {
		must(t, second(b.Add(key(i))))
		must(t, c.Add(key(i)))
		if i == 50 {
			must(t, s.Checkpoint())
		}
	}
	s.abandonForTest()
}

// TestLostCatalogTouchesNothing: with catalog.db deleted, emptied,
// replaced by an unrelated bbolt file or by another store's catalog, Open
// (writer or read-only) fails with ErrCorrupt and leaves every file as it
// was: it neither starts a new catalog over the filter files and WAL nor
// deletes files as orphans.
func TestLostCatalogTouchesNothing(t *testing.T) {
	other := t.TempDir()
	os2 := mustOpen(t, other, nil)
	must(t, second(os2.CreateBloom("x", BloomConfig{})))
	must(t, os2.Close())
	otherCatalog, err := os.ReadFile(filepath.Join(other, format.CatalogName))
	must(t, err)

	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"deleted", os.Remove},
		{"empty", func(p string) error { return os.Truncate(p, 0) }},
		{"unrelated bbolt file", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			db, err := bolt.Open(p, 0o644, nil)
			if err != nil {
				return err
			}
			err = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("users")); return err })
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			return err
		}},
		{"another store's catalog", func(p string) error { return os.WriteFile(p, otherCatalog, 0o644) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			populatedStore(t, dir)
			must(t, tc.damage(filepath.Join(dir, format.CatalogName)))
			before := dirState(t, dir)
			for _, ro := range []bool{false, true} {
				s, err := Open(dir, &Options{ReadOnly: ro})
				if err == nil {
					s.Close()
					t.Fatalf("ReadOnly=%v: Open succeeded over a %s catalog", ro, tc.name)
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ReadOnly=%v: Open: %v, want ErrCorrupt", ro, err)
				}
				t.Logf("ReadOnly=%v: %v", ro, err)
				sameDir(t, before, dirState(t, dir))
			}
		})
	}
}

// TestOlderCatalogNamesMissingRecords: a catalog restored from before
// checkpoints that deleted the WAL records it needs fails both opens with
// ErrCorrupt, naming the same range of missing records (the read-only
// open used to name 0 as the WAL's start and the range up to 2^64-1).
func TestOlderCatalogNamesMissingRecords(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1, SegmentSize: 64 << 10})
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100_000})
	must(t, err)
	must(t, s.Checkpoint())
	old, err := os.ReadFile(filepath.Join(dir, format.CatalogName))
	must(t, err)
	for round := range 3 {
		for i := range 2000 {
			must(t, second(b.Add(key(round*2000+i))))
		}
		must(t, s.Checkpoint())
	}
	must(t, s.Close())
	must(t, os.WriteFile(filepath.Join(dir, format.CatalogName), old, 0o644))
	var msgs []string
	for _, ro := range []bool{false, true} {
		s, err := Open(dir, &Options{ReadOnly: ro})
		if err == nil {
			s.Close()
			t.Fatalf("ReadOnly=%v: Open succeeded over a catalog whose WAL records are gone", ro)
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "are missing") {
			t.Fatalf("ReadOnly=%v: Open: %v, want ErrCorrupt naming the missing records", ro, err)
		}
		msg := err.Error()
		msgs = append(msgs, msg[strings.Index(msg, "WAL starts"):])
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("the opens name different gaps:\nwriter:    %s\nread-only: %s", msgs[0], msgs[1])
	}
	t.Log(msgs[0])
}

// TestReadOnlyOpenOfNoStore: a read-only open of a directory that holds no
// store (empty, or missing) fails without ErrCorrupt, naming the missing
// catalog, and creates nothing; one whose catalog cannot be reached (a
// symlink loop; permission denied, where the tests do not run as root)
// says so, not "not a store directory".
func TestReadOnlyOpenOfNoStore(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		s, err := Open(dir, &Options{ReadOnly: true})
		if err == nil {
			s.Close()
			t.Fatalf("%s: a read-only open succeeded", dir)
		}
		if errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a store directory") {
			t.Fatalf("%s: read-only open: %v, want \"not a store directory\" without ErrCorrupt", dir, err)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Fatalf("%s: a read-only open created %v", dir, names)
		}
	}
	// A catalog that is there but cannot be reached is not "not a
	// store" (ErrNotFound): the error names the catalog and the cause.
	dir := t.TempDir()
	cat := filepath.Join(dir, format.CatalogName)
	must(t, os.Symlink(cat, cat)) // a loop: ELOOP
	_, err := Open(dir, &Options{ReadOnly: true})
	if err == nil || errors.Is(err, ErrNotFound) || strings.Contains(err.Error(), "not a store directory") || !strings.Contains(err.Error(), "cannot read "+format.CatalogName) {
		t.Fatalf("read-only open of a store whose catalog cannot be read: %v, want \"cannot read %s\" without ErrNotFound", err, format.CatalogName)
	}
}

// TestNewStoreInEmptyDirectory: the one case where Open creates a catalog
// is a directory with no filter file and no WAL segment, even if an earlier
// first Open was interrupted (an empty filters/ or wal/ directory).
func TestNewStoreInEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, format.FiltersName), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, format.WALName), 0o755))
	s := mustOpen(t, dir, nil)
	must(t, second(s.CreateBloom("b", BloomConfig{})))
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	if _, err := s.Bloom("b"); err != nil {
		t.Fatal(err)
	}
}

// catalogMappings counts this process's mappings of a file named
// catalog.db (-1 where /proc/self/maps does not exist).
func catalogMappings() int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return -1
	}
	return strings.Count(string(maps), "/"+format.CatalogName+"\n")
}

// openFDs maps each of this process's open file descriptors to what it
// refers to (nil where /proc/self/fd does not exist).
func openFDs() map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	fds := make(map[string]string, len(ents))
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // the descriptor ReadDir itself used, closed since
		}
		fds[e.Name()] = target
	}
	return fds
}

// fdsLeakedUnder lists the descriptors open now, and not in before, that
// refer to dir or a file under it. Descriptors elsewhere are not counted:
// the runtime, and goroutines other tests left to finish, open and close
// their own (an extra descriptor once made this test fail in CI, with no
// file of the store open).
func fdsLeakedUnder(dir string, before map[string]string) []string {
	var leaked []string
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	for fd, target := range openFDs() {
		if before[fd] == target {
			continue
		}
		if target == dir || strings.HasPrefix(target, dir+string(filepath.Separator)) {
			leaked = append(leaked, fd+" -> "+target)
		}
	}
	slices.Sort(leaked)
	return leaked
}

// TestUnreadableCatalogLeaksNothing: a catalog cut short or overwritten
// fails Open with ErrCorrupt whatever bbolt does with it (an error, a
// panic, a fault reading past the end), and the failed Open keeps no
// descriptor or lock: restoring the catalog makes the next Open in the
// same process succeed at once.
func TestUnreadableCatalogLeaksNothing(t *testing.T) {
	seed := testseed.Seed(t)
	rng := newTestRand(seed)
	dir := t.TempDir()
	populatedStore(t, dir)
	path := filepath.Join(dir, format.CatalogName)
	good, err := os.ReadFile(path)
	must(t, err)
	// Each variant damages the catalog as it is when it runs (every
	// successful Open checkpoints, so the good copy moves on).
	type variant struct {
		name   string
		damage func(good []byte) []byte
	}
	var variants []variant
	for _, n := range []int{0, 100, 4096, 8192, 12288, 16384, -4096} {
		variants = append(variants, variant{"cut to " + itoa(n), func(g []byte) []byte {
			if n < 0 {
				n += len(g)
			}
			return g[:min(n, len(g))]
		}})
	}
	for i := 0; i < 8; i++ {
		off := 2*4096 + rng.IntN(len(good)-2*4096) // past the meta pages
		variants = append(variants, variant{"garbled at " + itoa(off), func(g []byte) []byte {
			d := append([]byte(nil), g...)
			for j := 0; j < 256 && off+j < len(d); j++ {
				d[off+j] = byte(rng.Uint32())
			}
			return d
		}})
	}
	// A damaged freelist page: the read-only load at Open never reads it,
	// but the read-write bolt.Open of the recovery checkpoint does, and
	// panics inside bolt.Open (its freelist read checks the page type).
	// Test-only knowledge of bbolt's layout: 4096-byte pages; the meta
	// at offset 16 of pages 0 and 1 holds the freelist page id at +32 and
	// the txid at +48; a page header's flags are the u16 at offset 8.
	variants = append(variants, variant{"freelist page damaged", func(g []byte) []byte {
		d := append([]byte(nil), g...)
		meta := 16
		if binary.LittleEndian.Uint64(d[4096+16+48:]) > binary.LittleEndian.Uint64(d[16+48:]) {
			meta = 4096 + 16
		}
		free := int(binary.LittleEndian.Uint64(d[meta+32:])) * 4096
		binary.LittleEndian.PutUint16(d[free+8:], 0)
		return d
	}})
	variants = append(variants, variant{"garbage", func(g []byte) []byte {
		d := make([]byte, len(g))
		for i := range d {
			d[i] = byte(rng.Uint32())
		}
		return d
	}})

	runtime.GC()
	// No collection while the variants run: an *os.File a failed Open
	// dropped unclosed would otherwise be closed by its finalizer at a
	// collection, and the check below would see it or not by chance.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	fds := openFDs()
	for _, v := range variants {
		must(t, os.WriteFile(path, v.damage(good), 0o644))
		for _, ro := range []bool{false, true} {
			s, err := Open(dir, &Options{ReadOnly: ro})
			if err == nil {
				// A garbled page the read-only load never reads is found
				// by the checkpoint of Close, which fails the store.
				if err := s.Close(); err != nil && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s, ReadOnly=%v: Close: %v, want nil or ErrCorrupt", v.name, ro, err)
				}
				continue
			}
			t.Logf("%s, ReadOnly=%v: %v", v.name, ro, err)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s, ReadOnly=%v: Open: %v, want ErrCorrupt", v.name, ro, err)
			}
		}
		if _, err := catalog.Read(dir); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: catalog.Read: %v, want ErrCorrupt", v.name, err)
		}
		must(t, os.WriteFile(path, good, 0o644))
		start := time.Now()
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatalf("after %s: Open of the restored catalog: %v", v.name, err)
		}
		if d := time.Since(start); d > catalog.Wait/2 {
			t.Fatalf("after %s: Open of the restored catalog took %v: a lock leaked", v.name, d)
		}
		must(t, s.Close())
		good, err = os.ReadFile(path) // the Open checkpointed
		must(t, err)
		if fds != nil {
			if leaked := fdsLeakedUnder(dir, fds); len(leaked) > 0 {
				t.Fatalf("after %s: descriptors left open: %v", v.name, leaked)
			}
		}
		if n := catalogMappings(); n > 0 {
			t.Fatalf("after %s: %d mappings of the catalog left", v.name, n)
		}
	}
}

func itoa(n int) string { return fmt.Sprint(n) }

// TestOlderCatalogRefused: with the catalog restored from a backup taken
// before a filter was created and loaded, and the WAL removed after the
// clean Close (so that the filter's file alone tells: the Load's record
// is gone), Open fails with ErrCorrupt instead of deleting that filter's
// file as an orphan; so it does for a file beyond the catalog's next id.
func TestOlderCatalogRefused(t *testing.T) {
	for _, extra := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d filters newer", extra), func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			must(t, second(s.CreateBloom("old", BloomConfig{})))
			must(t, s.Close())
			backup, err := os.ReadFile(filepath.Join(dir, format.CatalogName))
			must(t, err)
			s = mustOpen(t, dir, nil)
			for i := 0; i < extra; i++ {
				b, err := s.CreateBloom(fmt.Sprintf("new%d", i), BloomConfig{Capacity: 1000})
				must(t, err)
				must(t, b.Load(rangeKeys(0, 500)))
			}
			must(t, s.Close())
			must(t, os.WriteFile(filepath.Join(dir, format.CatalogName), backup, 0o644))
			must(t, os.RemoveAll(filepath.Join(dir, format.WALName)))
			before := dirState(t, dir)
			if _, err := Open(dir, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "filters/") {
				t.Fatalf("Open with a catalog older than the files: %v, want ErrCorrupt naming the file", err)
			}
			sameDir(t, before, dirState(t, dir))
		})
	}
}

// TestLostWALAfterCrash: a WAL directory deleted (or emptied) after its
// writer died held records no filter file has; a writer or read-only Open
// fails with ErrCorrupt naming the loss, and changes no file. After a
// clean Close the WAL holds nothing the filters need: an Open recreates
// it and every key reads present. Removing the session marker, as the
// error says, opens the store without the lost records.
func TestLostWALAfterCrash(t *testing.T) {
	for _, how := range []string{"deleted", "emptied"} {
		t.Run(how, func(t *testing.T) {
			lose := func(dir string) {
				w := filepath.Join(dir, format.WALName)
				must(t, os.RemoveAll(w))
				if how == "emptied" {
					must(t, os.Mkdir(w, 0o755))
				}
			}
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
			b, err := s.CreateBloom("b", BloomConfig{Capacity: 10_000})
			must(t, err)
			must(t, s.Checkpoint())
			for i := range 100 {
				must(t, second(b.Add(key(i))))
			}
			s.abandonForTest() // killed: records 1..100 are in the WAL only
			lose(dir)
			before := dirState(t, dir)
			for _, ro := range []bool{false, true} {
				r, err := Open(dir, &Options{ReadOnly: ro})
				if err == nil {
					r.Close()
					t.Fatalf("ReadOnly=%v: Open succeeded with the WAL of a killed writer %s", ro, how)
				}
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "holds no segment") || !strings.Contains(err.Error(), format.SessionName) {
					t.Fatalf("ReadOnly=%v: Open: %v, want ErrCorrupt naming the empty WAL and the session marker", ro, err)
				}
				if after := dirState(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Fatalf("ReadOnly=%v: the failed Open changed files", ro)
				}
			}
			must(t, os.Remove(filepath.Join(dir, format.SessionName)))
			s = mustOpen(t, dir, nil)
			must(t, s.Close())

			// A clean Close: nothing is lost, nothing is reported.
			dir = t.TempDir()
			s = mustOpen(t, dir, &Options{CheckpointEvery: -1})
			b, err = s.CreateBloom("b", BloomConfig{Capacity: 10_000})
			must(t, err)
			for i := range 100 {
				must(t, second(b.Add(key(i))))
			}
			must(t, s.Close())
			lose(dir)
			s = mustOpen(t, dir, nil)
			defer s.Close()
			b, err = s.Bloom("b")
			must(t, err)
			for i := range 100 {
				if !b.Has(key(i)) {
					t.Fatalf("key %d absent after a clean Close and a lost WAL", i)
				}
			}
			must(t, second(b.Add(key(1000))))
		})
	}
}

// TestLostWALSegmentAfterCrash: a writer is killed with acknowledged adds
// in several WAL segments only, then one segment is deleted: the oldest
// one the filters need, one in the middle, or the newest (deleted, or
// renamed aside). Neither a read-only nor a writer Open may answer from
// the rest (some acknowledged keys would read absent): both fail with
// ErrCorrupt naming the missing records, the LSN gap or the newest
// segment the session marker records, and change no file. (The newest
// one's loss used to go unseen: the rest looked like a whole log.)
func TestLostWALSegmentAfterCrash(t *testing.T) {
	for _, which := range []string{"oldest", "middle", "newest", "newest-renamed"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1, SegmentSize: 64 << 10})
			b, err := s.CreateBloom("b", BloomConfig{Capacity: 100_000})
			must(t, err)
			must(t, s.Checkpoint())
			for i := range 6000 {
				must(t, second(b.Add(key(i))))
			}
			s.abandonForTest() // killed: the adds are in the WAL only
			w := filepath.Join(dir, format.WALName)
			ents, err := os.ReadDir(w)
			must(t, err)
			if len(ents) < 3 {
				t.Fatalf("%d WAL segments, want at least 3", len(ents))
			}
			victim, want := ents[1].Name(), "LSN gap" // ReadDir sorts by name: by first LSN
			switch which {
			case "oldest":
				victim, want = ents[0].Name(), "are missing"
			case "newest", "newest-renamed":
				victim = ents[len(ents)-1].Name()
				want = "records that the last writer started WAL segment " + victim
			}
			if which == "newest-renamed" {
				must(t, os.Rename(filepath.Join(w, victim), filepath.Join(w, victim+".bak")))
			} else {
				must(t, os.Remove(filepath.Join(w, victim)))
			}
			before := dirState(t, dir)
			for _, ro := range []bool{true, false} {
				r, err := Open(dir, &Options{ReadOnly: ro})
				if err == nil {
					// The killed writer's bits may still be in the page
					// cache; a power loss would have taken them too.
					r.Close()
					t.Fatalf("ReadOnly=%v: Open succeeded without WAL segment %s", ro, victim)
				}
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
					t.Fatalf("ReadOnly=%v: Open: %v, want ErrCorrupt saying %q", ro, err, want)
				}
				if after := dirState(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Fatalf("ReadOnly=%v: the failed Open changed files", ro)
				}
			}
		})
	}
}

// TestLostWALRestartFails: after a clean Close and a lost WAL, the next
// Open restarts the WAL after the checkpoint; if that fails (the new
// segment cannot be created), the Open fails, and a later Open, with the
// disk fixed, still succeeds: the restart runs before the session marker
// exists, so it cannot look like a WAL lost after a crash.
func TestLostWALRestartFails(t *testing.T) {
	dir := t.TempDir()
	sim, mem := mmapbits.NewSim(), wal.NewMemFS()
	s, err := Open(dir, WithSeams(Options{CheckpointEvery: -1}, sim, mem))
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 10_000})
	must(t, err)
	for i := range 100 {
		must(t, second(b.Add(key(i))))
	}
	must(t, s.Close())
	w := filepath.Join(dir, format.WALName)
	names, err := mem.List(w)
	must(t, err)
	for _, n := range names {
		must(t, mem.Remove(filepath.Join(w, n)))
	}
	creates := 0
	mem.SetInjector(func(op wal.Op, name string) error {
		if op == wal.OpCreate {
			if creates++; creates == 2 { // the restart's segment
				return syscall.ENOSPC
			}
		}
		return nil
	})
	if s, err := Open(dir, WithSeams(Options{}, sim, mem)); err == nil {
		s.Close()
		t.Fatal("Open succeeded though the WAL's restart failed")
	}
	mem.SetInjector(nil)
	s, err = Open(dir, WithSeams(Options{}, sim, mem))
	if err != nil {
		t.Fatalf("Open after a failed WAL restart: %v", err)
	}
	defer s.Close()
	b, err = s.Bloom("b")
	must(t, err)
	for i := range 100 {
		if !b.Has(key(i)) {
			t.Fatalf("key %d absent", i)
		}
	}
}

// TestLoadOverOlderCatalogKeepsKeys: a catalog copied before a Load into
// an existing cuckoo filter and put back after it says the filter's layer
// holds no items, though its file holds the Load's keys. Open refuses
// such a catalog while the WAL holds the Load's record or starts after
// it (TestOlderCatalogAfterLoadRefused), but not once wal/ is removed as
// well (after a clean Close a missing WAL loses nothing), and then the
// counts come back stale. A second Load then builds the layer in private
// memory, as into an empty one, and publishes it: it must not overwrite
// the layer's fingerprints. With room for both Loads' keys every key of
// both is found and the layer is counted anew; with too little, when the
// Load ends (endBuild's publish) or in its middle (loadParallel's, the
// build full), the second Load fails with ErrFull and every key of the
// first is still in the layer (read there, since the failed Load leaves
// the filter incomplete, which answers "maybe" to every key).
func TestLoadOverOlderCatalogKeepsKeys(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second int // keys of the second Load
		fails  bool
	}{{"fits", 500, false}, {"overflows at the end", 14000, true}, {"overflows in the middle", 30000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, olderCatalogAfterLoad(t, 5000), nil)
			defer s.Close()
			c, err := s.Cuckoo("c")
			must(t, err)
			err = c.Load(rangeKeys(100_000, 100_000+tc.second))
			if tc.fails != (err != nil) || err != nil && !errors.Is(err, ErrFull) {
				t.Fatalf("second Load of %d keys: %v (want an error wrapping ErrFull: %v)", tc.second, err, tc.fails)
			}
			first := (*c.layers.Load())[0]
			for i := range 5000 {
				if !first.HasHash(cuckoo.Hash(key(i))) {
					t.Fatalf("key %d of the first Load absent from the first layer after the second Load", i)
				}
			}
			absent := 0
			for i := range 5000 {
				if !first.HasHash(cuckoo.Hash(key(1_000_000 + i))) {
					absent++
				}
			}
			if absent < 4900 {
				t.Fatalf("the first layer answers present for %d of 5000 keys never added", 5000-absent)
			}
			if tc.fails {
				return
			}
			for i := range tc.second {
				if !c.Has(key(100_000 + i)) {
					t.Fatalf("key %d of the second Load absent", i)
				}
			}
			// The merge found the count wrong and recounted the layer.
			in, err := c.Info()
			must(t, err)
			if want := uint64(5000 + tc.second); in.Items != want {
				t.Fatalf("Info().Items = %d after the merge, want %d (both Loads' keys)", in.Items, want)
			}
		})
	}
}

// TestAddsOverOlderCatalogGrow: with the catalog of
// TestLoadOverOlderCatalogKeepsKeys put back (the layer's count 0, its
// file holding a Load's keys), Adds past the layer's capacity must grow
// the filter, not fail as if one key had filled its buckets: the first
// failing insert counts the layer's fingerprints. Every key is found
// after a reopen.
func TestAddsOverOlderCatalogGrow(t *testing.T) {
	dir := olderCatalogAfterLoad(t, 12000)
	s := mustOpen(t, dir, nil)
	c, err := s.Cuckoo("c")
	must(t, err)
	for i := range 10000 {
		if err := c.Add(key(100_000 + i)); err != nil {
			t.Fatalf("Add %d after the older catalog: %v", i, err)
		}
	}
	if in, err := c.Info(); err != nil || in.Layers < 2 {
		t.Fatalf("Info: %+v, %v: want the filter grown to two layers or more", in, err)
	}
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	c, err = s.Cuckoo("c")
	must(t, err)
	for i := range 12000 {
		if !c.Has(key(i)) {
			t.Fatalf("key %d of the Load absent", i)
		}
	}
	for i := range 10000 {
		if !c.Has(key(100_000 + i)) {
			t.Fatalf("key %d of the Adds absent", 100_000+i)
		}
	}
}

// olderCatalogAfterLoad returns a store directory with a cuckoo filter "c"
// of capacity 2^14 into which keys 0..n-1 were loaded, whose catalog was
// then put back from a copy taken before the Load and whose WAL (which
// would make Open refuse that catalog) was removed after a clean Close.
func olderCatalogAfterLoad(t *testing.T, n int) (dir string) {
	t.Helper()
	dir = t.TempDir()
	s := mustOpen(t, dir, nil)
	_, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1 << 14})
	must(t, err)
	must(t, s.Close())
	backup, err := os.ReadFile(filepath.Join(dir, format.CatalogName))
	must(t, err)
	s = mustOpen(t, dir, nil)
	c, err := s.Cuckoo("c")
	must(t, err)
	must(t, c.Load(rangeKeys(0, n)))
	must(t, s.Close())
	must(t, os.WriteFile(filepath.Join(dir, format.CatalogName), backup, 0o644))
	must(t, os.RemoveAll(filepath.Join(dir, format.WALName)))
	return dir
}

// TestSessionMarkerAfterWALRestart: a killed writer's session marker
// names a late WAL segment; no filter needs the WAL, which is then
// removed. The next writer restarts the WAL at segment 1 and records it
// in the marker at Open: a read-only Open beside it, and every Open after
// it is killed too, succeed. (The marker kept the dead writer's segment,
// and every Open was refused with ErrCorrupt with nothing lost.) A
// marker whose CRC does not match is ignored, not trusted.
func TestSessionMarkerAfterWALRestart(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1, SegmentSize: 64 << 10})
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100_000})
	must(t, err)
	for i := range 6000 {
		must(t, second(b.Add(key(i))))
	}
	must(t, s.Drop("b"))
	s.abandonForTest()
	marker := filepath.Join(dir, format.SessionName)
	if got, err := os.ReadFile(marker); err != nil || string(got) == string(format.SessionContent(1, s.sessionID)) {
		t.Fatalf("the killed writer's marker: %q, %v; want a later segment", got, err)
	}
	must(t, os.RemoveAll(filepath.Join(dir, format.WALName)))
	s = mustOpen(t, dir, nil)
	if got, _ := os.ReadFile(marker); string(got) != string(format.SessionContent(s.log.Segments()[0].FirstLSN, s.sessionID)) {
		t.Fatalf("the marker after the WAL restarted: %q", got)
	}
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	must(t, r.Close())
	must(t, second(s.CreateBitmap("m", 64)))
	s.abandonForTest()
	s = mustOpen(t, dir, nil)
	must(t, s.Close())

	// A torn marker naming a later segment: not understood, not trusted.
	s = mustOpen(t, dir, nil)
	s.abandonForTest()
	torn := format.SessionContent(1<<40, 1)
	torn[len(torn)-2] ^= 1
	must(t, os.WriteFile(marker, torn, 0o644))
	s = mustOpen(t, dir, nil)
	must(t, s.Close())
}

// TestCatalogNotAFile: a catalog.db that is a directory, a FIFO or a
// symbolic link to nothing fails every Open with ErrCorrupt naming what
// it is, and leaves no catalog behind. Before, a writer's Open blamed a
// hard link for the directory (a directory has several names), both
// Opens called the FIFO "empty", and a writer made a new store through
// the dangling link (an adversarial review's findings).
func TestCatalogNotAFile(t *testing.T) {
	for _, c := range []struct {
		name, want string
		make       func(path string) error
	}{
		{"directory", "it is a directory", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"fifo", "it is a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"dangling symlink", "a symbolic link to nothing", func(p string) error { return os.Symlink(p+".gone", p) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cat := format.CatalogPath(dir)
			must(t, c.make(cat))
			for _, ro := range []bool{false, true} {
				s, err := Open(dir, &Options{ReadOnly: ro})
				if err == nil {
					s.Close()
					t.Fatalf("read-only %v: Open succeeded", ro)
				}
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hard link") {
					t.Fatalf("read-only %v: Open: %v, want ErrCorrupt saying %q", ro, err, c.want)
				}
			}
			if _, err := os.Stat(cat + ".gone"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a catalog was made through the link: %v", err)
			}
		})
	}
}

// TestCatalogCheckpointBeyondMaxLSN: a catalog whose checkpoint LSN is
// beyond the last a WAL can hold (a crafted or damaged value) fails a
// writer's Open with ErrCorrupt, before anything changes. Before, the
// WAL was set to resume at the LSN after it, which wraps to 0.
func TestCatalogCheckpointBeyondMaxLSN(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	must(t, second(s.CreateBloom("b", BloomConfig{Capacity: 100})))
	must(t, s.Close())
	checkpointBeyondMaxLSN(t, dir)
	_, err := Open(dir, nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "beyond the last a WAL can hold") {
		t.Fatalf("Open: %v, want ErrCorrupt naming the checkpoint", err)
	}
}

// checkpointBeyondMaxLSN sets the checkpoint of the catalog in dir to the
// largest LSN, beyond any a WAL can hold, keeping every filter's entry.
func checkpointBeyondMaxLSN(t *testing.T, dir string) {
	t.Helper()
	c := catalog.New(dir)
	st, err := c.Load()
	must(t, err)
	metas := make(map[string]*format.FilterMeta)
	live := make(map[string]bool)
	for name, m := range st.Filters {
		metas[name], live[name] = m, true
	}
	must(t, second(c.Checkpoint(math.MaxUint64, 0, metas, live)))
}
