package store

// Issue #9 F: a full disk fails the operation that needs space with ENOSPC
// and leaves nothing half-made; no write through a mapping can die of it;
// every directory Open creates is durable.

import (
	"errors"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
)

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
