package store

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

// bitmapModel is the model of one bitmap: its size and set bits.
type bitmapModel struct {
	bits uint64
	set  map[uint64]bool
}

func (m *bitmapModel) apply(off uint64, set bool) bool {
	if m.set[off] == set {
		return false
	}
	if set {
		m.set[off] = true
	} else {
		delete(m.set, off)
	}
	return true
}

func checkBitmapModel(t *testing.T, what string, h *Bitmap, m *bitmapModel) {
	t.Helper()
	if h.Bits() != m.bits {
		t.Fatalf("%s: Bits %d, want %d", what, h.Bits(), m.bits)
	}
	if c := h.Count(); c != uint64(len(m.set)) {
		t.Fatalf("%s: Count %d, want %d", what, c, len(m.set))
	}
	offs := make([]uint64, 0, m.bits+3)
	for i := uint64(0); i < m.bits; i++ {
		offs = append(offs, i)
	}
	offs = append(offs, m.bits, m.bits+64, math.MaxUint64)
	got := h.GetMany(offs)
	for i, off := range offs {
		want := off < m.bits && m.set[off]
		if got[i] != want {
			t.Fatalf("%s: GetMany bit %d = %v, want %v", what, off, got[i], want)
		}
		if g := h.Get(off); g != want {
			t.Fatalf("%s: Get bit %d = %v, want %v", what, off, g, want)
		}
	}
	in, err := h.Info()
	if err != nil {
		t.Fatalf("%s: Info: %v", what, err)
	}
	if in.Items != uint64(len(m.set)) || in.Capacity != m.bits {
		t.Fatalf("%s: Info items %d cap %d, want %d %d", what, in.Items, in.Capacity, len(m.set), m.bits)
	}
	fi, err := h.Fill()
	if err != nil || fi.Used != uint64(len(m.set)) {
		t.Fatalf("%s: Fill %+v %v, want used %d", what, fi, err, len(m.set))
	}
}

// drawBitmapOff draws an offset: mostly in range, sometimes at the edges.
func drawBitmapOff(r *rand.Rand, bits uint64) uint64 {
	switch r.IntN(20) {
	case 0:
		return 0
	case 1:
		return bits - 1
	case 2:
		return bits
	case 3:
		return math.MaxUint64
	case 4:
		return bits + uint64(r.IntN(100))
	}
	return r.Uint64N(min(bits, 40)) // dense, so duplicates and clears hit
}

// TestLifecycleBitmapModelCrash drives long random sequences of single and many
// bitmap changes, batches with duplicate offsets, drop/re-create and
// rename of the name, export/import, checkpoints, process kills and power
// losses, and compares every bitmap with a map model after each step.
func TestLifecycleBitmapModelCrash(t *testing.T) {
	base := testseed.Seed(t)
	seqs := uint64(6)
	if racedetect.Enabled && testing.Short() {
		seqs = 2 // one goroutine: the race detector finds nothing here
	}
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		for i := range seqs {
			bitmapModelSeq(t, mode, base+i)
		}
	}
}

func bitmapModelSeq(t *testing.T, mode SyncMode, seed uint64) {
	r := newTestRand(seed)
	w := newSimWorld(t, mode)
	s, err := w.open(t)
	must(t, err)
	defer func() { s.Close() }()
	names := []string{"a", "b", "c"}
	model := map[string]*bitmapModel{}
	hs := map[string]*Bitmap{}
	stale := []*Bitmap{} // handles of dropped/replaced filters
	sizes := []uint64{1, 63, 64, 65, 130, 1000}
	create := func(name string) {
		bits := sizes[r.IntN(len(sizes))]
		h, err := s.CreateBitmap(name, bits)
		if err != nil {
			t.Fatalf("%v seed %d: create %q: %v", mode, seed, name, err)
		}
		hs[name], model[name] = h, &bitmapModel{bits: bits, set: map[uint64]bool{}}
	}
	for _, n := range names[:2] {
		create(n)
	}
	sync := func() {
		if mode == SyncInterval {
			must(t, s.log.Sync())
		}
	}
	reopen := func(how string) {
		switch how {
		case "kill":
			w.kill(s)
		case "power":
			sync()
			w.powerLoss(s, r)
		case "close":
			must(t, s.Close())
		}
		s, err = w.open(t)
		if err != nil {
			t.Fatalf("%v seed %d: reopen after %s: %v", mode, seed, how, err)
		}
		stale = nil
		hs = map[string]*Bitmap{}
		for n := range model {
			h, err := s.Bitmap(n)
			if err != nil {
				t.Fatalf("%v seed %d: after %s: Bitmap(%q): %v", mode, seed, how, n, err)
			}
			hs[n] = h
		}
	}
	for step := 0; step < 400; step++ {
		what := fmt.Sprintf("%v seed %d step %d", mode, seed, step)
		var names2 []string
		for n := range model {
			names2 = append(names2, n)
		}
		if len(names2) == 0 {
			create(names[r.IntN(len(names))])
			continue
		}
		// sorted for determinism
		for i := range names2 {
			for j := i + 1; j < len(names2); j++ {
				if names2[j] < names2[i] {
					names2[i], names2[j] = names2[j], names2[i]
				}
			}
		}
		n := names2[r.IntN(len(names2))]
		h, m := hs[n], model[n]
		switch op := r.IntN(100); {
		case op < 30:
			off, set := drawBitmapOff(r, m.bits), r.IntN(2) == 0
			var got bool
			if set {
				got, err = h.Set(off)
			} else {
				got, err = h.Clear(off)
			}
			if off >= m.bits {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("%s: write %d of %d bits: %v, want ErrInvalid", what, off, m.bits, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("%s: write %d: %v", what, off, err)
			}
			if want := m.apply(off, set); got != want {
				t.Fatalf("%s: write(%d,%v) = %v, want %v", what, off, set, got, want)
			}
		case op < 50:
			k := r.IntN(12)
			offs := make([]uint64, k)
			for i := range offs {
				offs[i] = drawBitmapOff(r, m.bits)
			}
			set := r.IntN(2) == 0
			var res []bool
			if set {
				res, err = h.SetMany(offs)
			} else {
				res, err = h.ClearMany(offs)
			}
			bad := -1
			for i, off := range offs {
				if off >= m.bits {
					bad = i
					break
				}
			}
			if bad >= 0 {
				if !errors.Is(err, ErrInvalid) || len(res) != bad {
					t.Fatalf("%s: many %v: %v %v, want ErrInvalid after %d", what, offs, res, err, bad)
				}
				offs = offs[:bad]
			} else if err != nil {
				t.Fatalf("%s: many %v: %v", what, offs, err)
			}
			for i, off := range offs {
				if want := m.apply(off, set); res[i] != want {
					t.Fatalf("%s: many %v set %v: res[%d] = %v, want %v", what, offs, set, i, res[i], want)
				}
			}
		case op < 62:
			// A batch over every bitmap, duplicates included.
			bt := s.NewBatch()
			type bop struct {
				n   string
				off uint64
				set bool
			}
			var ops []bop
			bad := false
			for range r.IntN(10) + 1 {
				bn := names2[r.IntN(len(names2))]
				o := bop{bn, drawBitmapOff(r, model[bn].bits), r.IntN(2) == 0}
				if o.off >= model[bn].bits {
					if r.IntN(3) != 0 {
						continue
					}
					bad = true
				}
				ops = append(ops, o)
				if o.set {
					bt.BitmapSet(hs[bn], o.off)
				} else {
					bt.BitmapClear(hs[bn], o.off)
				}
			}
			res, err := bt.Commit()
			if bad {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("%s: batch with a bad offset: %v", what, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("%s: batch: %v", what, err)
			}
			for i, o := range ops {
				if want := model[o.n].apply(o.off, o.set); res[i] != want {
					t.Fatalf("%s: batch op %d %+v = %v, want %v", what, i, o, res[i], want)
				}
			}
		case op < 66:
			// drop, maybe re-create under the name
			must(t, s.Drop(n))
			stale = append(stale, h)
			delete(model, n)
			delete(hs, n)
			if r.IntN(2) == 0 {
				create(n)
			}
		case op < 70:
			to := names[r.IntN(len(names))]
			err := s.Rename(n, to)
			if err != nil {
				t.Fatalf("%s: rename %q %q: %v", what, n, to, err)
			}
			if to != n {
				if old, ok := hs[to]; ok {
					stale = append(stale, old)
				}
				hs[to], model[to] = h, m
				delete(hs, n)
				delete(model, n)
			}
		case op < 73:
			// export, then import under a free name (or over nothing)
			var buf bytes.Buffer
			if _, err := h.WriteTo(&buf); err != nil {
				t.Fatalf("%s: WriteTo: %v", what, err)
			}
			for _, to := range names {
				if _, ok := model[to]; ok {
					continue
				}
				if err := s.Import(to, &buf); err != nil {
					t.Fatalf("%s: Import %q: %v", what, to, err)
				}
				nh, err := s.Bitmap(to)
				must(t, err)
				cp := &bitmapModel{bits: m.bits, set: map[uint64]bool{}}
				for k := range m.set {
					cp.set[k] = true
				}
				hs[to], model[to] = nh, cp
				break
			}
		case op < 78:
			must(t, s.Checkpoint())
		case op < 82:
			reopen("kill")
		case op < 86:
			reopen("power")
		case op < 88:
			reopen("close")
		}
		for _, sh := range stale {
			if !sh.Get(0) || !sh.Get(math.MaxUint64) {
				t.Fatalf("%s: a stale handle answers a Get 'clear'", what)
			}
			if _, err := sh.Set(0); !errors.Is(err, ErrClosed) {
				t.Fatalf("%s: stale Set: %v, want ErrClosed", what, err)
			}
		}
		for nm, mm := range model {
			checkBitmapModel(t, what+" "+nm, hs[nm], mm)
		}
	}
}

// TestLifecycleExternal: an external record encoded for a bitmap
// that is then renamed, dropped, dropped and re-created under its name,
// or replaced by a Rename over it, applies to the filter it was encoded
// for (renamed), or to nothing; never to a new filter of the same name.
// The same after a restart, for records of an earlier process.
func TestLifecycleExternal(t *testing.T) {
	dir := t.TempDir()
	opts := &Options{Sync: SyncInterval, CheckpointEvery: -1}
	s, err := Open(dir, opts)
	must(t, err)
	defer func() { s.Close() }()
	enc := func(m *Bitmap, off uint64) []byte {
		t.Helper()
		bt := s.NewBatch()
		bt.BitmapSet(m, off)
		rec, err := bt.Encode()
		must(t, err)
		return rec
	}
	x, err := s.CreateBitmap("x", 100)
	must(t, err)
	// renamed: applies under the new name.
	rec := enc(x, 1)
	must(t, s.Rename("x", "y"))
	res, err := s.ApplyExternal(rec)
	must(t, err)
	if len(res) != 1 || !res[0] {
		t.Fatalf("renamed: %v", res)
	}
	y, err := s.Bitmap("y")
	must(t, err)
	if !y.Get(1) || y.Count() != 1 {
		t.Fatalf("renamed: bit 1 %v count %d", y.Get(1), y.Count())
	}
	// dropped and re-created: nothing applies to the new one.
	rec = enc(y, 2)
	must(t, s.Drop("y"))
	y2, err := s.CreateBitmap("y", 100)
	must(t, err)
	res, err = s.ApplyExternal(rec)
	if err != nil {
		t.Fatalf("dropped: %v", err)
	}
	if y2.Get(2) || y2.Count() != 0 {
		t.Fatalf("a record for the dropped bitmap reached the new one of its name: %v", res)
	}
	// replaced by a Rename over it.
	z, err := s.CreateBitmap("z", 100)
	must(t, err)
	rec = enc(y2, 3)
	must(t, s.Rename("z", "y"))
	_, err = s.ApplyExternal(rec)
	must(t, err)
	if z.Get(3) || z.Count() != 0 {
		t.Fatalf("a record for the replaced bitmap reached its replacement")
	}
	// Encode with a stale handle.
	bt := s.NewBatch()
	bt.BitmapSet(y2, 4)
	if _, err := bt.Encode(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Encode naming a dropped bitmap: %v", err)
	}
	// After a restart: records of the earlier process, never applied.
	recA := enc(z, 5)
	w, err := s.CreateBitmap("w", 100)
	must(t, err)
	recB := enc(w, 6)
	must(t, s.AbortExternal(recA))
	must(t, s.AbortExternal(recB))
	must(t, s.Close())
	s, err = Open(dir, opts)
	must(t, err)
	must(t, s.Drop("y"))
	must(t, s.Drop("w"))
	y3, err := s.CreateBitmap("y", 100)
	must(t, err)
	w3, err := s.CreateBitmap("w", 100)
	must(t, err)
	if _, err := s.ApplyExternal(recA); err != nil {
		t.Fatalf("replay A: %v", err)
	}
	if _, err := s.ApplyExternal(recB); err != nil {
		t.Fatalf("replay B: %v", err)
	}
	if y3.Count() != 0 || w3.Count() != 0 || y3.Get(5) || w3.Get(6) {
		t.Fatalf("records of an earlier process reached re-created filters")
	}
	must(t, s.Close())
	s, err = Open(dir, opts)
	must(t, err)
	for _, n := range []string{"y", "w"} {
		m, err := s.Bitmap(n)
		must(t, err)
		if m.Count() != 0 {
			t.Fatalf("%s after reopen: count %d", n, m.Count())
		}
	}
}

// TestLifecycleConcurrent: writers set bits through handles they hold
// while another goroutine renames, drops and re-creates the names; readers
// check that a handle never answers "clear" for a bit its writer set
// (acknowledged), and at the end each live bitmap's Count equals its set
// bits, before and after a reopen.
func TestLifecycleConcurrent(t *testing.T) {
	seed := testseed.Seed(t)
	dir := t.TempDir()
	opts := &Options{Sync: SyncInterval, SyncEvery: 2e6, CheckpointEvery: 3e6}
	s, err := Open(dir, opts)
	must(t, err)
	names := []string{"p", "q", "r"}
	for _, n := range names {
		_, err := s.CreateBitmap(n, 300)
		must(t, err)
	}
	stop := make(chan struct{})
	errc := make(chan error, 16)
	var wg syncWG
	for g := range 3 {
		wg.Go(func() {
			r := newTestRand(seed + uint64(g))
			for {
				select {
				case <-stop:
					return
				default:
				}
				m, err := s.Bitmap(names[r.IntN(len(names))])
				if err != nil {
					continue
				}
				var acked []uint64
				for range 20 {
					off := r.Uint64N(300)
					var err error
					if r.IntN(3) == 0 {
						bt := s.NewBatch()
						bt.BitmapSet(m, off)
						bt.BitmapSet(m, off)
						_, err = bt.Commit()
					} else if r.IntN(2) == 0 {
						_, err = m.SetMany([]uint64{off, off})
					} else {
						_, err = m.Set(off)
					}
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							errc <- fmt.Errorf("set: %v", err)
							return
						}
						break
					}
					acked = append(acked, off)
					for _, a := range acked {
						if !m.Get(a) {
							errc <- fmt.Errorf("bit %d acknowledged reads clear", a)
							return
						}
					}
					if got := m.GetMany(acked); !allSet(got) {
						errc <- fmt.Errorf("GetMany of acknowledged bits: %v", got)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		r := newTestRand(seed + 99)
		for range 300 {
			a, b := names[r.IntN(3)], names[r.IntN(3)]
			switch r.IntN(3) {
			case 0:
				_ = s.Rename(a, b)
			case 1:
				if s.Drop(a) == nil {
					if _, err := s.CreateBitmap(a, 300); err != nil {
						errc <- err
						return
					}
				}
			case 2:
				_, _ = s.CreateBitmap(a, 300)
			}
		}
		close(stop)
	})
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	check := func(what string) map[string]uint64 {
		out := map[string]uint64{}
		for _, n := range names {
			m, err := s.Bitmap(n)
			if err != nil {
				continue
			}
			var n1 uint64
			for i := range uint64(300) {
				if m.Get(i) {
					n1++
				}
			}
			if m.Count() != n1 {
				t.Fatalf("%s: %s: Count %d, set bits %d", what, n, m.Count(), n1)
			}
			out[n] = n1
		}
		return out
	}
	before := check("live")
	must(t, s.Close())
	s, err = Open(dir, opts)
	must(t, err)
	defer s.Close()
	after := check("reopened")
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("before %v after %v", before, after)
	}
}

func allSet(b []bool) bool {
	for _, x := range b {
		if !x {
			return false
		}
	}
	return true
}

type syncWG struct{ sync.WaitGroup }

// TestLifecycleDropWithStagedChanges: under SyncInterval, changes staged in the
// overlay (not yet synced, not in the file) of a bitmap that is then
// dropped, or replaced by a Rename over it, or renamed, must never be
// written into the file of another filter, nor crash the background
// apply; a kill after the drop and re-create recovers the new filter
// exactly.
func TestLifecycleDropWithStagedChanges(t *testing.T) {
	for _, how := range []string{"drop", "renameover", "rename", "drop-nockpt", "renameover-nockpt", "rename-nockpt"} {
		t.Run(how, func(t *testing.T) {
			ckpt := !strings.HasSuffix(how, "-nockpt")
			how = strings.TrimSuffix(how, "-nockpt")
			w := newSimWorld(t, SyncInterval)
			w.opts.SyncEvery = 1e9 // 1s
			s, err := w.open(t)
			must(t, err)
			x, err := s.CreateBitmap("x", 4096)
			must(t, err)
			_, err = s.CreateBitmap("o", 4096)
			must(t, err)
			for i := range uint64(500) {
				must(t, second(x.Set(i*7%4096)))
			}
			switch how {
			case "drop":
				must(t, s.Drop("x"))
			case "renameover":
				must(t, s.Rename("o", "x"))
			case "rename":
				must(t, s.Rename("x", "y"))
			}
			n, err := s.CreateBitmap("n", 4096)
			must(t, err)
			for i := range uint64(10) {
				must(t, second(n.Set(i)))
			}
			if ckpt {
				must(t, s.Checkpoint())
			} else {
				must(t, s.log.Sync())
			}
			if got := n.Count(); got != 10 {
				t.Fatalf("n count %d", got)
			}
			w.kill(s)
			s, err = w.open(t)
			must(t, err)
			defer s.Close()
			n, err = s.Bitmap("n")
			must(t, err)
			for i := range uint64(4096) {
				if n.Get(i) != (i < 10) {
					t.Fatalf("n bit %d = %v", i, n.Get(i))
				}
			}
			if n.Count() != 10 {
				t.Fatalf("n count %d after kill", n.Count())
			}
			if how == "rename" {
				y, err := s.Bitmap("y")
				must(t, err)
				if y.Count() != 500 {
					t.Fatalf("y count %d", y.Count())
				}
			}
			if rep, err := s.Check(); err != nil {
				t.Fatalf("Check: %v %+v", err, rep)
			}
		})
	}
}

// TestLifecycleDropDuringLoad: a filter dropped (or replaced by a Rename over
// it) while its Load's key source runs; a filter is then created under
// its name and written. The Load fails (the filter is gone), nothing of
// it reaches the new filter, in memory or after a reopen, and the store
// is clean.
func TestLifecycleDropDuringLoad(t *testing.T) {
	for _, kind := range []string{"bloom", "cuckoo", "counting"} {
		for _, how := range []string{"drop", "renameover", "renameaway"} {
			t.Run(kind+"-"+how, func(t *testing.T) {
				dir := t.TempDir()
				s, err := Open(dir, &Options{CheckpointEvery: -1})
				must(t, err)
				type loader interface {
					Load(iter.Seq2[[]byte, error]) error
				}
				var l loader
				switch kind {
				case "bloom":
					l, err = s.CreateBloom("x", BloomConfig{Capacity: 100000})
				case "cuckoo":
					l, err = s.CreateCuckoo("x", CuckooConfig{Capacity: 100000})
				case "counting":
					l, err = s.CreateCounting("x", BloomConfig{Capacity: 100000})
				}
				must(t, err)
				_, err = s.CreateBitmap("o", 64)
				must(t, err)
				gate := make(chan struct{})
				resume := make(chan struct{})
				done := make(chan error, 1)
				go func() {
					done <- l.Load(func(yield func([]byte, error) bool) {
						for i := range 20000 {
							if i == 10000 {
								close(gate)
								<-resume
							}
							if !yield(key(i), nil) {
								return
							}
						}
					})
				}()
				<-gate
				switch how {
				case "drop":
					must(t, s.Drop("x"))
				case "renameover":
					must(t, s.Rename("o", "x"))
				case "renameaway":
					must(t, s.Rename("x", "y"))
				}
				var n *Bitmap
				if how != "renameover" {
					n, err = s.CreateBitmap("x", 64)
					must(t, err)
				} else {
					n, err = s.Bitmap("x")
					must(t, err)
				}
				must(t, second(n.Set(3)))
				close(resume)
				lerr := <-done
				t.Logf("Load: %v", lerr)
				if how != "renameaway" && !errors.Is(lerr, ErrClosed) {
					t.Errorf("Load of a dropped filter: %v, want ErrClosed", lerr)
				}
				if how == "renameaway" && lerr != nil {
					t.Errorf("Load of a renamed filter: %v", lerr)
				}
				if n.Count() != 1 || !n.Get(3) || n.Get(4) {
					t.Fatalf("new x: count %d", n.Count())
				}
				if rep, err := s.Check(); err != nil {
					t.Fatalf("Check: %v %+v", err, rep)
				}
				must(t, s.Close())
				s, err = Open(dir, nil)
				must(t, err)
				defer s.Close()
				n, err = s.Bitmap("x")
				must(t, err)
				if n.Count() != 1 || !n.Get(3) {
					t.Fatalf("new x after reopen: count %d", n.Count())
				}
				if in, _ := n.Info(); in.State != "ok" {
					t.Fatalf("new x: %+v", in)
				}
				if how == "renameaway" {
					in, err := s.List()
					must(t, err)
					t.Logf("%+v", in)
				}
				if rep, err := s.Check(); err != nil {
					t.Fatalf("Check after reopen: %v %+v", err, rep)
				}
			})
		}
	}
}

// TestLifecycleBackupBitmapConcurrent: a Backup taken while writers set and
// clear bits: in the copy every bitmap's Count equals its set bits, and
// every bit set (and never cleared) before Backup was called is set; the
// copy's own Check is clean.
func TestLifecycleBackupBitmapConcurrent(t *testing.T) {
	seed := testseed.Seed(t)
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		dir := t.TempDir()
		s, err := Open(dir, &Options{Sync: mode, SyncEvery: 3e6, CheckpointEvery: -1})
		must(t, err)
		const bits = 5000
		m, err := s.CreateBitmap("m", bits)
		must(t, err)
		for i := uint64(0); i < 1000; i += 3 {
			must(t, second(m.Set(i)))
		}
		stop := make(chan struct{})
		var wg syncWG
		for g := range 2 {
			wg.Go(func() {
				r := newTestRand(seed + uint64(g))
				for {
					select {
					case <-stop:
						return
					default:
					}
					off := 1000 + r.Uint64N(bits-1000)
					switch r.IntN(4) {
					case 0:
						_, _ = m.Set(off)
					case 1:
						_, _ = m.Clear(off)
					case 2:
						_, _ = m.SetMany([]uint64{off, off + 1, off})
					case 3:
						bt := s.NewBatch()
						bt.BitmapSet(m, off)
						bt.BitmapClear(m, off)
						bt.BitmapSet(m, off)
						_, _ = bt.Commit()
					}
				}
			})
		}
		bdir := filepath.Join(t.TempDir(), "bk")
		err = s.Backup(bdir)
		close(stop)
		wg.Wait()
		must(t, err)
		must(t, s.Close())
		c, err := Open(bdir, nil)
		must(t, err)
		cm, err := c.Bitmap("m")
		must(t, err)
		var n uint64
		for i := range uint64(bits) {
			if cm.Get(i) {
				n++
			} else if i < 1000 && i%3 == 0 {
				t.Fatalf("%v: bit %d set before Backup is clear in the copy", mode, i)
			}
		}
		if cm.Count() != n {
			t.Fatalf("%v: copy Count %d, set bits %d", mode, cm.Count(), n)
		}
		if rep, err := c.Check(); err != nil {
			t.Fatalf("%v: Check of the copy: %v %+v", mode, err, rep)
		}
		must(t, c.Close())
		c, err = Open(bdir, nil)
		must(t, err)
		cm, err = c.Bitmap("m")
		must(t, err)
		if cm.Count() != n {
			t.Fatalf("%v: copy Count %d after reopen, set bits %d", mode, cm.Count(), n)
		}
		must(t, c.Close())
	}
}

// TestLifecycleReadOnlyAfterDropRecreate: a read-only Open beside a writer whose
// WAL holds records of a dropped bitmap and of the one re-created under
// its name (and of one renamed over another) opens, and answers with the
// new filters' bits only.
func TestLifecycleReadOnlyAfterDropRecreate(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	must(t, err)
	defer s.Close()
	x, err := s.CreateBitmap("x", 200)
	must(t, err)
	y, err := s.CreateBitmap("y", 200)
	must(t, err)
	must(t, s.Checkpoint())
	for i := uint64(0); i < 100; i++ {
		must(t, second(x.Set(i)))
		must(t, second(y.Set(199-i)))
	}
	must(t, s.Drop("x"))
	x2, err := s.CreateBitmap("x", 300)
	must(t, err)
	must(t, second(x2.Set(250)))
	must(t, s.Rename("y", "z"))
	z2, err := s.CreateBitmap("y", 100)
	must(t, err)
	must(t, second(z2.Set(5)))
	must(t, s.Rename("y", "z")) // replaces the renamed y
	for range 3 {
		ro, err := Open(dir, &Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only Open: %v", err)
		}
		rx, err := ro.Bitmap("x")
		must(t, err)
		if rx.Bits() != 300 || rx.Count() != 1 || !rx.Get(250) || rx.Get(5) {
			t.Fatalf("read-only x: bits %d count %d", rx.Bits(), rx.Count())
		}
		for i := uint64(0); i < 300; i++ {
			if rx.Get(i) != (i == 250) {
				t.Fatalf("read-only x bit %d = %v", i, rx.Get(i))
			}
		}
		rz, err := ro.Bitmap("z")
		must(t, err)
		if rz.Bits() != 100 || rz.Count() != 1 || !rz.Get(5) {
			t.Fatalf("read-only z: bits %d count %d", rz.Bits(), rz.Count())
		}
		for i := uint64(0); i < 100; i++ {
			if rz.Get(i) != (i == 5) {
				t.Fatalf("read-only z bit %d = %v", i, rz.Get(i))
			}
		}
		if _, err := ro.Bitmap("y"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("read-only y: %v", err)
		}
		if rep, err := ro.Check(); err != nil {
			t.Fatalf("read-only Check: %v %+v", err, rep)
		}
		must(t, ro.Close())
		must(t, s.Checkpoint())
	}
}

// TestLifecycleBitmapManySplit: a SetMany/ClearMany past the record limit
// (split into several records), with duplicates, then a kill: the
// recovered bitmap equals the model, count included.
func TestLifecycleBitmapManySplit(t *testing.T) {
	r := testseed.New(t)
	w := newSimWorld(t, SyncAlways)
	w.opts.SegmentSize = 64 << 20
	s, err := w.open(t)
	must(t, err)
	const bits = 1 << 20
	m, err := s.CreateBitmap("m", bits)
	must(t, err)
	model := map[uint64]bool{}
	// 60,000 offsets pass a 1 MiB limit on records. (The adopted test had
	// 700,000 and the real limit, 16 MiB: they fit one record, and the
	// race detector's run of them passed the store tests' 2 GiB memory
	// watchdog.)
	defer func(v int) { recordLimit = v }(recordLimit)
	recordLimit = 1 << 20
	const n = 60000
	for round := range 3 {
		before := s.log.Stats().Records
		offs := make([]uint64, n)
		for i := range offs {
			offs[i] = r.Uint64N(bits)
		}
		set := round != 1
		var res []bool
		if set {
			res, err = m.SetMany(offs)
		} else {
			res, err = m.ClearMany(offs)
		}
		must(t, err)
		if recs := s.log.Stats().Records - before; round == 0 && recs < 2 {
			// (A clear of random offsets changes fewer words: one record
			// may hold them.)
			t.Fatalf("round %d: %d offsets went into %d WAL record, want several", round, n, recs)
		}
		for i, o := range offs {
			want := model[o] != set
			if set {
				model[o] = true
			} else {
				delete(model, o)
			}
			if res[i] != want {
				t.Fatalf("round %d op %d: %v want %v", round, i, res[i], want)
			}
		}
		if m.Count() != uint64(len(model)) {
			t.Fatalf("round %d: count %d want %d", round, m.Count(), len(model))
		}
	}
	w.kill(s)
	s, err = w.open(t)
	must(t, err)
	defer s.Close()
	m, err = s.Bitmap("m")
	must(t, err)
	if m.Count() != uint64(len(model)) {
		t.Fatalf("after kill: count %d want %d", m.Count(), len(model))
	}
	all := make([]uint64, bits)
	for i := range all {
		all[i] = uint64(i)
	}
	got := m.GetMany(all)
	for i, g := range got {
		if g != model[uint64(i)] {
			t.Fatalf("after kill: bit %d = %v", i, g)
		}
	}
}

// TestLifecycleCheckBesideDrop: Check, CheckFilter, Fill, WriteTo and List
// running while bitmaps are dropped, re-created and renamed over each
// other report no problem and do not crash.
func TestLifecycleCheckBesideDrop(t *testing.T) {
	seed := testseed.Seed(t)
	dir := t.TempDir()
	s, err := Open(dir, &Options{CheckpointEvery: 2e6})
	must(t, err)
	defer s.Close()
	names := []string{"p", "q"}
	const size = 1 << 18
	for _, n := range names {
		m, err := s.CreateBitmap(n, size)
		must(t, err)
		for i := uint64(0); i < size; i += 4099 {
			must(t, second(m.Set(i)))
		}
	}
	stop := make(chan struct{})
	errc := make(chan error, 8)
	var wg syncWG
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if rep, err := s.Check(); err != nil {
				errc <- fmt.Errorf("Check: %v %+v", err, rep)
				return
			}
			for _, n := range names {
				if rep, err := s.CheckFilter(n); err != nil && !errors.Is(err, ErrNotFound) {
					errc <- fmt.Errorf("CheckFilter: %v %+v", err, rep)
					return
				}
				if m, err := s.Bitmap(n); err == nil {
					var buf bytes.Buffer
					if _, err := m.WriteTo(&buf); err != nil && !errors.Is(err, ErrClosed) {
						errc <- fmt.Errorf("WriteTo: %v", err)
						return
					}
					if _, err := m.Fill(); err != nil && !errors.Is(err, ErrClosed) {
						errc <- fmt.Errorf("Fill: %v", err)
						return
					}
				}
			}
			if _, err := s.List(); err != nil {
				errc <- err
				return
			}
		}
	})
	r := newTestRand(seed)
	steps := 60
	if testing.Short() {
		steps = 10
	}
	for range steps {
		a, b := names[r.IntN(2)], names[r.IntN(2)]
		switch r.IntN(3) {
		case 0:
			_ = s.Rename(a, b)
		case 1:
			_ = s.Drop(a)
		case 2:
			if m, err := s.CreateBitmap(a, size); err == nil {
				for i := uint64(0); i < size; i += 65537 {
					must(t, second(m.Set(i)))
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

// TestLifecycleExternalMixedDropped: a record with ops on a bitmap dropped
// between Encode and ApplyExternal and on a live one: the dropped one's
// ops report false and apply nowhere, the live one's apply, counts
// included, and both survive a kill and a reopen.
func TestLifecycleExternalMixedDropped(t *testing.T) {
	w := newSimWorld(t, SyncInterval)
	s, err := w.open(t)
	must(t, err)
	d, err := s.CreateBitmap("d", 100)
	must(t, err)
	l, err := s.CreateBitmap("l", 100)
	must(t, err)
	bt := s.NewBatch()
	bt.BitmapSet(d, 1)
	bt.BitmapSet(l, 2)
	bt.BitmapSet(d, 3)
	bt.BitmapSet(l, 2)
	bt.BitmapClear(l, 2)
	bt.BitmapSet(l, 4)
	rec, err := bt.Encode()
	must(t, err)
	must(t, s.Drop("d"))
	d2, err := s.CreateBitmap("d", 100)
	must(t, err)
	res, err := s.ApplyExternal(rec)
	must(t, err)
	if want := "[false true false false true true]"; fmt.Sprint(res) != want {
		t.Fatalf("results %v, want %s", res, want)
	}
	if d2.Count() != 0 || l.Count() != 1 || !l.Get(4) || l.Get(2) {
		t.Fatalf("d2 %d l %d", d2.Count(), l.Count())
	}
	must(t, s.log.Sync())
	w.kill(s)
	s, err = w.open(t)
	must(t, err)
	defer s.Close()
	d2, err = s.Bitmap("d")
	must(t, err)
	l, err = s.Bitmap("l")
	must(t, err)
	if d2.Count() != 0 || l.Count() != 1 || !l.Get(4) || l.Get(2) || d2.Get(1) || d2.Get(3) {
		t.Fatalf("after kill: d2 %d l %d", d2.Count(), l.Count())
	}
}
