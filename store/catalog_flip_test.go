package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// TestCatalogFlipRefusedNotRemoved: a flipped bit in catalog.db that
// bbolt reads as other well-formed content (a filter's name changed, or a
// leaf's element count lowered so that a filter's entry vanishes) fails
// Open with ErrCorrupt, writer and read-only alike, and leaves every file
// as it was; with the catalog put back, every key reads present. Before
// the catalog's content checksum (format 3), the writer's Open succeeded:
// the renamed filter opened under the other name ("tsers"), and the
// vanished one's files were removed as a dropped filter's orphans, for
// good (an adversarial review's runs).
func TestCatalogFlipRefusedNotRemoved(t *testing.T) {
	flips := map[string]func(t *testing.T, b []byte) int{
		"a filter's name": func(t *testing.T, b []byte) int {
			n := 0
			for i := 0; ; i++ {
				j := bytes.Index(b[i:], []byte("users"))
				if j < 0 {
					return n
				}
				i += j
				b[i] ^= 1 // 'u' -> 't': "tsers" still sorts after "seen"
				n++
			}
		},
		"a leaf's element count": func(t *testing.T, b []byte) int {
			n := 0
			for off := 0; off+16 <= len(b); off += 4096 {
				p := b[off : off+4096]
				flags, count := binary.LittleEndian.Uint16(p[8:]), binary.LittleEndian.Uint16(p[10:])
				if flags == 0x02 && count > 1 && bytes.Contains(p, []byte("users")) { // a leaf holding the entry
					binary.LittleEndian.PutUint16(p[10:], count-1) // its last element, "users", is gone
					n++
				}
			}
			return n
		},
	}
	for what, flip := range flips {
		t.Run(what, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			seen, err := s.CreateCuckoo("seen", CuckooConfig{Capacity: 1000})
			must(t, err)
			users, err := s.CreateBloom("users", BloomConfig{Capacity: 1000})
			must(t, err)
			for i := range 200 {
				must(t, second(users.Add(fmt.Appendf(nil, "user-%d", i))))
				must(t, seen.Add(fmt.Appendf(nil, "seen-%d", i)))
			}
			// Enough filters that the filters bucket has a leaf page of
			// its own, not one inline in the root's (as a few do).
			for i := range 12 {
				must(t, second(s.CreateBitmap(fmt.Sprintf("a%02d", i), 64)))
			}
			must(t, s.Close())
			cat := filepath.Join(dir, format.CatalogName)
			orig, err := os.ReadFile(cat)
			must(t, err)
			b := bytes.Clone(orig)
			if flip(t, b) == 0 {
				t.Fatal("nothing to flip: the test no longer finds the catalog's entry")
			}
			must(t, os.WriteFile(cat, b, 0o644))
			before := dirFiles(t, dir)
			for _, opts := range []*Options{{ReadOnly: true}, nil} {
				if s, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
					if err == nil {
						names := []string{}
						for _, in := range mustList(t, s) {
							names = append(names, in.Name)
						}
						s.Close()
						t.Fatalf("Open (read-only %v) of the flipped catalog succeeded, with filters %q; want ErrCorrupt", opts != nil, names)
					}
					t.Fatalf("Open (read-only %v) of the flipped catalog: %v, want ErrCorrupt", opts != nil, err)
				} else {
					t.Logf("Open (read-only %v): %v", opts != nil, err)
				}
			}
			after := dirFiles(t, dir)
			for name, data := range before {
				if name == format.LockName {
					continue
				}
				if got, ok := after[name]; !ok || !bytes.Equal(got, data) {
					t.Errorf("%s changed or went (present after: %v)", name, ok)
				}
			}
			must(t, os.WriteFile(cat, orig, 0o644))
			s = mustOpen(t, dir, nil)
			defer s.Close()
			users, err = s.Bloom("users")
			must(t, err)
			seen, err = s.Cuckoo("seen")
			must(t, err)
			for i := range 200 {
				if !users.Has(fmt.Appendf(nil, "user-%d", i)) || !seen.Has(fmt.Appendf(nil, "seen-%d", i)) {
					t.Fatalf("key %d reads absent with the catalog put back", i)
				}
			}
		})
	}
}

// dirFiles reads every regular file under dir, by relative path.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	must(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return err
	}))
	return out
}

// mustList is s.List, failing the test on an error.
func mustList(t *testing.T, s *Store) []Info {
	t.Helper()
	l, err := s.List()
	must(t, err)
	return l
}
