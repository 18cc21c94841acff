package store

// Issue #9 E: a read-only store beside a live writer never answers
// "absent" for an item acknowledged before it opened, however the writer
// moves entries; a Drop racing its Open is not corruption; it rejects the
// WAL the writer rejects.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// TestReadOnlyBesideMovingWriter: a writer keeps inserting into a nearly
// full cuckoo filter (most inserts move older entries between buckets and
// pages), deleting and re-adding old keys, and changing a counting filter
// and a bitmap, while a read-only store opened in the middle checks every
// item acknowledged before it opened. A few of those items are only in the
// WAL after the last checkpoint, so the reader needs the WAL as well as
// the live files; the moves go on in the live files. The "huge" case
// makes the cuckoo and counting files 2 MiB or more, so both stores map
// them for huge pages.
func TestReadOnlyBesideMovingWriter(t *testing.T) {
	for _, c := range []struct {
		name     string
		mode     SyncMode
		capacity int
	}{
		{"SyncAlways", SyncAlways, 1 << 17}, // 64 pages of buckets
		{"SyncInterval", SyncInterval, 1 << 17},
		{"SyncInterval/huge", SyncInterval, 1 << 20}, // 2 MiB of buckets
	} {
		t.Run(c.name, func(t *testing.T) {
			mode, capacity := c.mode, c.capacity
			dir := t.TempDir()
			w := mustOpen(t, dir, &Options{Sync: mode, SyncEvery: 20 * time.Millisecond, CheckpointEvery: -1})
			defer w.Close()
			c, err := w.CreateCuckoo("c", CuckooConfig{Capacity: uint64(capacity), BucketSize: 4, FingerprintBits: 12, MaxIterations: 2000})
			must(t, err)
			n, err := w.CreateCounting("n", BloomConfig{Capacity: uint64(capacity)})
			must(t, err)
			m, err := w.CreateBitmap("m", uint64(capacity))
			must(t, err)
			loaded := capacity * 80 / 100
			must(t, c.Load(rangeKeys(0, loaded)))
			must(t, n.Load(rangeKeys(0, loaded)))
			for i := 0; i < loaded; i += 16 {
				must(t, second(m.Set(uint64(i))))
			}
			must(t, w.Checkpoint())
			acked := loaded
			for ; acked < loaded+40; acked++ { // in the WAL only
				must(t, c.Add(key(acked)))
				must(t, n.Add(key(acked)))
				must(t, second(m.Set(uint64(acked))))
			}
			r, err := Open(dir, &Options{ReadOnly: true})
			must(t, err)
			defer r.Close()
			rc, _ := r.Cuckoo("c")
			rn, _ := r.Counting("n")
			rm, _ := r.Bitmap("m")
			if capacity >= 1<<20 {
				for _, b := range []*filterBase{c.b, n.b, rc.b, rn.b} {
					wantHugeMapping(t, b)
				}
			}

			var stop atomic.Bool
			var wg sync.WaitGroup
			var werr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := acked; !stop.Load() && i < capacity*95/100; i++ {
					if werr = c.Add(key(i)); werr != nil {
						return
					}
					if i%64 == 0 && i-32 >= acked {
						// Delete and re-add a key added since the reader
						// opened (one it does not check): entries move
						// back and forth.
						k := key(i - 32)
						if _, werr = c.Delete(k); werr != nil {
							return
						}
						if werr = c.Add(k); werr != nil {
							return
						}
					}
				}
			}()
			misses := 0
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) && misses == 0 {
				for i := 0; i < acked; i++ {
					if !rc.Has(key(i)) {
						misses++
					}
					if !rn.Has(key(i)) {
						misses++
					}
					if off := uint64(i); (i%16 == 0 || i >= loaded) && !rm.Get(off) {
						misses++
					}
				}
			}
			stop.Store(true)
			wg.Wait()
			must(t, werr)
			if misses > 0 {
				t.Fatalf("the read-only store answered absent %d times for items acknowledged before it opened", misses)
			}
		})
	}
}

// TestReadOnlyOpenRacingDrop: a filter dropped between the read-only
// Open's catalog read and its mapping of the files is left out of the
// snapshot, not reported as corruption. The Sim seam runs the Drop when
// the reader maps that filter's file.
func TestReadOnlyOpenRacingDrop(t *testing.T) {
	dir := t.TempDir()
	sim, fs := mmapbits.NewSim(), wal.NewMemFS()
	w, err := Open(dir, WithSeams(Options{}, sim, fs))
	must(t, err)
	defer w.Close()
	must(t, second(w.CreateBloom("keep", BloomConfig{})))
	d, err := w.CreateBloom("drop", BloomConfig{})
	must(t, err)
	path := w.layerPath(d.b.id, 0)
	var dropped error
	done := false
	sim.SetInjector(func(op mmapbits.Op, p string) error {
		if op == mmapbits.OpOpen && p == path && !done {
			done = true
			dropped = w.Drop("drop")
		}
		return nil
	})
	r, err := Open(dir, WithSeams(Options{ReadOnly: true}, sim, fs))
	if err != nil {
		t.Fatalf("read-only Open racing a Drop: %v", err)
	}
	defer r.Close()
	must(t, dropped)
	if !done {
		t.Fatal("the read-only Open never mapped the dropped filter's file")
	}
	if _, err := r.Bloom("keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Bloom("drop"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the dropped filter: %v, want ErrNotFound", err)
	}
}

// TestReadOnlyOpenRacingRename: a Rename over a filter between the
// read-only Open's catalog read and its mapping of the replaced filter's
// file makes the Open start over: the snapshot is the store after the
// Rename, not one that lacks a name that existed before and after, and not
// corruption.
func TestReadOnlyOpenRacingRename(t *testing.T) {
	dir := t.TempDir()
	sim, fs := mmapbits.NewSim(), wal.NewMemFS()
	w, err := Open(dir, WithSeams(Options{}, sim, fs))
	must(t, err)
	defer w.Close()
	next, err := w.CreateBloom("next", BloomConfig{})
	must(t, err)
	must(t, second(next.Add([]byte("new"))))
	live, err := w.CreateBloom("live", BloomConfig{})
	must(t, err)
	must(t, second(live.Add([]byte("old"))))
	path := w.layerPath(live.b.id, 0)
	var renamed error
	done := false
	sim.SetInjector(func(op mmapbits.Op, p string) error {
		if op == mmapbits.OpOpen && p == path && !done {
			done = true
			renamed = w.Rename("next", "live")
		}
		return nil
	})
	r, err := Open(dir, WithSeams(Options{ReadOnly: true}, sim, fs))
	if err != nil {
		t.Fatalf("read-only Open racing a Rename: %v", err)
	}
	defer r.Close()
	must(t, renamed)
	if !done {
		t.Fatal("the read-only Open never mapped the replaced filter's file")
	}
	f, err := r.Bloom("live")
	if err != nil {
		t.Fatalf("the renamed filter under its new name: %v", err)
	}
	if !f.Has([]byte("new")) || f.Has([]byte("old")) {
		t.Fatal("the read-only snapshot mixes the filters before and after the Rename")
	}
	if _, err := r.Bloom("next"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old name: %v, want ErrNotFound", err)
	}
}

// TestLSNJumpRejectedEverywhere: a WAL whose records' LSNs jump (records
// rewritten with other LSNs and valid CRCs) is corruption for the writer's
// Open, a read-only Open and wal.Scan (which cmd/inspect uses) alike: one
// scanner decides.
func TestLSNJumpRejectedEverywhere(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := 0; i < 10; i++ {
		must(t, second(b.Add(key(i))))
	}
	s.abandonForTest()
	segs, _ := filepath.Glob(filepath.Join(dir, format.WALName, "*.log"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	data, err := os.ReadFile(segs[0])
	must(t, err)
	h, err := wal.ParseSegmentHeader(data)
	must(t, err)
	// Rewrite records 4..6 of the segment as LSNs +6, CRCs recomputed.
	off := h.Size
	for i := 1; off < len(data); i++ {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		end := off + wal.RecordHeaderSize + n
		if i >= 4 && i <= 6 {
			lsn := binary.LittleEndian.Uint64(data[off+8:])
			rec := wal.AppendRecord(nil, lsn+6, data[off+wal.RecordHeaderSize:end])
			copy(data[off:end], rec)
		}
		off = end
	}
	must(t, os.WriteFile(segs[0], data, 0o644))
	if _, err := Open(dir, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("writer Open: %v, want ErrCorrupt", err)
	}
	if _, err := Open(dir, &Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read-only Open: %v, want ErrCorrupt", err)
	}
	if _, err := wal.Scan(filepath.Join(dir, format.WALName), wal.ScanOptions{Live: true}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wal.Scan: %v, want ErrCorrupt", err)
	}
}

// TestWALWordBeyondGeometry: a WAL record writing a word inside a layer
// file but beyond the filter's geometry (or beyond the file) fails Open,
// writer and read-only, with ErrCorrupt naming the segment and offset; it
// never panics and is never skipped.
func TestWALWordBeyondGeometry(t *testing.T) {
	for _, kind := range []string{"counting", "bitmap", "cuckoo"} {
		for _, idx := range []uint64{100, 1 << 40} {
			t.Run(fmt.Sprintf("%s/word%d", kind, idx), func(t *testing.T) {
				dir := t.TempDir()
				s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
				var id uint64
				switch kind {
				case "counting":
					f, err := s.CreateCounting("f", BloomConfig{Capacity: 10})
					must(t, err)
					id = f.b.id
				case "bitmap":
					f, err := s.CreateBitmap("f", 64)
					must(t, err)
					id = f.b.id
				case "cuckoo":
					f, err := s.CreateCuckoo("f", CuckooConfig{Capacity: 8})
					must(t, err)
					id = f.b.id
				}
				lsn, err := s.log.Append(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpWords, FilterID: id, Delta: 1, Writes: []format.WordWrite{{Index: idx, Value: 1}}}))
				must(t, err)
				must(t, s.log.Sync())
				s.abandonForTest()
				for _, ro := range []bool{false, true} {
					_, err := Open(dir, &Options{ReadOnly: ro})
					if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), ".log offset") || !strings.Contains(err.Error(), fmt.Sprint(lsn)) {
						t.Fatalf("ReadOnly=%v: Open: %v, want ErrCorrupt naming the segment, offset and LSN %d", ro, err, lsn)
					}
				}
			})
		}
	}
}

// TestReadOnlyPowerLossOneLayer: a read-only open of what a power loss
// leaves (the WAL durable, the layer files as the last checkpoint wrote
// them) answers every acknowledged add of a one-layer filter (Bloom fixed
// and scalable, counting, cuckoo) from the WAL overlay, by each lookup:
// the single-layer lookup paths (the fronts) must not skip the overlay.
// The crashed directory is a copy of a live store: its files at a
// checkpoint, then its WAL after the adds.
func TestReadOnlyPowerLossOneLayer(t *testing.T) {
	const n = 300
	dir := filepath.Join(t.TempDir(), "live")
	snap := filepath.Join(t.TempDir(), "crashed")
	s := mustOpen(t, dir, nil)
	defer s.Close()
	for _, name := range []string{"fixed", "scalable"} {
		_, err := s.CreateBloom(name, BloomConfig{Capacity: 10 * n, NonScaling: name == "fixed"})
		must(t, err)
	}
	_, err := s.CreateCounting("counting", BloomConfig{Capacity: 10 * n})
	must(t, err)
	_, err = s.CreateCuckoo("cuckoo", CuckooConfig{Capacity: 10 * n})
	must(t, err)
	must(t, s.Checkpoint())
	copyTree(t, dir, snap) // the layer files without the adds below
	// lookups returns a store's lookups of a filter by name: each lookup
	// of a key, the layer's own lookup (without any overlay), HasMany.
	type lookups struct {
		has, hasHash, layer func(k []byte) bool
		many                func(ks [][]byte) []bool
		layers              int
	}
	get := func(s *Store, name string) handle {
		var h handle
		var err error
		switch name {
		case "counting":
			h, err = s.Counting(name)
		case "cuckoo":
			h, err = s.Cuckoo(name)
		default:
			h, err = s.Bloom(name)
		}
		must(t, err)
		return h
	}
	open := func(s *Store, name string) lookups {
		h := get(s, name)
		switch f := h.(type) {
		case *Bloom:
			return lookups{f.Has, func(k []byte) bool { return f.HasHash(Hash(k)) }, (*f.layers.Load())[0].Has, f.HasMany, len(*f.layers.Load())}
		case *Counting:
			return lookups{f.Has, func(k []byte) bool { return f.HasHash(Hash(k)) }, f.c.Has, f.HasMany, 1}
		case *Cuckoo:
			return lookups{f.Has, func(k []byte) bool { return f.HasHash(Hash(k)) }, (*f.layers.Load())[0].Has, f.HasMany, len(*f.layers.Load())}
		}
		t.Fatalf("%s: unexpected kind %T", name, h)
		return lookups{}
	}
	names := []string{"fixed", "scalable", "counting", "cuckoo"}
	for _, name := range names {
		h := get(s, name)
		for i := range n {
			switch f := h.(type) {
			case *Bloom:
				must(t, second(f.Add(key(i))))
			case *Counting:
				must(t, f.Add(key(i)))
			case *Cuckoo:
				must(t, f.Add(key(i)))
			}
		}
	}
	must(t, os.RemoveAll(filepath.Join(snap, "wal")))
	copyTree(t, filepath.Join(dir, "wal"), filepath.Join(snap, "wal"))

	ro := mustOpen(t, snap, &Options{ReadOnly: true})
	defer ro.Close()
	for _, name := range names {
		f := open(ro, name)
		if f.layers != 1 {
			t.Fatalf("%s: %d layers, want 1 (the single-layer path)", name, f.layers)
		}
		keys := make([][]byte, n)
		missing, absent := 0, 0
		for i := range n {
			keys[i] = key(i)
			if !f.has(keys[i]) || !f.hasHash(keys[i]) {
				missing++
			}
			// The crashed layer file really lacks the adds (read
			// through the layer alone, without the overlay), or the
			// test proves nothing.
			if !f.layer(keys[i]) {
				absent++
			}
		}
		for _, ok := range f.many(keys) {
			if !ok {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%s: %d lookups of %d acknowledged keys answered absent after the power loss", name, missing, 3*n)
		}
		if absent < n/2 {
			t.Fatalf("%s: the crashed layer file holds %d of the %d adds: the test does not exercise the overlay", name, n-absent, n)
		}
	}
}

// TestReadOnlyPowerLossCuckooAlternates is TestReadOnlyPowerLossOneLayer
// for a cuckoo filter filled up across its checkpoint: the files hold a
// table 80% full, the WAL the adds that took it near full, so that many
// of them went to a bucket that was full at the checkpoint, or moved a
// fingerprint out of one. A read-only open of those files and that WAL
// (as after a power loss) must find every key, through the one-layer
// front and through the slow path of a filter of two layers; a lookup
// that asks the overlay only where the records changed one of the key's
// buckets must look at both buckets.
func TestReadOnlyPowerLossCuckooAlternates(t *testing.T) {
	for _, layers := range []int{1, 2} {
		t.Run(fmt.Sprintf("layers=%d", layers), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "live")
			snap := filepath.Join(t.TempDir(), "crashed")
			s := mustOpen(t, dir, nil)
			defer s.Close()
			f, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 2000, NonScaling: layers == 1})
			must(t, err)
			newest := func() *cuckoo.Filter { l := *f.layers.Load(); return l[len(l)-1] }
			n := 0
			for len(*f.layers.Load()) < layers || newest().Occupancy() < 0.8 {
				must(t, f.Add(key(n)))
				n++
			}
			must(t, s.Checkpoint())
			copyTree(t, dir, snap) // the layer files without the adds below
			before := n
			for newest().Occupancy() < 0.97 {
				if err := f.Add(key(n)); errors.Is(err, ErrFull) {
					break
				} else {
					must(t, err)
				}
				n++
			}
			if len(*f.layers.Load()) != layers {
				t.Fatalf("%d layers after the adds, want %d", len(*f.layers.Load()), layers)
			}
			must(t, os.RemoveAll(filepath.Join(snap, "wal")))
			copyTree(t, filepath.Join(dir, "wal"), filepath.Join(snap, "wal"))

			ro := mustOpen(t, snap, &Options{ReadOnly: true})
			defer ro.Close()
			rf, err := ro.Cuckoo("c")
			must(t, err)
			if got := len(*rf.layers.Load()); got != layers {
				t.Fatalf("read-only: %d layers, want %d", got, layers)
			}
			keys := make([][]byte, n)
			missing, absent := 0, 0
			for i := range n {
				keys[i] = key(i)
				if !rf.Has(keys[i]) || !rf.HasHash(Hash(keys[i])) {
					missing++
				}
				if i >= before && !(*rf.layers.Load())[layers-1].Has(keys[i]) {
					absent++ // the crashed file lacks it: only the overlay has it
				}
			}
			for _, ok := range rf.HasMany(keys) {
				if !ok {
					missing++
				}
			}
			if missing > 0 {
				t.Errorf("%d lookups of %d acknowledged keys answered absent after the power loss", missing, 3*n)
			}
			if after := n - before; absent < after/2 {
				t.Fatalf("the crashed layer file holds %d of the %d adds after the checkpoint: the test does not exercise the overlay", after-absent, after)
			}
		})
	}
}

// TestReadOnlyOverlayFrontClosed: a one-layer Bloom or cuckoo filter of a
// read-only store with an overlay looks up through its one-layer front
// (the overlay's, set once Open froze the overlay), and once the store is
// closed every lookup answers "maybe", keys never added included: the
// front's miss asks the overlay, then checks off. (A reviewer's mutants
// that dropped the off check from the overlay's miss, or the front
// after the freeze, passed every other test.)
func TestReadOnlyOverlayFrontClosed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	snap := filepath.Join(t.TempDir(), "crashed")
	s := mustOpen(t, dir, nil)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 10000, NonScaling: true})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 10000, NonScaling: true})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 10000})
	must(t, err)
	add := func(i int) {
		must(t, second(b.Add(key(i))))
		must(t, c.Add(key(i)))
		must(t, n.Add(key(i)))
	}
	for i := range 1000 {
		add(i)
	}
	must(t, s.Checkpoint())
	copyTree(t, dir, snap) // the files without the adds below
	for i := 1000; i < 1100; i++ {
		add(i)
	}
	must(t, os.RemoveAll(filepath.Join(snap, "wal")))
	copyTree(t, filepath.Join(dir, "wal"), filepath.Join(snap, "wal"))
	ro := mustOpen(t, snap, &Options{ReadOnly: true})
	rb, err := ro.Bloom("b")
	must(t, err)
	rc, err := ro.Cuckoo("c")
	must(t, err)
	rn, err := ro.Counting("n")
	must(t, err)
	if rb.b.ro == nil || rc.b.ro == nil || rn.b.ro == nil {
		t.Fatal("a read-only filter with WAL records after its checkpoint has no overlay: the test proves nothing")
	}
	if rb.front.Load().Filter() == nil || rc.front.Load().Filter() == nil {
		t.Fatal("a one-layer read-only Bloom or cuckoo filter with an overlay looks up through the slow front")
	}
	must(t, ro.Close())
	for i := range 1200 { // 1100 on: never added
		k := key(i)
		if !rb.Has(k) || !rb.HasHash(Hash(k)) || !rc.Has(k) || !rc.HasHash(Hash(k)) || !rn.Has(k) || !rn.HasHash(Hash(k)) {
			t.Fatalf("closed read-only store: key %d answered absent: bloom %v, cuckoo %v, counting %v", i, rb.Has(k), rc.Has(k), rn.Has(k))
		}
	}
}

// TestReadOnlyCountingDeletesAfterCheckpoint: a read-only open of files
// from a checkpoint and the WAL after it, which deletes half the keys of
// a counting filter: Has answers as Count does, from the overlay's
// counters where the records changed the key's block, so a deleted key
// is absent (as the writer's Has says) and a kept one present. (A
// one-layer front that answered from the live counters first said all
// 500 deleted keys were present while Count said 0 of them, a reviewer
// found.)
func TestReadOnlyCountingDeletesAfterCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	snap := filepath.Join(t.TempDir(), "crashed")
	s := mustOpen(t, dir, nil)
	defer s.Close()
	f, err := s.CreateCounting("n", BloomConfig{Capacity: 10000})
	must(t, err)
	for i := range 1000 {
		must(t, f.Add(key(i)))
	}
	must(t, s.Checkpoint())
	copyTree(t, dir, snap) // the files without the deletes below
	for i := range 500 {
		if ok, err := f.Delete(key(i)); err != nil || !ok {
			t.Fatalf("Delete(%d) = %v, %v", i, ok, err)
		}
	}
	must(t, os.RemoveAll(filepath.Join(snap, "wal")))
	copyTree(t, filepath.Join(dir, "wal"), filepath.Join(snap, "wal"))
	ro := mustOpen(t, snap, &Options{ReadOnly: true})
	defer ro.Close()
	rf, err := ro.Counting("n")
	must(t, err)
	present, disagree := 0, 0
	for i := range 1000 {
		k := key(i)
		has := rf.Has(k)
		if has != (rf.Count(k) > 0) || has != rf.HasHash(Hash(k)) {
			disagree++
		}
		if i < 500 && has {
			present++
		}
		if i >= 500 && !has {
			t.Fatalf("kept key %d answered absent", i)
		}
	}
	if disagree > 0 {
		t.Errorf("Has, HasHash and Count disagree on %d of 1000 keys", disagree)
	}
	// The writer's own answer bounds the false positives: keys whose
	// counters other keys keep up.
	if w := countTrue(500, func(i int) bool { return f.Has(key(i)) }); present > w {
		t.Errorf("%d of 500 deleted keys answer present read-only, %d to the writer", present, w)
	}
}

// countTrue counts the i in [0, n) for which fn is true.
func countTrue(n int, fn func(i int) bool) int {
	c := 0
	for i := range n {
		if fn(i) {
			c++
		}
	}
	return c
}
