//go:build filterstore_testhooks

package catalog

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestEvictAfterFailedCommit: after a commit that failed once its
// transaction ran (an EIO from its sync, by AfterCommitHook), the next
// update first drops the catalog's pages from the page cache
// (evictFile), and only that one; an eviction that fails fails its
// update before anything is written (NotStarted), and the next update
// tries again. An update that failed before its commit (nothing written)
// evicts nothing. A failed commit's error names the catalog file.
func TestEvictAfterFailedCommit(t *testing.T) {
	c := New(t.TempDir())
	must(t, c.Create(1))
	var evicted []string
	var evictErr error
	was := evictFile
	evictFile = func(path string) error {
		evicted = append(evicted, path)
		if evictErr != nil {
			return evictErr
		}
		return was(path)
	}
	t.Cleanup(func() { evictFile = was; AfterCommitHook = nil })

	must(t, c.PutFilters(2, nil))
	if len(evicted) != 0 {
		t.Fatalf("evictions before any failed commit: %v", evicted)
	}
	AfterCommitHook = func(_ string, err error) error {
		if err == nil {
			return fmt.Errorf("injected: %w", syscall.EIO)
		}
		return err
	}
	if err := c.PutFilters(3, nil); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), c.Path) {
		t.Fatalf("PutFilters with its commit failing: %v, want EIO naming %s", err, c.Path)
	}
	AfterCommitHook = nil
	if len(evicted) != 0 {
		t.Fatalf("evictions during the failed commit: %v", evicted)
	}

	// The eviction itself fails: the update fails unstarted, and the
	// next one evicts again.
	evictErr = fmt.Errorf("injected: %w", syscall.EIO)
	err := c.PutFilters(4, nil)
	if !errors.Is(err, syscall.EIO) || !NotStarted(err) {
		t.Fatalf("PutFilters whose eviction fails: %v (not started: %v), want EIO before the transaction", err, NotStarted(err))
	}
	evictErr = nil
	must(t, c.PutFilters(4, nil))
	if len(evicted) != 2 || evicted[0] != c.Path || evicted[1] != c.Path {
		t.Fatalf("evictions after the failed commit: %v, want two of %s", evicted, c.Path)
	}
	must(t, c.PutFilters(5, nil))
	if len(evicted) != 2 {
		t.Fatalf("evictions after an update that succeeded: %v, want none more", evicted)
	}
	st, err := c.Load()
	must(t, err)
	if st.NextID != 5 {
		t.Fatalf("next id %d after the updates, want 5", st.NextID)
	}

	// An update that fails before its commit (here the owner check: the
	// catalog looks replaced) writes nothing: no eviction follows.
	bad := *st
	bad.StoreID++
	c.Own(&bad)
	if err := c.PutFilters(6, nil); err == nil {
		t.Fatal("PutFilters under another store's id succeeded")
	}
	c.Own(st)
	must(t, c.PutFilters(6, nil))
	if len(evicted) != 2 {
		t.Fatalf("evictions after an update that failed before its commit: %v, want none more", evicted)
	}
}
