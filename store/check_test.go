package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// checkKinds creates one filter of every kind in s and fills it with n
// items; names are the kinds'.
func checkKinds(t *testing.T, s *Store, n int) {
	t.Helper()
	bl, err := s.CreateBloom("bloom", BloomConfig{Capacity: 2000, ErrorRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	cn, err := s.CreateCounting("counting", BloomConfig{Capacity: 2000, ErrorRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := s.CreateCuckoo("cuckoo", CuckooConfig{Capacity: 1000, Expansion: 2})
	if err != nil {
		t.Fatal(err)
	}
	bm, err := s.CreateBitmap("bitmap", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	if _, err := bl.AddMany(keys); err != nil {
		t.Fatal(err)
	}
	// In batches of 100 keys: one fsync each, not one per op.
	for lo := 0; lo < n; lo += 100 {
		bt := s.NewBatch()
		for i := lo; i < min(n, lo+100); i++ {
			bt.CountingAdd(cn, keys[i])
			bt.CuckooAdd(ck, keys[i]) // grows past 1000: a second layer
			bt.BitmapSet(bm, uint64(i)*4099%(1<<20))
		}
		if _, err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	bt := s.NewBatch()
	for _, k := range keys[:n/4] {
		bt.CountingDelete(cn, k)
		bt.CuckooDelete(ck, k)
	}
	if _, err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
}

// storeFiles returns every layer file of the store's filter, by layer.
func layerFiles(t *testing.T, dir, name string) []string {
	t.Helper()
	s, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.mu.Lock()
	b := s.filters[name].base()
	s.mu.Unlock()
	var out []string
	for i := range b.meta.Layers {
		out = append(out, b.path(i))
	}
	return out
}

// TestCheckCleanStore checks that after a clean Close every data page of
// every kind matches its checksum, in a writer and in a read-only store,
// and that Check during the session finds no problem: every page a change
// touched is accounted for.
func TestCheckCleanStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, s, 1500)
	rep, err := s.Check()
	if err != nil || rep.Changed == 0 {
		t.Fatalf("Check during the session: %+v, %v: want no problem and changed pages", rep, err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if rep, err = s.Check(); err != nil || rep.Changed != 0 || rep.Pages == 0 {
		t.Fatalf("Check after a checkpoint: %+v, %v: want every page verified", rep, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sessionFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("session marker after a clean Close: %v", err)
	}
	for _, ro := range []bool{false, true} {
		s, err := Open(dir, &Options{ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.Check()
		if err != nil || rep.Changed != 0 || rep.Unsettled != 0 || rep.Filters != 4 || rep.Layers != 5 || rep.NoSums != 0 {
			t.Fatalf("read-only %v: %+v, %v: want 4 filters, 5 layers, every page verified", ro, rep, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckFindsDamage damages one page of each kind's cleanly closed file
// in each way a disk can — a flipped bit, a zeroed 64-byte block, a zeroed
// page, a wrong stored checksum — and checks that Check names the filter,
// layer, file, page and offset, from a writer and a read-only store.
func TestCheckFindsDamage(t *testing.T) {
	damages := []struct {
		name string
		do   func(b []byte, h mmapbits.Header, page uint64)
	}{
		{"bit flip", flipBit},
		{"zeroed block", func(b []byte, _ mmapbits.Header, p uint64) {
			clear(b[mmapbits.HeaderSize+int(p)*mmapbits.PageSize+512:][:64])
		}},
		{"zeroed page", func(b []byte, _ mmapbits.Header, p uint64) {
			clear(b[mmapbits.HeaderSize+int(p)*mmapbits.PageSize:][:mmapbits.PageSize])
		}},
		{"wrong checksum", func(b []byte, h mmapbits.Header, p uint64) {
			off := h.SumOffset(p)
			binary.LittleEndian.PutUint32(b[off:], binary.LittleEndian.Uint32(b[off:])+1)
		}},
	}
	clean := t.TempDir()
	s, err := Open(clean, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, s, 1500)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"bloom", "counting", "cuckoo", "bitmap"} {
		for _, d := range damages {
			for _, ro := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/readonly=%v", kind, d.name, ro), func(t *testing.T) {
					dir := t.TempDir()
					if err := os.CopyFS(dir, os.DirFS(clean)); err != nil {
						t.Fatal(err)
					}
					file := layerFiles(t, dir, kind)[0]
					page := damageMiddlePage(t, file, d.do)
					s, err := Open(dir, &Options{ReadOnly: ro})
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					rep, err := s.Check()
					if !errors.Is(err, ErrCorrupt) || len(rep.Problems) != 1 {
						t.Fatalf("Check: %+v, %v: want one problem wrapping ErrCorrupt", rep, err)
					}
					var pe *PageError
					if !errors.As(err, &pe) {
						t.Fatalf("problem %v is not a *PageError", err)
					}
					rel, _ := filepath.Rel(dir, file)
					if pe.Filter != kind || pe.Layer != 0 || pe.File != rel || pe.Page != page ||
						pe.Offset != mmapbits.HeaderSize+int64(page)*mmapbits.PageSize || pe.Stored == pe.Computed {
						t.Fatalf("problem %+v: want filter %s layer 0 file %s page %d", pe, kind, rel, page)
					}
				})
			}
		}
	}
}

// flipBit flips one bit of data page p of the file image b.
func flipBit(b []byte, _ mmapbits.Header, p uint64) {
	b[mmapbits.HeaderSize+int(p)*mmapbits.PageSize+777] ^= 0x10
}

// damageMiddlePage applies do to the middle data page of the layer file
// at path, writes the file back and returns the page.
func damageMiddlePage(t *testing.T, path string, do func(b []byte, h mmapbits.Header, page uint64)) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := mmapbits.DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	page := h.DataPages / 2
	before := string(b)
	do(b, h, page)
	if string(b) == before {
		// Zeroing a zero page changes nothing: pick a page with data.
		t.Fatalf("damage changed nothing in page %d", page)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return page
}

// TestCheckFindsZeroedLayer: a layer file whose every byte after the
// header page is zeroed (data and checksums alike, as a punched hole or
// lost blocks leave it) matches page by page, but Check reports it, for
// every kind, from a writer and a read-only store, since its checkpoint
// counted items; an empty filter's zero pages are no problem.
func TestCheckFindsZeroedLayer(t *testing.T) {
	clean := t.TempDir()
	s, err := Open(clean, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, s, 1500)
	if _, err := s.CreateBloom("empty", BloomConfig{Capacity: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"bloom", "counting", "cuckoo", "bitmap"} {
		for _, ro := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/readonly=%v", kind, ro), func(t *testing.T) {
				dir := t.TempDir()
				if err := os.CopyFS(dir, os.DirFS(clean)); err != nil {
					t.Fatal(err)
				}
				file := layerFiles(t, dir, kind)[0]
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				clear(b[mmapbits.HeaderSize:])
				if err := os.WriteFile(file, b, 0o644); err != nil {
					t.Fatal(err)
				}
				s, err := Open(dir, &Options{ReadOnly: ro})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				rep, err := s.Check()
				if !errors.Is(err, ErrCorrupt) || len(rep.Problems) != 1 || !strings.Contains(err.Error(), "every data page is zero") ||
					!strings.Contains(err.Error(), fmt.Sprintf("%q", kind)) {
					t.Fatalf("Check: %+v, %v: want one problem naming filter %q's zeroed layer", rep, err, kind)
				}
			})
		}
	}
}

// TestCheckTruncatedFile: a layer file cut short is a broken filter,
// which Check reports as a problem naming the file.
func TestCheckTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, s, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	file := layerFiles(t, dir, "counting")[0]
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, st.Size()-mmapbits.PageSize/2); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.Check()
	rel, _ := filepath.Rel(dir, file)
	if !errors.Is(err, ErrCorrupt) || len(rep.Problems) != 1 || !errorsContain(rep.Problems[0], rel) {
		t.Fatalf("Check: %+v, %v: want one problem naming %s", rep, err, rel)
	}
}

func errorsContain(err error, s string) bool {
	return err != nil && len(s) > 0 && strings.Contains(err.Error(), s)
}

// TestCheckAfterKill: a writer killed mid-session leaves Bloom pages no
// checkpoint covered; the next writer counts every Bloom page as changed
// (no false problem) until its clean Close recomputes them all, after
// which every page verifies. The other kinds' pages, which change only
// through durable records, keep their checksums and verify throughout.
func TestCheckAfterKill(t *testing.T) {
	dir := t.TempDir()
	sim, mem := mmapbits.NewSim(), wal.NewMemFS()
	s, err := Open(dir, WithSeams(Options{}, sim, mem))
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, s, 1500)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	bl := mustBloom(t, s, "bloom")
	for i := range 300 {
		if _, err := bl.Add(fmt.Appendf(nil, "after-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.abandonForTest()
	sim.Kill()
	mem.Kill()
	s, err = Open(dir, WithSeams(Options{}, sim, mem))
	if err != nil {
		t.Fatal(err)
	}
	bloomPages := uint64(0)
	for _, r := range mustBloom(t, s, "bloom").b.regions {
		bloomPages += mmapbits.PagesFor(r.NumWords())
	}
	rep, err := s.Check()
	if err != nil || rep.Changed != bloomPages || rep.Pages == 0 {
		t.Fatalf("after the kill: %+v, %v: want the %d Bloom pages counted as changed, the others verified", rep, err, bloomPages)
	}
	if err := s.Checkpoint(); err != nil { // not full: cost follows the pages changed
		t.Fatal(err)
	}
	if rep, err = s.Check(); err != nil || rep.Changed != bloomPages {
		t.Fatalf("after a checkpoint: %+v, %v: want the Bloom checksums still unknown", rep, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, WithSeams(Options{}, sim, mem))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rep, err = s.Check(); err != nil || rep.Changed != 0 || rep.Pages == 0 {
		t.Fatalf("after a clean Close: %+v, %v: want every page verified", rep, err)
	}
}

// TestCheckReadOnlyBesideWriter: a read-only store opened beside a live
// writer that changes filters after their checkpoint reports no problem.
func TestCheckReadOnlyBesideWriter(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkKinds(t, s, 1500)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	bl := mustBloom(t, s, "bloom")
	for i := range 300 {
		if _, err := bl.Add(fmt.Appendf(nil, "after-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	ro, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for i := range 300 { // changes the reader's WAL read does not explain
		if _, err := bl.Add(fmt.Appendf(nil, "later-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := ro.Check()
	if err != nil || rep.Changed == 0 {
		t.Fatalf("read-only beside a writer: %+v, %v: want no problem, changed pages", rep, err)
	}
}

func mustBloom(t *testing.T, s *Store, name string) *Bloom {
	t.Helper()
	f, err := s.Bloom(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCheckEmptiedFilterIsNoProblem: a filter emptied by deletes and
// checkpointed is all zeros with zero checksums, which is no problem:
// not from a read-only store opened before the deletes (whose metadata
// still counts the items), beside the writer or after it closed, and not
// from the writer while its checkpoint of the empty filter runs.
func TestCheckEmptiedFilterIsNoProblem(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	for i := range 100 {
		must(t, c.Add(key(i)))
	}
	must(t, s.Checkpoint())
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	defer r.Close()
	for i := range 100 {
		if ok, err := c.Delete(key(i)); !ok || err != nil {
			t.Fatalf("Delete(key %d) = %v, %v", i, ok, err)
		}
	}
	must(t, s.Checkpoint())
	if _, err := r.Check(); err != nil {
		t.Errorf("read-only Check beside the writer that emptied the filter: %v", err)
	}
	// The writer: Check racing the checkpoint that records the emptied
	// filter (its checksums are updated before its catalog commit).
	hits := 0
	for range 50 {
		for i := range 50 {
			must(t, c.Add(key(i)))
		}
		must(t, s.Checkpoint())
		for i := range 50 {
			if ok, err := c.Delete(key(i)); !ok || err != nil {
				t.Fatalf("Delete(key %d) = %v, %v", i, ok, err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- s.Checkpoint() }()
		for running := true; running; {
			select {
			case err := <-done:
				must(t, err)
				running = false
			default:
			}
			if _, err := s.Check(); err != nil {
				hits++
			}
		}
	}
	if hits > 0 {
		t.Errorf("the writer's Check racing checkpoints of an emptied filter: %d false problems", hits)
	}
	must(t, s.Close())
	if _, err := r.Check(); err != nil {
		t.Errorf("read-only Check after the writer emptied the filter and closed: %v", err)
	}
}

// TestReadOnlyCheckBesideWriterThatOpensDuringIt: a read-only Check of a
// cleanly closed store, during which a writer opens the store and changes
// the pages Check has yet to read (and, in the second case, closes again
// before Check reads them). Check reports the writer's pages as
// unsettled, or verifies their new checksums, and no problem. (It used to
// look for the writer's marker only when it began, and reported every
// page the writer changed as corrupt.)
func TestReadOnlyCheckBesideWriterThatOpensDuringIt(t *testing.T) {
	for _, closes := range []bool{false, true} {
		dir := t.TempDir()
		const pages = 8
		w := mustOpen(t, dir, nil)
		must(t, second(w.CreateBitmap("m", pages*mmapbits.PageSize*8)))
		must(t, w.Close())
		r := mustOpen(t, dir, &Options{ReadOnly: true})
		var w2 *Store
		beforeCheckPage = func(b *filterBase, layer int, page uint64) {
			if page != 2 || w2 != nil {
				return
			}
			w2 = mustOpen(t, dir, nil)
			m, err := w2.Bitmap("m")
			must(t, err)
			for p := uint64(3); p < pages; p++ {
				must(t, second(m.Set(p*mmapbits.PageSize*8+5)))
			}
			if closes {
				must(t, w2.Close())
			}
		}
		rep, err := r.Check()
		beforeCheckPage = nil
		if w2 == nil {
			t.Fatal("the seam never ran")
		}
		if !closes {
			must(t, w2.Close())
		}
		must(t, r.Close())
		if err != nil {
			t.Fatalf("writer closes during Check %v: %v", closes, err)
		}
		if !closes && rep.Unsettled != pages-3 {
			t.Errorf("writer open: %d pages unsettled, want %d", rep.Unsettled, pages-3)
		}
	}
}

// TestCheckAfterCrashFindsDamage: a store whose writer died, with a page of
// a cuckoo, counting or bitmap filter damaged on disk that no WAL record
// after the checkpoint covers. The next writer's recovery keeps that
// filter's checksums (its pages change only through durable records, which
// the replay marks), so Check reports the page, and goes on reporting it
// after the writer's clean Close. Before, the recovery counted every
// checksum unknown and the Close stored the damaged page's: Check was
// clean and keys read absent (an adversarial review's finding). A Bloom
// filter's pages may hold bits of adds whose records were lost, so its
// checksums still count as unknown after a crash (store doc).
func TestCheckAfterCrashFindsDamage(t *testing.T) {
	live := t.TempDir()
	s, err := Open(live, &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkKinds(t, s, 1500)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// A durable record after the checkpoint, of another filter.
	if _, err := mustBloom(t, s, "bloom").Add([]byte("after")); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"counting", "cuckoo", "bitmap"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "crashed")
			if err := os.CopyFS(dir, os.DirFS(live)); err != nil { // the writer is alive: SESSION is copied
				t.Fatal(err)
			}
			page := damageMiddlePage(t, layerFiles(t, dir, kind)[0], flipBit)
			check := func(when string, s *Store) {
				t.Helper()
				rep, err := s.Check()
				var pe *PageError
				if !errors.As(err, &pe) || pe.Filter != kind || pe.Page != page || len(rep.Problems) != 1 {
					t.Fatalf("%s: Check: %+v, %v: want the damaged page %d of %s reported", when, rep, err, page, kind)
				}
			}
			w, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			check("the recovering writer", w)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			w, err = Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			check("after its clean Close", w)
		})
	}
}
