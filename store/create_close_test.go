package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
)

// TestCreateImportBesideClose: creates and imports racing Close
// either succeed (and the filter is there after a reopen, with its bit)
// or fail with ErrClosed; no file of a failed one is left after the
// reopen, and the catalog names exactly the filters acknowledged.
func TestCreateImportBesideClose(t *testing.T) {
	for round := range 10 {
		dir := t.TempDir()
		s := mustOpen(t, dir, &Options{CheckpointEvery: time.Millisecond})
		src, err := s.CreateBitmap("src", 256)
		must(t, err)
		var buf bytes.Buffer
		must(t, second(src.WriteTo(&buf)))
		stream := buf.Bytes()
		var mu sync.Mutex
		made := map[string]uint64{"src": src.base().id}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					name := fmt.Sprintf("f-%d-%d", g, i)
					var err error
					var id uint64 // 0: an import's, unknown
					if (g+i)%2 == 0 {
						err = s.Import(name, bytes.NewReader(stream))
					} else {
						var bm *Bitmap
						if bm, err = s.CreateBitmap(name, 256); err == nil {
							id = bm.base().id
						}
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					mu.Lock()
					made[name] = id
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(20+round*7) * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		s = mustOpen(t, dir, &Options{CheckpointEvery: -1})
		got := reviewIDs(s)
		if len(got) != len(made) {
			t.Fatalf("round %d: reopened %d filters, acknowledged %d", round, len(got), len(made))
		}
		for n, id := range made {
			if g, ok := got[n]; !ok || id != 0 && g != id {
				t.Fatalf("round %d: %s: id %d (%v), want %d", round, n, g, ok, id)
			}
		}
		ids := map[string]bool{}
		for _, id := range got {
			ids[filepath.Base(format.LayerPath(dir, id, 0))] = true
		}
		ents, err := os.ReadDir(filepath.Join(dir, format.FiltersName))
		must(t, err)
		for _, e := range ents {
			if !ids[e.Name()] {
				t.Errorf("round %d: file %s left", round, e.Name())
			}
		}
		must(t, s.Close())
	}
}

// TestSkipIDBesideCreates: files in the way of the next ids while
// creates and imports run at once: each skips them, no id is given twice,
// and after a reopen every filter is there under its id.
func TestSkipIDBesideCreates(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: time.Millisecond})
	src, err := s.CreateBitmap("src", 256)
	must(t, err)
	var buf bytes.Buffer
	must(t, second(src.WriteTo(&buf)))
	stream := buf.Bytes()
	next := s.nextIDNow()
	for id := next; id < next+40; id += 3 {
		must(t, os.Mkdir(format.LayerPath(dir, id, 0), 0o755))
	}
	var mu sync.Mutex
	names := map[string]bool{"src": true}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				name := fmt.Sprintf("f-%d-%d", g, i)
				var err error
				if g%2 == 0 {
					err = s.Import(name, bytes.NewReader(stream))
				} else {
					_, err = s.CreateBitmap(name, 256)
				}
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				names[name] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := reviewMapConsistent(s); err != nil {
		t.Fatal(err)
	}
	before := reviewIDs(s)
	seen := map[uint64]string{}
	for n, id := range before {
		if o, ok := seen[id]; ok {
			t.Fatalf("id %d: %s and %s", id, o, n)
		}
		if fi, err := os.Stat(format.LayerPath(dir, id, 0)); err != nil || fi.IsDir() {
			t.Fatalf("%s id %d: %v", n, id, err)
		}
		seen[id] = n
	}
	must(t, s.Close())
	s = mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer s.Close()
	if fmt.Sprint(reviewIDs(s)) != fmt.Sprint(before) || len(before) != len(names) {
		t.Fatalf("before %v after %v (%d acknowledged)", before, reviewIDs(s), len(names))
	}
}
