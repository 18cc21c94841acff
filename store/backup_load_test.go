package store

import (
	"fmt"
	"iter"
	"path/filepath"
	"testing"
)

// TestBackupDuringLoadIsIncomplete checks Backup's "A Load that has not
// ended when Backup copies the catalog is incomplete in the copy", for
// the three kinds with Load, at a size under one of Load's batches (4096
// keys) and at one of many batches (skipped under -short). The fault is
// a Load stopped half way: its key source blocks (holding no lock of the
// store) while Backup runs. The copy must list the filter as
// "incomplete", and answer "maybe", never "absent", for every key of the
// Load (a cuckoo keeps the keys it held before); the source's Load then
// ends with every key; the copy's other filter is whole and Check of the
// copy finds no problem.
func TestBackupDuringLoadIsIncomplete(t *testing.T) {
	sizes := []int{3000, 200_000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, kind := range []string{"bloom", "cuckoo", "counting"} {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				src := filepath.Join(t.TempDir(), "src")
				dst := filepath.Join(t.TempDir(), "dst")
				s := mustOpen(t, src, nil)
				defer s.Close()
				other, err := s.CreateBloom("other", BloomConfig{Capacity: 1000})
				must(t, err)
				otherKeys := make([][]byte, 500)
				for i := range otherKeys {
					otherKeys[i] = key(i)
				}
				must(t, second(other.AddMany(otherKeys)))
				var load func(iter.Seq2[[]byte, error]) error
				var has func([]byte) bool
				switch kind {
				case "bloom":
					f, err := s.CreateBloom("x", BloomConfig{Capacity: uint64(n), NonScaling: true})
					must(t, err)
					load, has = func(k iter.Seq2[[]byte, error]) error { return f.Load(k) }, f.Has
				case "cuckoo":
					f, err := s.CreateCuckoo("x", CuckooConfig{Capacity: uint64(2 * n)})
					must(t, err)
					for i := range 100 { // items before the Load: it moves them
						must(t, f.Add([]byte(fmt.Sprint("pre", i))))
					}
					load, has = func(k iter.Seq2[[]byte, error]) error { return f.Load(k) }, f.Has
				case "counting":
					f, err := s.CreateCounting("x", BloomConfig{Capacity: uint64(n)})
					must(t, err)
					load, has = func(k iter.Seq2[[]byte, error]) error { return f.Load(k) }, f.Has
				}
				half, resume := make(chan struct{}), make(chan struct{})
				done := make(chan error, 1)
				go func() {
					done <- load(Keys(func(yield func([]byte) bool) {
						for i := range n {
							if i == n/2 {
								close(half)
								<-resume
							}
							if !yield(key(i)) {
								return
							}
						}
					}))
				}()
				select {
				case <-half:
				case err := <-done:
					t.Fatalf("the Load ended before its source reached the half way key: %v", err)
				}
				berr := s.Backup(dst)
				close(resume)
				must(t, <-done)
				must(t, berr)
				for i := range n {
					if !has(key(i)) {
						t.Fatalf("source lost loaded key %d", i)
					}
				}
				cp, err := Open(dst, nil)
				must(t, err)
				defer cp.Close()
				in, err := cp.List()
				must(t, err)
				for _, f := range in {
					if f.Name == "x" && f.State != "incomplete" {
						t.Errorf("copy: the filter whose Load was half way is %q", f.State)
					}
					if f.Name == "other" && f.State != "ok" {
						t.Errorf("copy: other is %q", f.State)
					}
				}
				var cpHas func([]byte) bool
				switch kind {
				case "bloom":
					f, err := cp.Bloom("x")
					must(t, err)
					cpHas = f.Has
				case "cuckoo":
					f, err := cp.Cuckoo("x")
					must(t, err)
					cpHas = f.Has
					for i := range 100 {
						if !f.Has([]byte(fmt.Sprint("pre", i))) {
							t.Fatalf("copy lost pre-Load key pre%d", i)
						}
					}
				case "counting":
					f, err := cp.Counting("x")
					must(t, err)
					cpHas = f.Has
				}
				absent := 0
				for i := range n {
					if !cpHas(key(i)) {
						absent++
					}
				}
				if absent > 0 {
					t.Errorf("copy answers absent for %d of %d keys of the Load", absent, n)
				}
				co, err := cp.Bloom("other")
				must(t, err)
				for i := range 500 {
					if !co.Has(key(i)) {
						t.Fatalf("copy lost other's key %d", i)
					}
				}
				if rep, err := cp.Check(); err != nil {
					t.Errorf("check of the copy: %v %+v", err, rep)
				}
			})
		}
	}
}
