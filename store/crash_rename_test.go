package store

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
)

// renameSeqs bounds the sequences of TestSimulatedCrashAroundRename per
// mode: each is short, and -crash.seed still picks any one.
const renameSeqs = 50

// TestSimulatedCrashAroundRename: the model's four filters are renamed,
// one after another, over four others (two of another kind), with random
// ops between; one Rename is cut short by a power loss or a process death
// either before its catalog commit (the commit fails: the catalog cannot
// be opened) or right after it (at the first removal of the replaced
// filter's files). The reopened store is the state before that Rename or
// after it, never a mix: every name gives the filter it gave then, and
// the replaced filter's files are gone. Nothing acknowledged is lost
// (the crash model), and no file is left that the catalog does not name.
func TestSimulatedCrashAroundRename(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			seeds := crashSeeds(t, testseed.Seed(t))
			for _, seed := range seeds[:min(len(seeds), renameSeqs)] {
				renameCrashSequence(t, mode, seed)
			}
		})
	}
}

// errKilled is what the injector returns where the process died.
var errKilled = errors.New("killed here")

func renameCrashSequence(t *testing.T, mode SyncMode, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	w := newSimWorld(t, mode)
	s, err := w.open(t)
	must(t, err)
	createSimFilters(t, s)
	// The names the model's filters are renamed to; N and M are filters
	// of other kinds.
	b, err := s.CreateBloom("B", BloomConfig{Capacity: 50})
	must(t, err)
	must(t, second(b.Add([]byte("replaced"))))
	c, err := s.CreateCuckoo("C", CuckooConfig{Capacity: 64})
	must(t, err)
	must(t, c.Add([]byte("replaced")))
	must(t, second(s.CreateBitmap("N", 64)))
	must(t, second(s.CreateBloom("M", BloomConfig{Capacity: 50})))
	ids := idsOf(s) // each name's filter id, as the store must have them
	m := NewCrashModel(mode, simFilters)
	runOps(t, seed, rng, s, m, 20+rng.IntN(80))

	renames := []struct {
		from, to string
		name     *string // the model's name of the filter
	}{{"b", "B", &m.names.Bloom}, {"c", "C", &m.names.Cuckoo}, {"n", "N", &m.names.Counting}, {"m", "M", &m.names.Bitmap}}
	renamed := func(i int) {
		r := renames[i]
		ids[r.to] = ids[r.from]
		delete(ids, r.from)
		*r.name = r.to
	}
	cut, after, power := rng.IntN(len(renames)), rng.IntN(2) == 0, rng.IntN(2) == 0
	what := fmt.Sprintf("seed %d: %s of rename %d %s its commit", seed, map[bool]string{true: "power loss", false: "death"}[power],
		cut, map[bool]string{true: "after", false: "before"}[after])
	for i := range cut {
		must(t, s.Rename(renames[i].from, renames[i].to))
		renamed(i)
		// Enough to grow layers: their catalog writes name the filter.
		runOps(t, seed, rng, s, m, 20+rng.IntN(60))
	}
	r := renames[cut]
	if after {
		// Die at the first removal of the replaced filter's files: the
		// catalog commit is done, no file is gone.
		w.sim.SetInjector(func(op mmapbits.Op, _ string) error {
			if op == mmapbits.OpRemove {
				w.sim.Kill()
				return errKilled
			}
			return nil
		})
		if err := s.Rename(r.from, r.to); !errors.Is(err, errKilled) {
			t.Fatalf("%s: Rename returned %v, want the injected death", what, err)
		}
		renamed(cut)
	} else {
		// The commit fails (nothing written), which fails the store.
		cat := format.CatalogPath(w.dir)
		must(t, os.Rename(cat, cat+".aside"))
		must(t, os.Mkdir(cat, 0o755))
		if err := s.Rename(r.from, r.to); !errors.Is(err, ErrFailed) {
			t.Fatalf("%s: Rename with the catalog gone returned %v, want ErrFailed", what, err)
		}
		must(t, os.Remove(cat))
		must(t, os.Rename(cat+".aside", cat))
	}
	if power {
		w.crash(s, rng)
	} else {
		w.kill(s)
	}
	w.sim.SetInjector(nil)
	if s, err = w.open(t); err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	m.Crash(power)
	checkModel(t, seed, what, s, m)
	if got := idsOf(s); !maps.Equal(got, ids) {
		t.Fatalf("%s: the filters' names and ids are %v, want %v", what, got, ids)
	}
	var files []string
	for _, p := range w.sim.Paths() {
		files = append(files, filepath.Base(p))
	}
	if want := namedFiles(s); !slices.Equal(files, want) {
		t.Fatalf("%s: the files after reopening are %v, want those the catalog names: %v", what, files, want)
	}
	// Go on from what survived, under the names it has.
	must(t, m.Settle(s))
	runOps(t, seed, rng, s, m, rng.IntN(30))
	must(t, s.Close())
	checkSumsAfterClose(t, seed, w)
}

// idsOf returns the id of each of s's filters by name.
func idsOf(s *Store) map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.filters))
	for name, h := range s.filters {
		out[name] = h.base().id
	}
	return out
}
