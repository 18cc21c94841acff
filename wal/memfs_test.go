package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestMemFSBasics(t *testing.T) {
	fs := NewMemFS()
	if _, err := fs.Create("/nodir/f"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Create in a missing dir: %v", err)
	}
	if err := fs.MkdirAll("/a/b"); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("/a/b/f")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hello "))
	f.Write([]byte("world"))
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 6); n != 5 || err != nil || string(buf) != "world" {
		t.Fatalf("ReadAt = %d, %v, %q", n, err, buf)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("!"))
	if sz, _ := f.Size(); sz != 6 {
		t.Fatalf("size %d", sz)
	}
	f.Close()
	if _, err := f.Write(nil); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	r, _ := fs.Open("/a/b/f")
	if _, err := r.Write([]byte("x")); err == nil {
		t.Fatal("Write on a read-only file succeeded")
	}
	names, _ := fs.List("/a")
	if len(names) != 1 || names[0] != "b" {
		t.Fatalf("List(/a) = %v", names)
	}
	if err := fs.Rename("/a/b/f", "/a/b/g"); err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadFile("/a/b/g"); err != nil || string(b) != "hello!" {
		t.Fatalf("after rename: %q, %v", b, err)
	}
	if err := fs.Remove("/a/b/f"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Remove of a renamed file: %v", err)
	}
}

// TestMemFSCrash checks the documented crash semantics over many seeds.
func TestMemFSCrash(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		fs := NewMemFS()
		fs.MkdirAll("/d")
		durable, _ := fs.Create("/d/durable")
		durable.Write([]byte("synced"))
		durable.Sync()
		durable.Write([]byte("-unsynced-tail"))
		fs.SyncDir("/d")
		fresh, _ := fs.Create("/d/fresh") // entry never made durable
		fresh.Write([]byte("x"))
		fresh.Sync()

		a := fs.Crash(rand.New(rand.NewPCG(seed, 1)))
		b := fs.Crash(rand.New(rand.NewPCG(seed, 1)))
		if a.String() != b.String() {
			t.Fatalf("seed %d: Crash not deterministic:\n%s\n%s", seed, a, b)
		}
		got, err := a.ReadFile("/d/durable")
		if err != nil || len(got) < 6 || string(got[:6]) != "synced" || len(got) > 20 {
			t.Fatalf("seed %d: durable file after crash: %q, %v", seed, got, err)
		}
		if !bytes.HasPrefix([]byte("synced-unsynced-tail"), got[:max(6, len(got)-8)]) {
			t.Fatalf("seed %d: kept bytes are not a prefix (beyond the garbled end): %q", seed, got)
		}
		// The original keeps running.
		if cur, _ := fs.ReadFile("/d/durable"); string(cur) != "synced-unsynced-tail" {
			t.Fatalf("Crash changed the original: %q", cur)
		}
	}
	// An unsynced directory entry is sometimes kept, sometimes lost.
	kept := 0
	for seed := uint64(0); seed < 100; seed++ {
		fs := NewMemFS()
		fs.MkdirAll("/d")
		f, _ := fs.Create("/d/f")
		f.Sync()
		if _, err := fs.Crash(rand.New(rand.NewPCG(seed, 2))).ReadFile("/d/f"); err == nil {
			kept++
		}
		fs.SyncDir("/d")
		if _, err := fs.Crash(rand.New(rand.NewPCG(seed, 2))).ReadFile("/d/f"); err != nil {
			t.Fatalf("entry lost after SyncDir: %v", err)
		}
		fs.Remove("/d/f")
		fs.SyncDir("/d")
		if _, err := fs.Crash(rand.New(rand.NewPCG(seed, 2))).ReadFile("/d/f"); err == nil {
			t.Fatalf("removed entry came back after SyncDir")
		}
	}
	if kept == 0 || kept == 100 {
		t.Fatalf("unsynced entry kept in %d of 100 crashes", kept)
	}
}

func TestOpString(t *testing.T) {
	want := []string{"create", "open", "write", "sync", "truncate", "rename", "remove", "list", "mkdirall", "syncdir", "allocate"}
	for i, w := range want {
		if got := Op(i + 1).String(); got != w {
			t.Errorf("Op(%d) = %q, want %q", i+1, got, w)
		}
	}
	if got := Op(0).String(); got != "Op(0)" {
		t.Errorf("Op(0) = %q", got)
	}
	if got := (OpAllocate + 1).String(); got != "Op(12)" {
		t.Errorf("Op(12) = %q", got)
	}
}

// TestMemFSInjector: every operation consults the injector first; a failed
// one is a *os.PathError wrapping the injected error and has no effect.
func TestMemFSInjector(t *testing.T) {
	boom := errors.New("injected")
	fs := NewMemFS()
	fs.MkdirAll("/d")
	f, _ := fs.Create("/d/f")
	f.Write([]byte("durable"))
	f.Sync()
	fs.SyncDir("/d")

	var seen []string
	failing := Op(0)
	fs.SetInjector(func(op Op, name string) error {
		seen = append(seen, op.String()+" "+name)
		if op == failing {
			return boom
		}
		return nil
	})
	fail := func(op Op, call func() error, unchanged func() bool) {
		t.Helper()
		failing = op
		seen = nil
		err := call()
		var pe *os.PathError
		if !errors.Is(err, boom) || !errors.As(err, &pe) || pe.Op != op.String() {
			t.Errorf("%v: err %v, want a *os.PathError wrapping the injected error", op, err)
		}
		if len(seen) != 1 || !strings.HasPrefix(seen[0], op.String()+" ") {
			t.Errorf("%v: injector saw %v", op, seen)
		}
		if !unchanged() {
			t.Errorf("%v: the failed operation had an effect", op)
		}
	}
	content := func(want string) func() bool {
		return func() bool { b, _ := fs.ReadFile("/d/f"); return string(b) == want }
	}
	fail(OpCreate, func() error { _, err := fs.Create("/d/g"); return err },
		func() bool { _, err := fs.ReadFile("/d/g"); return err != nil })
	fail(OpOpen, func() error { _, err := fs.Open("/d/f"); return err }, content("durable"))
	fail(OpOpen, func() error { _, err := fs.OpenAppend("/d/f"); return err }, content("durable"))
	fail(OpWrite, func() error { _, err := f.Write([]byte("more")); return err }, content("durable"))
	fail(OpTruncate, func() error { return f.Truncate(2) }, content("durable"))
	fail(OpRename, func() error { return fs.Rename("/d/f", "/d/h") }, content("durable"))
	if seen[0] != "rename /d/f" {
		t.Errorf("Rename reported %q, want the old name", seen[0])
	}
	fail(OpRemove, func() error { return fs.Remove("/d/f") }, content("durable"))
	fail(OpList, func() error { _, err := fs.List("/d"); return err }, content("durable"))
	fail(OpMkdirAll, func() error { return fs.MkdirAll("/d/sub") },
		func() bool { _, err := fs.List("/d/sub"); return err != nil })
	g, _ := fs.Create("/d/g")
	fail(OpSyncDir, func() error { return fs.SyncDir("/d") }, func() bool {
		// The new entry is still not durable: some crash loses it.
		for seed := range uint64(50) {
			if _, err := fs.Crash(rand.New(rand.NewPCG(seed, 1))).ReadFile("/d/g"); err != nil {
				return true
			}
		}
		return false
	})
	g.Close()
	fail(OpSync, func() error { return f.Sync() }, content("durable"))

	// A file renamed while open is reported under its new name.
	failing = 0
	h, _ := fs.Create("/d/tmp")
	fs.Rename("/d/tmp", "/d/final")
	seen = nil
	h.Write([]byte("x"))
	h.Sync()
	if !slices.Equal(seen, []string{"write /d/final", "sync /d/final"}) {
		t.Errorf("operations on a renamed file reported as %v", seen)
	}

	// A nil injector removes it; Kill and Crash images have none.
	failing = OpWrite
	k, c := fs.Kill(), fs.Crash(rand.New(rand.NewPCG(1, 1)))
	for _, other := range []*MemFS{k, c} {
		h, err := other.OpenAppend("/d/f")
		if err == nil {
			_, err = h.Write([]byte("!"))
		}
		if err != nil {
			t.Errorf("image of a MemFS with an injector: %v", err)
		}
	}
	fs.SetInjector(nil)
	if _, err := f.Write([]byte("!")); err != nil {
		t.Errorf("Write without an injector: %v", err)
	}
}

// TestMemFSFailedSync: a failed Sync loses the bytes written since the last
// successful one: they read back, a later Sync does not make them durable,
// and no crash keeps them.
func TestMemFSFailedSync(t *testing.T) {
	boom := errors.New("EIO")
	setup := func() (*MemFS, File) {
		fs := NewMemFS()
		fs.MkdirAll("/d")
		f, _ := fs.Create("/d/f")
		fs.SyncDir("/d")
		f.Write([]byte("AAAA"))
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("BB"))
		f.Write([]byte("BB"))
		fs.SetInjector(func(op Op, _ string) error {
			if op == OpSync {
				return boom
			}
			return nil
		})
		if err := f.Sync(); !errors.Is(err, boom) {
			t.Fatalf("Sync: %v", err)
		}
		fs.SetInjector(nil)
		return fs, f
	}
	read := func(fs *MemFS) string { b, _ := fs.ReadFile("/d/f"); return string(b) }

	// Lost bytes read back, and no crash keeps them.
	fs, f := setup()
	if got := read(fs); got != "AAAABBBB" {
		t.Fatalf("after the failed sync: %q", got)
	}
	if !strings.Contains(fs.String(), "4 lost") {
		t.Errorf("String() = %q", fs.String())
	}
	for seed := range uint64(100) {
		got := read(fs.Crash(rand.New(rand.NewPCG(seed, 7))))
		if !strings.HasPrefix(got, "AAAA") || strings.Contains(got, "B") || len(got) > 8 {
			t.Fatalf("seed %d: crash kept %q", seed, got)
		}
	}

	// A later write into the same page dirties the page again, lost
	// bytes and all (the kernel writes back whole pages): a successful
	// Sync makes all of it durable, and a crash before keeps the page
	// whole or not at all. (Before, the lost bytes stayed lost beside the
	// new ones: a WAL record zeroed and the next one intact in one page,
	// which Linux cannot leave.)
	f.Write([]byte("CCCC"))
	for seed := range uint64(100) {
		got := read(fs.Crash(rand.New(rand.NewPCG(seed, 7))))
		if strings.Contains(got, "C") && !strings.HasPrefix(got, "AAAABBBBC") {
			t.Fatalf("seed %d: crash kept the later write without the lost bytes of its page: %q", seed, got)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := read(fs); got != "AAAABBBBCCCC" {
		t.Fatalf("reads %q", got)
	}
	for seed := range uint64(20) {
		if got := read(fs.Crash(rand.New(rand.NewPCG(seed, 7)))); got != "AAAABBBBCCCC" {
			t.Fatalf("seed %d: crash after the later sync kept %q", seed, got)
		}
	}

	// A later write into another page leaves the lost bytes lost: a
	// successful Sync makes it durable, and zeros where they were.
	fs2 := NewMemFS()
	fs2.MkdirAll("/d")
	g, _ := fs2.Create("/d/f")
	fs2.SyncDir("/d")
	g.Write(bytes.Repeat([]byte("a"), memPage-4))
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("LOST")) // the end of page 0
	fs2.SetInjector(func(op Op, _ string) error {
		if op == OpSync {
			return boom
		}
		return nil
	})
	if err := g.Sync(); !errors.Is(err, boom) {
		t.Fatalf("Sync: %v", err)
	}
	fs2.SetInjector(nil)
	g.Write([]byte("NEXT")) // page 1 alone
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(20) {
		got, _ := fs2.Crash(rand.New(rand.NewPCG(seed, 7))).ReadFile("/d/f")
		if string(got[memPage-4:]) != "\x00\x00\x00\x00NEXT" {
			t.Fatalf("seed %d: crash kept %q at the page boundary, want the lost bytes zero and NEXT", seed, got[memPage-4:])
		}
	}

	// Truncate clips the lost range; a write into its page makes what is
	// left of it ordinary bytes again.
	fs, f = setup()
	f.Truncate(6) // lost: [4, 6)
	if !strings.Contains(fs.String(), "2 lost") {
		t.Errorf("after Truncate(6): String() = %q, want 2 lost", fs.String())
	}
	f.Write([]byte("DD")) // page 0: [4, 6) dirty again
	f.Sync()
	if got := read(fs.Crash(rand.New(rand.NewPCG(1, 1)))); got != "AAAABBDD" {
		t.Fatalf("after Truncate(6): crash kept %q", got)
	}
	f.Truncate(5)
	f.Write([]byte("E"))
	f.Truncate(3) // lost: none
	f.Write([]byte("FF"))
	f.Truncate(7) // extends with dirty zeros
	f.Sync()
	if got := read(fs.Crash(rand.New(rand.NewPCG(1, 1)))); got != "AAAFF\x00\x00" {
		t.Fatalf("after overwriting the lost bytes: crash kept %q", got)
	}
	if strings.Contains(fs.String(), "lost") {
		t.Errorf("String() = %q", fs.String())
	}
}

// TestMemFSKill: Kill keeps the page cache (current contents, every entry)
// and what is durable or lost, and is disconnected from m.
func TestMemFSKill(t *testing.T) {
	fs := NewMemFS()
	fs.MkdirAll("/d")
	f, _ := fs.Create("/d/f")
	f.Write([]byte("AAAA"))
	f.Sync()
	fs.SyncDir("/d")
	f.Write([]byte("BBBB"))
	fs.SetInjector(func(op Op, _ string) error {
		if op == OpSync {
			return errors.New("EIO")
		}
		return nil
	})
	f.Sync()
	fs.SetInjector(nil)
	f.Write([]byte("CC")) // dirty
	g, _ := fs.Create("/d/g")
	g.Write([]byte("never synced"))

	k := fs.Kill()
	if k.String() != fs.String() {
		t.Fatalf("Kill changed the state:\n%s\n%s", fs, k)
	}
	for seed := range uint64(50) {
		a := fs.Crash(rand.New(rand.NewPCG(seed, 9)))
		b := k.Crash(rand.New(rand.NewPCG(seed, 9)))
		if a.String() != b.String() {
			t.Fatalf("seed %d: crashes of m and of Kill differ:\n%s\n%s", seed, a, b)
		}
		fa, _ := a.ReadFile("/d/f")
		fb, _ := b.ReadFile("/d/f")
		if !bytes.Equal(fa, fb) {
			t.Fatalf("seed %d: %q vs %q", seed, fa, fb)
		}
	}
	if got, _ := k.ReadFile("/d/f"); string(got) != "AAAABBBBCC" {
		t.Fatalf("killed: %q", got)
	}
	if got, _ := k.ReadFile("/d/g"); string(got) != "never synced" {
		t.Fatalf("killed: %q", got)
	}
	// Writes through files of the dead process do not reach the image.
	f.Write([]byte("late"))
	if got, _ := k.ReadFile("/d/f"); string(got) != "AAAABBBBCC" {
		t.Fatalf("a write after Kill reached the image: %q", got)
	}
	// The new process syncs the file successfully: the rest becomes
	// durable, and so do the lost bytes, whose page CC dirtied again.
	h, _ := k.OpenAppend("/d/f")
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	k.SyncDir("/d")
	// (CC, written after the failure into the lost bytes' page, dirtied
	// the page again: the lost bytes reach the disk with it.)
	for seed := range uint64(20) {
		if got, _ := k.Crash(rand.New(rand.NewPCG(seed, 9))).ReadFile("/d/f"); string(got) != "AAAABBBBCC" {
			t.Fatalf("seed %d: crash after the new process synced: %q", seed, got)
		}
	}
}

// TestSpans cross-checks spans against a set of bytes, with random
// operations; rerun a failure from its printed seed.
func TestSpans(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var s, u spans
		ref, refU := map[int64]bool{}, map[int64]bool{}
		for step := range 30 {
			lo := rng.Int64N(64)
			hi := lo + rng.Int64N(16)
			switch rng.IntN(3) {
			case 0:
				s = s.add(lo, hi)
				for i := lo; i < hi; i++ {
					ref[i] = true
				}
			case 1:
				s = s.remove(lo, hi)
				for i := lo; i < hi; i++ {
					delete(ref, i)
				}
			default:
				u = u.add(lo, hi)
				for i := lo; i < hi; i++ {
					refU[i] = true
				}
			}
			for i, x := range s {
				if x.lo >= x.hi || i > 0 && s[i-1].hi >= x.lo {
					t.Fatalf("seed %d step %d: not normalized: %v", seed, step, s)
				}
			}
			for i := int64(0); i < 96; i++ {
				in := slices.ContainsFunc(s, func(x span) bool { return x.lo <= i && i < x.hi })
				if in != ref[i] {
					t.Fatalf("seed %d step %d: byte %d: %v, want %v (%v)", seed, step, i, in, ref[i], s)
				}
			}
			if s.size() != int64(len(ref)) {
				t.Fatalf("seed %d: size %d, want %d", seed, s.size(), len(ref))
			}
		}
		all := s.union(u)
		for i := int64(0); i < 96; i++ {
			in := slices.ContainsFunc(all, func(x span) bool { return x.lo <= i && i < x.hi })
			if in != (ref[i] || refU[i]) {
				t.Fatalf("seed %d: union: byte %d", seed, i)
			}
		}
	}
}
