//go:build filterstore_testhooks

package store

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"syscall"
	"testing"
)

func keySeq(from, to int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for i := from; i < to; i++ {
			if !yield(key(i), nil) {
				return
			}
		}
	}
}

// Every catalog write failing with EIO or ENOSPC, landed or not, then
// Close (or a crash) and reopen: Open must succeed and every key whose
// add returned nil must be there.
func TestLandedCatalogFaults(t *testing.T) {
	type op struct {
		name, hook string
		run        func(s *Store) error
	}
	var export []byte
	ops := []op{
		{"create", "(*Store).create", func(s *Store) error { return second(s.CreateBloom("p", BloomConfig{Capacity: 100})) }},
		{"addLayer", "(*filterBase).addLayer", func(s *Store) error {
			g, err := s.Bloom("g")
			if err != nil {
				return err
			}
			for i := 100; i < 200; i++ {
				if _, err := g.Add(key(i)); err != nil {
					return err
				}
			}
			return nil
		}},
		{"reserveID", "(*Store).reserveID", func(s *Store) error { return s.Import("q", bytes.NewReader(export)) }},
		{"commitImport", "(*Store).commitImport", func(s *Store) error { return s.Import("q", bytes.NewReader(export)) }},
		{"checkpoint", "checkpointLocked", func(s *Store) error { return s.Checkpoint() }},
		{"close", "checkpointLocked", func(s *Store) error { return s.Close() }},
		{"rename", "(*Store).rename", func(s *Store) error { return s.Rename("a", "z") }},
		{"rename-over", "(*Store).rename", func(s *Store) error { return s.Rename("d", "a") }},
		{"drop", "(*Store).Drop", func(s *Store) error { return s.Drop("d") }},
		{"load-start", "(*filterBase).start", func(s *Store) error {
			l, err := s.Bloom("l")
			if err != nil {
				return err
			}
			return l.Load(keySeq(0, 500))
		}},
		{"load-end", "checkpointLocked", func(s *Store) error {
			l, err := s.Bloom("l")
			if err != nil {
				return err
			}
			return l.Load(keySeq(0, 500))
		}},
	}
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		for _, landed := range []bool{true, false} {
			for _, o := range ops {
				for _, crash := range []bool{false, true} {
					name := fmt.Sprintf("%v/%s/%s/crash=%v", errno, landedName(landed), o.name, crash)
					t.Run(name, func(t *testing.T) {
						dir := t.TempDir()
						s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
						a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
						must(t, err)
						d, err := s.CreateBloom("d", BloomConfig{Capacity: 1000})
						must(t, err)
						g, err := s.CreateBloom("g", BloomConfig{Capacity: 100})
						must(t, err)
						must(t, second(s.CreateBloom("l", BloomConfig{Capacity: 1000})))
						for i := range 100 {
							must(t, second(a.Add(key(i))))
							must(t, second(d.Add(key(1000+i))))
							must(t, second(g.Add(key(i))))
						}
						must(t, s.Checkpoint())
						for i := 100; i < 150; i++ {
							must(t, second(a.Add(key(i))))
						}
						var buf bytes.Buffer
						must(t, second(a.WriteTo(&buf)))
						export = buf.Bytes()
						f := armCatalogFault(t, dir, o.hook, 1, errno, landed)
						opErr := o.run(s)
						f.disarm()
						f.mustHaveFired(t)
						if opErr == nil {
							t.Fatalf("%s returned nil with the catalog failing", o.name)
						}
						// Whatever the store still acknowledges.
						extra := 0
						if s.failed() == nil && o.name != "close" {
							for i := 150; i < 200; i++ {
								if _, err := a.Add(key(i)); err != nil && o.name != "rename" {
									t.Fatalf("add after %s: %v", o.name, err)
								}
							}
							extra = 50
						}
						if o.name != "close" {
							if crash {
								s.abandonForTest()
							} else {
								s.Close()
							}
						}
						s, err = Open(dir, nil)
						if err != nil {
							t.Fatalf("reopen after %s (%v): %v", o.name, opErr, err)
						}
						defer s.Close()
						aName := "a"
						if _, err := s.Bloom("a"); errors.Is(err, ErrNotFound) && o.name == "rename" {
							aName = "z"
						}
						a, err = s.Bloom(aName)
						must(t, err)
						if o.name == "rename-over" {
							// a is d's data if the rename landed.
							if in := mustInfo(t, a); in.Items < 150 {
								return
							}
						}
						for i := range 150 + extra {
							if !a.Has(key(i)) {
								t.Fatalf("a: acknowledged key %d absent", i)
							}
						}
						if h, err := s.Bloom("d"); err == nil {
							for i := range 100 {
								if !h.Has(key(1000 + i)) {
									t.Fatalf("d: acknowledged key %d absent", 1000+i)
								}
							}
						}
						g, err = s.Bloom("g")
						must(t, err)
						for i := range 100 {
							if !g.Has(key(i)) {
								t.Fatalf("g: acknowledged key %d absent", i)
							}
						}
						for _, n := range []string{"p", "q", "l", "z", "x"} {
							if h, err := s.Bloom(n); err == nil {
								_ = h.Has(key(1))
							}
						}
						for _, in := range must2(t, s.List) {
							if in.State == "broken" {
								t.Fatalf("filter %s broken after reopen: %s", in.Name, in.Reason)
							}
						}
						must(t, second(s.CreateBloom("new", BloomConfig{Capacity: 100})))
					})
				}
			}
		}
	}
}

func must2[T any](t *testing.T, f func() (T, error)) T {
	t.Helper()
	v, err := f()
	must(t, err)
	return v
}
