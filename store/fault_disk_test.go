package store

// Issue #9 F: a full disk fails the operation that needs space with ENOSPC
// and leaves nothing half-made; no write through a mapping can die of it;
// every directory Open creates is durable.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
	"golang.org/x/sys/unix"
)

// smallFS mounts a tmpfs of size bytes for the test, or skips the test
// where mounting is not permitted.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v): the Sim-based TestCreateWithoutSpace covers the store's side", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestFullDisk: on a file system too small for a filter, creating it fails
// with ENOSPC and leaves no catalog entry and no file; a filter that fits
// can be written in full (its blocks are allocated at creation, so no page
// fault of the mapping can need space, which would be a SIGBUS); growing a
// layer on the full disk fails the add with ENOSPC.
func TestFullDisk(t *testing.T) {
	dir := filepath.Join(smallFS(t, "2m"), "store")
	s := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, CheckpointBytes: 64 << 10})
	_, err := s.CreateBloom("huge", BloomConfig{Capacity: 4_000_000, NonScaling: true})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("creating a filter larger than the disk: %v, want ENOSPC", err)
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("the failed create left %v in the catalog", l)
	}
	if names, _ := os.ReadDir(filepath.Join(dir, filtersDir)); len(names) != 0 {
		t.Fatalf("the failed create left files: %v", names)
	}
	m, err := s.CreateBitmap("fits", 8<<20) // 1 MiB of data
	must(t, err)
	for off := uint64(0); off < 8<<20; off += 64 * 512 { // a bit per page
		if _, err := m.Set(off); err != nil {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
				break // the WAL filled the rest of the disk: refused, not a crash
			}
			t.Fatal(err)
		}
	}
	b, err := s.CreateBloom("grows", BloomConfig{Capacity: 20_000})
	if err == nil {
		batch := make([][]byte, 1000)
		for i := 0; err == nil; i++ {
			for j := range batch {
				batch[j] = key(i*len(batch) + j)
			}
			_, err = b.AddMany(batch)
		}
		if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrFailed) {
			t.Fatalf("growing on a full disk: %v, want ENOSPC", err)
		}
	} else if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create on the full disk: %v", err)
	}
	s.Close()
	// Recovery writes (a checkpoint): the operator makes room first.
	must(t, unix.Mount("none", filepath.Dir(dir), "tmpfs", unix.MS_REMOUNT, "size=16m"))
	s = mustOpen(t, dir, nil)
	defer s.Close()
	if _, err := s.Bloom("huge"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after reopening: %v, want ErrNotFound for the filter that did not fit", err)
	}
}

// TestCreateWithoutSpace: a Create or a new layer whose file cannot be
// allocated fails the call with the error, leaves the catalog unchanged,
// and does not fail the store.
func TestCreateWithoutSpace(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	fail := &failSwitch{err: syscall.ENOSPC}
	w.sim.SetInjector(fail.sim(mmapbits.OpCreate))
	s, err := w.open(t)
	must(t, err)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 10})
	must(t, err)
	fail.on.Store(true)
	if _, err := s.CreateCuckoo("c", CuckooConfig{}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create without space: %v", err)
	}
	var addErr error
	for i := 0; i < 100 && addErr == nil; i++ {
		_, addErr = b.Add(key(i))
	}
	if !errors.Is(addErr, syscall.ENOSPC) {
		t.Fatalf("growing a layer without space: %v", addErr)
	}
	fail.on.Store(false)
	if _, err := s.Cuckoo("c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the failed create left a filter: %v", err)
	}
	must(t, second(s.CreateCuckoo("c", CuckooConfig{})))
	for i := 0; i < 100; i++ {
		must(t, second(b.Add(key(i))))
	}
	must(t, s.Checkpoint())
}

// TestOpenMakesDirectoriesDurable: every directory Open creates is made
// durable (its parent synced) before Open returns.
func TestOpenMakesDirectoriesDurable(t *testing.T) {
	var synced []string
	syncDirFn = func(dir string) error {
		synced = append(synced, dir)
		return syncDir(dir)
	}
	defer func() { syncDirFn = syncDir }()
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b", "store")
	s := mustOpen(t, dir, nil)
	defer s.Close()
	for _, want := range []string{base, filepath.Join(base, "a"), filepath.Join(base, "a", "b"), dir} {
		if !slices.Contains(synced, want) {
			t.Errorf("%s was not synced after creating its subdirectory (synced: %v)", want, synced)
		}
	}
}
