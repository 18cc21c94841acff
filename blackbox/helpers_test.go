// Package blackbox_test holds black-box tests of filterstore written from its
// documentation alone (README.md, docs/, go doc, the Example functions and
// cmd/inspect's help). Each test checks one documented claim.
package blackbox_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/filterstore/filterstore/store"
)

func openStore(t *testing.T, dir string, opts *store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

// newStore opens a fresh store in a temp dir and closes it at cleanup.
func newStore(t *testing.T, opts *store.Options) (*store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := openStore(t, dir, opts)
	t.Cleanup(func() { s.Close() })
	storeDirs[s] = dir
	return s, dir
}

func keyN(prefix string, i int) []byte { return fmt.Appendf(nil, "%s-%d", prefix, i) }

func keys(prefix string, n int) [][]byte {
	ks := make([][]byte, n)
	for i := range ks {
		ks[i] = keyN(prefix, i)
	}
	return ks
}

func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var sprintf = fmt.Sprintf

// statSize sums the sizes of the regular files in dir.
func statSize(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// addToEach adds ks to a Bloom, a cuckoo and a counting filter, as most
// tests' setups do.
func addToEach(t *testing.T, ks [][]byte, b *store.Bloom, c *store.Cuckoo, n *store.Counting) {
	t.Helper()
	_, err := b.AddMany(ks)
	must(t, err)
	_, err = c.AddMany(ks)
	must(t, err)
	_, err = n.AddMany(ks)
	must(t, err)
}
