package store

import (
	"errors"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/fdlimit"
)

// TestCatalogOutOfDescriptorsFailsOnlyTheCall: a checkpoint whose catalog
// open finds no file descriptor left (EMFILE) wrote nothing: it fails
// with EMFILE and the store goes on, as after a catalog lock held too
// long; once descriptors are free the same calls succeed. Before, it
// failed the store (every later change ErrFailed until a reopen), though
// nothing was written (an adversarial helper's run with RLIMIT_NOFILE at
// 10-16). The limit is the test process's own, lowered for the one call.
func TestCatalogOutOfDescriptorsFailsOnlyTheCall(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: -1})
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, second(b.Add(key(1))))

	restore := fdlimit.Leave(t, 0)
	ckptErr := s.Checkpoint()
	restore()

	if !errors.Is(ckptErr, syscall.EMFILE) {
		t.Fatalf("Checkpoint with no descriptor left: %v, want EMFILE", ckptErr)
	}
	if errors.Is(ckptErr, ErrFailed) {
		t.Fatalf("Checkpoint with no descriptor left failed the store: %v", ckptErr)
	}
	must(t, s.Checkpoint())
	must(t, second(b.Add(key(2))))
	if !b.Has(key(1)) || !b.Has(key(2)) {
		t.Fatal("a key is absent")
	}
}
