package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
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
