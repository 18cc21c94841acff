package store

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// TestSessionResyncOverPartialMarker: a store holds a partial RESYNC
// (b's file missing since the resyncing Open). A new failed msync (of
// c's file) cannot write the full marker (createResyncFile fails, as on a
// full thin-provisioned disk) and is recorded in SESSION instead. The next
// Open must resync every file (the session marker's record), not only the
// ones the stale partial marker lists.
func TestSessionResyncOverPartialMarker(t *testing.T) {
	t.Cleanup(func() { createResyncFile = nil })
	for seed := uint64(1); seed <= 3; seed++ {
		rng := newTestRand(seed)
		w, fail := stickyFaultWorld(t, true)
		bMissing := false
		var bpath string
		syncFail := fail.sim(mmapbits.OpSync)
		w.sim.SetInjector(func(op mmapbits.Op, p string) error {
			if bMissing && p == bpath && (op == mmapbits.OpOpen || op == mmapbits.OpEvict) {
				return syscall.ENOENT
			}
			return syncFail(op, p)
		})
		s, err := w.open(t)
		must(t, err)
		c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4096})
		must(t, err)
		b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
		must(t, err)
		must(t, second(b.Add(key(0))))
		for i := range 100 {
			must(t, c.Add(key(i)))
		}
		failCheckpoint(t, s, fail, seed) // full RESYNC
		w.kill(s)
		for _, p := range w.sim.Paths() {
			if strings.HasSuffix(p, "2-0.flt") {
				bpath = p
			}
		}
		bMissing = true
		s, err = w.open(t) // resyncing Open: b missing -> partial marker
		must(t, err)
		marker := filepath.Join(w.dir, format.ResyncName)
		if only := readResyncList(marker); len(only) != 1 {
			t.Fatalf("seed %d: want a partial marker listing b, got %v", seed, only)
		}
		c, err = s.Cuckoo("c")
		must(t, err)
		const n = 600
		for i := 100; i < n; i++ {
			must(t, c.Add(key(i)))
			if i == 200 {
				must(t, s.Checkpoint())
			}
		}
		createResyncFile = func() error { return syscall.ENOSPC }
		failCheckpoint(t, s, fail, seed) // recorded in SESSION only
		createResyncFile = nil
		if content, err := format.ReadSession(w.dir); err != nil || !format.SessionResync(content) {
			t.Fatalf("seed %d: session marker does not record the failure: %q %v", seed, content, err)
		}
		only := readResyncList(marker)
		t.Logf("seed %d: after the failed msync recorded in SESSION, RESYNC lists %v (nil = full)", seed, only)
		w.kill(s)
		s, err = w.open(t)
		if err != nil {
			t.Fatalf("seed %d: Open: %v", seed, err)
		}
		s = afterPowerLoss(t, w, s, rng, seed)
		lost := missingCuckooKeys(t, s, "c", n)
		if len(lost) > 0 {
			t.Fatalf("seed %d: %d acknowledged cuckoo keys lost (first %d): the SESSION-recorded failed msync was resynced as the partial marker's list only", seed, len(lost), lost[0])
		}
		must(t, s.Close())
	}
}

// TestPartialListedFileComesBackForeign: the partial marker lists b's
// missing file. Another store's layer file of the same name is put at
// that path (b's own file is still away): the Open drops that file's
// pages, b opens broken (not this store's file), and the marker goes,
// though b's own file, whose cached pages were never dropped, has not
// been seen: when it is moved back, nothing resyncs it.
func TestPartialListedFileComesBackForeign(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "s")
	s := mustOpen(t, dir, nil)
	_, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
	must(t, err)
	_, err = s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, s.Close())
	other := filepath.Join(root, "o")
	o := mustOpen(t, other, nil)
	_, err = o.CreateBloom("x", BloomConfig{Capacity: 1000})
	must(t, err)
	_, err = o.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, o.Close())

	marker := filepath.Join(dir, format.ResyncName)
	must(t, os.WriteFile(marker, nil, 0o644))
	bpath := format.LayerPath(dir, 2, 0)
	must(t, os.Rename(bpath, bpath+".away"))
	s = mustOpen(t, dir, nil)
	must(t, s.Close())
	if only := readResyncList(marker); len(only) != 1 {
		t.Fatalf("want a partial marker, got %v", only)
	}
	// Another store's file of the same name at the listed path.
	fb, err := os.ReadFile(format.LayerPath(other, 2, 0))
	must(t, err)
	must(t, os.WriteFile(bpath, fb, 0o644))
	s = mustOpen(t, dir, nil)
	st := mustInfoState(s, "b")
	must(t, s.Close())
	_, merr := os.Stat(marker)
	t.Logf("b is %q with the foreign file; marker: %v, lists %v", st, merr, readResyncList(marker))
	if merr != nil {
		t.Fatalf("the marker went though the listed file's own inode was never seen (b %q with another store's file at its path): %v", st, merr)
	}
}

// TestBackupCleanupMarkerCannotBeMade: the parent's sync after the
// copy's rename fails; removeCopy must make BACKUP-INCOMPLETE before it
// removes anything, and here it cannot (the copy's directory is immutable
// for the moment: chattr +i, standing for a directory entry that cannot
// be made, ENOSPC). It goes on removing what it can (the subdirectories'
// files) and leaves a directory without the marker.
func TestBackupCleanupMarkerCannotBeMade(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	s := mustOpen(t, src, nil)
	defer s.Close()
	f := createBackupFilters(t, s)
	must(t, f.fill(0, 100))
	dst := filepath.Join(t.TempDir(), "dst")
	pinned := ""
	t.Cleanup(func() {
		if pinned != "" {
			_ = exec.Command("chattr", "-i", pinned).Run()
		}
	})
	old := syncDirFn
	t.Cleanup(func() { syncDirFn = old })
	syncDirFn = func(d string) error {
		if d == filepath.Dir(dst) {
			if out, err := exec.Command("chattr", "+i", dst).CombinedOutput(); err != nil {
				t.Skipf("chattr +i: %v %s", err, out)
			}
			pinned = dst
			return syscall.EIO
		}
		return old(d)
	}
	err := s.Backup(dst)
	syncDirFn = old
	if err == nil {
		t.Fatal("Backup succeeded")
	}
	t.Logf("Backup: %v", err)
	must(t, exec.Command("chattr", "-i", dst).Run())
	pinned = ""
	out, _ := exec.Command("find", dst).CombinedOutput()
	t.Logf("left:\n%s", out)
	if _, err := os.Stat(dst); err != nil {
		return // removed after all
	}
	if _, err := os.Stat(filepath.Join(dst, backupMarker)); err != nil {
		c, oerr := Open(dst, nil)
		whole := oerr == nil
		if oerr == nil {
			l, _ := c.List()
			for _, fi := range l {
				t.Logf("opened copy: filter %s: %s", fi.Name, fi.State)
				whole = whole && fi.State == "ok"
			}
			c.Close()
		}
		if whole {
			return // the cleanup removed nothing: a whole copy is left
		}
		t.Fatalf("a failed Backup's cleanup left %s partly removed without %s (%v); Open of it: %v", dst, backupMarker, err, oerr)
	}
}
