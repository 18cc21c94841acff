package store_test

// The child half of the power-loss tests of powerloss_ext4_linux_test.go:
// the test binary, re-executed with plEnvChild set, works on a store on
// the loop-mounted ext4 and writes a line on fd 3 (a pipe to the parent,
// off the file system that loses power) for each call, before it starts
// and once it returned: what the parent checks after the power loss is
// exactly what calls returned.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// TestExt4PowerLossChild is the child of the power-loss tests; run
// directly it does nothing.
func TestExt4PowerLossChild(t *testing.T) {
	js := os.Getenv(plEnvChild)
	if js == "" {
		t.Skip("helper process of the TestExt4PowerLoss tests")
	}
	var a plChildArgs
	if err := json.Unmarshal([]byte(js), &a); err != nil {
		t.Fatal(err)
	}
	// A child whose parent vanished without killing it must not run on.
	go func() {
		time.Sleep(3 * time.Minute)
		os.Exit(5)
	}()
	c := &plChildOut{w: os.NewFile(3, "powerloss-pipe")}
	code := 0
	switch a.Role {
	case "cycles":
		code = plCyclesChild(a, c)
	case "onecall":
		code = plOneCallChild(a, c)
	case "notnew":
		code = plNotNewChild(a, c)
	default:
		code = c.fail("role", fmt.Errorf("unknown role %q", a.Role))
	}
	// Never return to the testing framework: the parent kills us.
	if code == 0 {
		select {}
	}
	os.Exit(code)
}

// plChildOut writes the child's lines, each in one write.
type plChildOut struct{ w io.Writer }

func (c *plChildOut) emit(line string) {
	if _, err := c.w.Write([]byte(line + "\n")); err != nil {
		os.Exit(4) // the parent is gone
	}
}

// fail reports a failed call, stamped with CLOCK_MONOTONIC so that the
// parent tells a failure before the power loss from one it caused, and
// returns the child's exit status.
func (c *plChildOut) fail(op string, err error) int {
	msg := strings.ReplaceAll(fmt.Sprintf("%s: %v", op, err), "\n", " | ")
	fmt.Fprintln(os.Stderr, "power-loss child:", msg)
	c.emit(fmt.Sprintf("E %d %s", plMonotonic(), msg))
	return 3
}

// do announces op, runs fn and acknowledges with the line fn returns
// once fn returned without an error.
func (c *plChildOut) do(op string, fn func() (string, error)) error {
	c.emit("? " + op)
	ack, err := fn()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	c.emit(ack)
	return nil
}

// plReadKeys reads the keys file rcModel.writeKeys wrote into the
// multisets of deletable cuckoo and counting keys.
func plReadKeys(path string, cu, cn *rcMultiset) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return fmt.Errorf("keys file: %q", l)
		}
		for range n {
			if f[0] == "C" {
				cu.add(f[1])
			} else {
				cn.add(f[1])
			}
		}
	}
	return nil
}

// plCyclesChild runs random ops on the store of TestExt4PowerLossCycles
// until the parent kills it or a call fails (after the power loss, every
// call that must write does).
func plCyclesChild(a plChildArgs, c *plChildOut) int {
	rng := rand.New(rand.NewPCG(a.Seed, uint64(a.Cycle)))
	cu := &rcMultiset{n: map[string]int{}}
	cn := &rcMultiset{n: map[string]int{}}
	if err := plReadKeys(a.Keys, cu, cn); err != nil {
		return c.fail("keys", err)
	}
	opts := &store.Options{
		CheckpointBytes: 256 << 10,
		SegmentSize:     128 << 10,
		CheckpointEvery: 20*time.Millisecond + time.Duration(rng.Int64N(int64(200*time.Millisecond))),
		SmallPages:      a.SmallPages,
	}
	if a.Interval {
		opts.Sync = store.SyncInterval
		opts.SyncEvery = time.Millisecond + time.Duration(rng.Int64N(int64(50*time.Millisecond)))
	}
	s, err := store.Open(a.Dir, opts)
	if err != nil {
		return c.fail("open", err)
	}
	b, err := s.EnsureBloom(rcFilters.Bloom, store.BloomConfig{Capacity: 1000, Expansion: 2})
	if err != nil {
		return c.fail("bloom", err)
	}
	cf, err := s.EnsureCuckoo(rcFilters.Cuckoo, store.CuckooConfig{Capacity: 1024, Expansion: 2})
	if err != nil {
		return c.fail("cuckoo", err)
	}
	n, err := s.EnsureCounting(rcFilters.Counting, store.BloomConfig{Capacity: 200_000})
	if err != nil {
		return c.fail("counting", err)
	}
	m, err := s.EnsureBitmap(rcFilters.Bitmap, rcBits)
	if err != nil {
		return c.fail("bitmap", err)
	}
	c.emit("O")

	// named runs an op on the named filters: under SyncInterval a
	// checkpoint makes it durable before it is acknowledged.
	named := func(op string, fn func() (string, error)) error {
		return c.do(op, func() (string, error) {
			ack, err := fn()
			if err == nil && a.Interval && !strings.HasPrefix(ack, "NO ") {
				err = s.Checkpoint()
			}
			return ack, err
		})
	}
	// list returns the filters the ops below create (L*, I*, live), and
	// their kinds.
	list := func() ([]string, map[string]string, error) {
		infos, err := s.List()
		if err != nil {
			return nil, nil, err
		}
		var names []string
		kinds := map[string]string{}
		for _, in := range infos {
			if strings.HasPrefix(in.Name, "L") || strings.HasPrefix(in.Name, "I") || in.Name == "live" {
				names = append(names, in.Name)
				kinds[in.Name] = in.Kind
			}
		}
		return names, kinds, nil
	}
	offsets := func(k int) []string {
		offs := make([]string, k)
		for i := range offs {
			offs[i] = strconv.FormatUint(rng.Uint64N(rcBits), 10)
		}
		return offs
	}
	parseOffs := func(ss []string) []uint64 {
		offs := make([]uint64, len(ss))
		for i, o := range ss {
			offs[i], _ = strconv.ParseUint(o, 10, 64)
		}
		return offs
	}
	for i := 0; ; i++ {
		tag := func(kind string) string { return fmt.Sprintf("c%d-%s%d", a.Cycle, kind, i) }
		r := rng.IntN(100)
		var names []string // the filters the ops below create, and their kinds
		var kinds map[string]string
		if r >= 76 && r < 95 {
			var err error
			if names, kinds, err = list(); err != nil {
				return c.fail("list", err)
			}
			if len(names) >= 8 && r < 85 {
				r = 85 // drop one instead of making one
			}
		}
		var err error
		switch {
		case r < 10, r >= 95:
			k := tag("b")
			err = c.do("B "+k, func() (string, error) {
				_, err := b.Add([]byte(k))
				return "B " + k, err
			})
		case r < 20:
			rg := plRange{tag("bm"), 1 + rng.IntN(2000)}
			op := fmt.Sprintf("BM %s %d", rg.tag, rg.n)
			err = c.do(op, func() (string, error) {
				_, err := b.AddMany(rg.keys())
				return op, err
			})
		case r < 25:
			k := tag("c")
			if rng.IntN(10) < 3 {
				if old, ok := cu.pick(rng); ok && cu.n[old] < rcMaxCopies {
					k = old
				}
			}
			err = c.do("C+ "+k, func() (string, error) {
				err := cf.Add([]byte(k))
				if errors.Is(err, store.ErrFull) {
					return "F C+ " + k, nil
				}
				if err == nil {
					cu.add(k)
				}
				return "C+ " + k, err
			})
		case r < 31, r >= 42 && r < 48:
			t, kind, f := tag("cm"), "CM", cf.AddMany
			size, ms := 300, cu
			if r >= 42 {
				t, kind, f, size, ms = tag("nm"), "NM", n.AddMany, 500, cn
			}
			rg := plRange{t, 1 + rng.IntN(size)}
			err = c.do(fmt.Sprintf("%s %s %d", kind, t, rg.n), func() (string, error) {
				keys := rg.keys()
				added, err := f(keys)
				if errors.Is(err, store.ErrFull) {
					err = nil // the keys before the one refused are added
				}
				for _, k := range keys[:added] {
					ms.add(string(k))
				}
				return fmt.Sprintf("%s %s %d", kind, t, added), err
			})
		case r < 37:
			k, ok := cu.pick(rng)
			if !ok {
				continue
			}
			err = c.do("C- "+k, func() (string, error) {
				found, err := cf.Delete([]byte(k))
				if errors.Is(err, store.ErrAmbiguous) && !found && cf.Has([]byte(k)) {
					cu.n[k] = 0 // refused; do not try again
					return "C-R " + k, nil
				}
				if err != nil || !found {
					cu.n[k] = 0
					return "C-0 " + k, err
				}
				cu.n[k]--
				return "C- " + k, nil
			})
		case r < 42:
			k := tag("n")
			if rng.IntN(10) < 4 {
				if old, ok := cn.pick(rng); ok && cn.n[old] < rcMaxCount {
					k = old
				}
			}
			err = c.do("N+ "+k, func() (string, error) {
				err := n.Add([]byte(k))
				if err == nil {
					cn.add(k)
				}
				return "N+ " + k, err
			})
		case r < 54:
			var keys []string
			seen := map[string]bool{}
			for range 1 + rng.IntN(20) {
				if k, ok := cn.pick(rng); ok && !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
			if len(keys) == 0 {
				continue
			}
			op := "ND " + strings.Join(keys, ",")
			err = c.do(op, func() (string, error) {
				bs := make([][]byte, len(keys))
				for j, k := range keys {
					bs[j] = []byte(k)
				}
				res, err := n.DeleteMany(bs)
				if err != nil {
					return "", err
				}
				var bits strings.Builder
				for j, ok := range res {
					if ok {
						cn.n[keys[j]]--
						bits.WriteByte('1')
					} else {
						cn.n[keys[j]] = 0
						bits.WriteByte('0')
					}
				}
				return op + " " + bits.String(), nil
			})
		case r < 58:
			k, ok := cn.pick(rng)
			if !ok {
				continue
			}
			err = c.do("N- "+k, func() (string, error) {
				found, err := n.Delete([]byte(k))
				if err != nil || !found {
					return "N-0 " + k, err
				}
				cn.n[k]--
				return "N- " + k, nil
			})
		case r < 62:
			off := rng.Uint64N(rcBits)
			code := "S"
			if rng.IntN(2) == 0 {
				code = "R"
			}
			op := fmt.Sprintf("%s %d", code, off)
			err = c.do(op, func() (string, error) {
				var err error
				if code == "S" {
					_, err = m.Set(off)
				} else {
					_, err = m.Clear(off)
				}
				return op, err
			})
		case r < 66:
			offs := offsets(1 + rng.IntN(50))
			code := "SM"
			if rng.IntN(3) == 0 {
				code = "RM"
			}
			op := code + " " + strings.Join(offs, ",")
			err = c.do(op, func() (string, error) {
				var err error
				if code == "SM" {
					_, err = m.SetMany(parseOffs(offs))
				} else {
					_, err = m.ClearMany(parseOffs(offs))
				}
				return op, err
			})
		case r < 72:
			bt := s.NewBatch()
			var toks []string
			var cuckoo, counting []string
			for j := range rng.IntN(6) {
				k := fmt.Sprintf("%s-%d", tag("tb"), j)
				bt.BloomAdd(b, []byte(k))
				toks = append(toks, "b:"+k)
			}
			for j := range rng.IntN(6) {
				k := fmt.Sprintf("%s-%d", tag("tc"), j)
				bt.CuckooAdd(cf, []byte(k))
				toks = append(toks, "c:"+k)
				cuckoo = append(cuckoo, k)
			}
			for j := range rng.IntN(6) {
				k := fmt.Sprintf("%s-%d", tag("tn"), j)
				bt.CountingAdd(n, []byte(k))
				toks = append(toks, "n:"+k)
				counting = append(counting, k)
			}
			for range rng.IntN(4) {
				off := rng.Uint64N(rcBits)
				if rng.IntN(2) == 0 {
					bt.BitmapSet(m, off)
					toks = append(toks, fmt.Sprintf("s:%d", off))
				} else {
					bt.BitmapClear(m, off)
					toks = append(toks, fmt.Sprintf("r:%d", off))
				}
			}
			if len(toks) == 0 {
				continue
			}
			op := "BT " + strings.Join(toks, " ")
			err = c.do(op, func() (string, error) {
				if _, err := bt.Commit(); errors.Is(err, store.ErrFull) {
					return "NO " + op, nil // refused whole
				} else if err != nil {
					return "", err
				}
				for _, k := range cuckoo {
					cu.add(k)
				}
				for _, k := range counting {
					cn.add(k)
				}
				return op, nil
			})
		case r < 76:
			err = c.do("K", func() (string, error) { return "K", s.Checkpoint() })
		case r < 81:
			kind := []string{"bloom", "bloom", "cuckoo", "counting"}[rng.IntN(4)]
			size := []int{1000, 20_000, 200_000}[rng.IntN(3)]
			if rng.IntN(8) == 0 {
				size = 1_000_000 // files of 2 MiB and more: mapped for huge pages
			}
			name := fmt.Sprintf("L%d-%d", a.Cycle, i)
			var load func(keys [][]byte) error
			err = named("LC "+name+" "+kind, func() (string, error) {
				var err error
				seq := func(keys [][]byte) func(func([]byte) bool) {
					return func(yield func([]byte) bool) {
						for _, k := range keys {
							if !yield(k) {
								return
							}
						}
					}
				}
				switch kind {
				case "bloom":
					var f *store.Bloom
					f, err = s.CreateBloom(name, store.BloomConfig{Capacity: uint64(size)})
					load = func(keys [][]byte) error { return f.Load(store.Keys(seq(keys))) }
				case "cuckoo":
					var f *store.Cuckoo
					f, err = s.CreateCuckoo(name, store.CuckooConfig{Capacity: uint64(2 * size)})
					load = func(keys [][]byte) error { return f.Load(store.Keys(seq(keys))) }
				case "counting":
					var f *store.Counting
					f, err = s.CreateCounting(name, store.BloomConfig{Capacity: uint64(size)})
					load = func(keys [][]byte) error { return f.Load(store.Keys(seq(keys))) }
				}
				return "LC " + name + " " + kind, err
			})
			if err == nil {
				op := fmt.Sprintf("LL %s %s %d", name, tag("l"), size)
				err = named(op, func() (string, error) {
					return op, load(plRange{tag("l"), size}.keys())
				})
			}
		case r < 85:
			srcs := append(names, rcFilterNames...)
			src := srcs[rng.IntN(len(srcs))]
			name := fmt.Sprintf("I%d-%d", a.Cycle, i)
			op := "IM " + name + " " + src
			err = named(op, func() (string, error) {
				var buf bytes.Buffer
				var err error
				switch kind := kinds[src]; {
				case src == rcFilters.Bloom:
					_, err = b.WriteTo(&buf)
				case src == rcFilters.Cuckoo:
					_, err = cf.WriteTo(&buf)
				case src == rcFilters.Counting:
					_, err = n.WriteTo(&buf)
				case src == rcFilters.Bitmap:
					_, err = m.WriteTo(&buf)
				case kind == "bloom":
					var f *store.Bloom
					if f, err = s.Bloom(src); err == nil {
						_, err = f.WriteTo(&buf)
					}
				case kind == "cuckoo":
					var f *store.Cuckoo
					if f, err = s.Cuckoo(src); err == nil {
						_, err = f.WriteTo(&buf)
					}
				case kind == "counting":
					var f *store.Counting
					if f, err = s.Counting(src); err == nil {
						_, err = f.WriteTo(&buf)
					}
				case kind == "bitmap":
					var f *store.Bitmap
					if f, err = s.Bitmap(src); err == nil {
						_, err = f.WriteTo(&buf)
					}
				default:
					err = fmt.Errorf("%s: kind %q", src, kind)
				}
				if errors.Is(err, store.ErrIncomplete) {
					return "NO " + op, nil
				}
				if err != nil {
					return "", err
				}
				return op, s.Import(name, &buf)
			})
		case r < 89:
			if len(names) == 0 {
				continue
			}
			name := names[rng.IntN(len(names))]
			err = named("DR "+name, func() (string, error) { return "DR " + name, s.Drop(name) })
		case r < 93:
			var cand []string
			for _, nm := range names {
				if nm != "live" {
					cand = append(cand, nm)
				}
			}
			if len(cand) == 0 {
				continue
			}
			op := "RN " + cand[rng.IntN(len(cand))] + " live"
			err = named(op, func() (string, error) {
				err := s.Rename(strings.Fields(op)[1], "live")
				if errors.Is(err, store.ErrIncomplete) {
					return "NO " + op, nil // an incomplete filter replaces none
				}
				return op, err
			})
		case r < 95:
			path := filepath.Join(a.Backups, fmt.Sprintf("bk-%d-%d", a.Cycle, i))
			err = named("BK "+path, func() (string, error) { return "BK " + path, s.Backup(path) })
		}
		if err != nil {
			return c.fail("op", err)
		}
	}
}

// plOneCallChild makes "a" (Bloom, keys a-0..a-4999) and "c" (cuckoo,
// c-0..c-499), checkpoints if asked, makes one call of the kind a.Op,
// writes "ACK" once it returned and waits for the power loss.
func plOneCallChild(a plChildArgs, c *plChildOut) int {
	s, err := store.Open(a.Dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		return c.fail("open", err)
	}
	fa, err := s.CreateBloom("a", store.BloomConfig{Capacity: 20_000})
	if err != nil {
		return c.fail("create a", err)
	}
	if _, err := fa.AddMany(plRange{"a", 5000}.keys()); err != nil {
		return c.fail("add a", err)
	}
	fc, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 1024, Expansion: 1})
	if err != nil {
		return c.fail("create c", err)
	}
	if _, err := fc.AddMany(plRange{"c", 500}.keys()); err != nil {
		return c.fail("add c", err)
	}
	if a.Checkpoint {
		if err := s.Checkpoint(); err != nil {
			return c.fail("checkpoint", err)
		}
	}
	keys := func(r plRange) iter.Seq2[[]byte, error] {
		ks := r.keys()
		return store.Keys(func(yield func([]byte) bool) {
			for _, k := range ks {
				if !yield(k) {
					return
				}
			}
		})
	}
	load := func(kind string, n int) error {
		switch kind {
		case "bloom":
			f, err := s.CreateBloom("n", store.BloomConfig{Capacity: uint64(n)})
			if err != nil {
				return err
			}
			return f.Load(keys(plRange{"n", n}))
		case "cuckoo":
			f, err := s.CreateCuckoo("n", store.CuckooConfig{Capacity: uint64(n)})
			if err != nil {
				return err
			}
			return f.Load(keys(plRange{"n", n}))
		default:
			f, err := s.CreateCounting("n", store.BloomConfig{Capacity: uint64(n)})
			if err != nil {
				return err
			}
			return f.Load(keys(plRange{"n", n}))
		}
	}
	switch a.Op {
	case "create":
		var f *store.Bloom
		if f, err = s.CreateBloom("n", store.BloomConfig{Capacity: 1000}); err == nil {
			_, err = f.Add([]byte("n-0"))
		}
	case "load":
		err = load("bloom", 200_000)
	case "loadcuckoo":
		err = load("cuckoo", 200_000)
	case "loadcounting":
		err = load("counting", 200_000)
	case "loadbloom1m":
		err = load("bloom", 1_000_000)
	case "loadcuckoo1m":
		err = load("cuckoo", 1_000_000)
	case "loadcounting1m":
		err = load("counting", 1_000_000)
	case "import":
		var buf bytes.Buffer
		if _, err = fa.WriteTo(&buf); err == nil {
			err = s.Import("n", &buf)
		}
	case "rename":
		err = s.Rename("a", "c")
	case "renamenew":
		err = s.Rename("a", "n")
	case "drop":
		err = s.Drop("a")
	case "dropcreate":
		var f *store.Bloom
		if err = s.Drop("a"); err == nil {
			if f, err = s.CreateBloom("a", store.BloomConfig{Capacity: 1000}); err == nil {
				_, err = f.Add([]byte("n-0"))
			}
		}
	case "backup":
		err = s.Backup(a.Backups)
	case "checkpoint", "close", "addmany":
		if _, err = fa.AddMany(plRange{"a2", 3000}.keys()); err == nil {
			switch a.Op {
			case "checkpoint":
				err = s.Checkpoint()
			case "close":
				err = s.Close()
			}
		}
	case "grow":
		var f *store.Bloom
		if f, err = s.CreateBloom("n", store.BloomConfig{Capacity: 100, Expansion: 2}); err == nil {
			_, err = f.AddMany(plRange{"n", 20_000}.keys())
		}
	case "cuckoogrow":
		_, err = fc.AddMany(plRange{"c2", 5000}.keys())
	case "batch":
		bt := s.NewBatch()
		for _, k := range (plRange{"a2", 300}).keys() {
			bt.BloomAdd(fa, k)
			bt.CuckooAdd(fc, k)
		}
		_, err = bt.Commit()
	case "countingdelete", "cuckoodelete":
		var addMany func([][]byte) (int, error)
		var deleteMany func([][]byte) ([]bool, error)
		if a.Op == "countingdelete" {
			var f *store.Counting
			if f, err = s.CreateCounting("n", store.BloomConfig{Capacity: 10_000}); err == nil {
				addMany, deleteMany = f.AddMany, f.DeleteMany
			}
		} else {
			var f *store.Cuckoo
			if f, err = s.CreateCuckoo("n", store.CuckooConfig{Capacity: 4096}); err == nil {
				addMany, deleteMany = f.AddMany, f.DeleteMany
			}
		}
		if err == nil {
			_, err = addMany(append(plRange{"n", 500}.keys(), plRange{"m", 500}.keys()...))
		}
		var found []bool
		if err == nil {
			found, err = deleteMany(plRange{"m", 500}.keys())
		}
		if err == nil && slices.Contains(found, false) {
			err = errors.New("DeleteMany did not find a key just added")
		}
	case "bitmap":
		var f *store.Bitmap
		var set, clear []uint64
		for off := uint64(0); off < 1000; off += 3 {
			set = append(set, off)
			if off%6 == 0 {
				clear = append(clear, off)
			}
		}
		if f, err = s.CreateBitmap("m", plBitmapBits); err == nil {
			if _, err = f.SetMany(set); err == nil {
				_, err = f.ClearMany(clear)
			}
		}
	default:
		err = errors.New("unknown op")
	}
	if err != nil {
		return c.fail(a.Op, err)
	}
	c.emit("ACK")
	return 0
}

// plNotNewChild makes "fixed" (2000 keys at a 20% error rate, not
// scaling) and "scalable" (1000 at 20%, two layers after 1500 adds),
// checkpoints, then adds keys k-0..k-2999 to each, half by AddMany and
// half by Add, and writes "<filter> <key> new|notnew" for each add
// acknowledged (the fixed filter refuses some as full), "<filter> <key>
// pre" for the adds before the checkpoint, then "DONE".
func plNotNewChild(a plChildArgs, c *plChildOut) int {
	s, err := store.Open(a.Dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		return c.fail("open", err)
	}
	fixed, err := s.CreateBloom("fixed", store.BloomConfig{Capacity: 2000, ErrorRate: 0.2, NonScaling: true})
	if err != nil {
		return c.fail("create fixed", err)
	}
	scalable, err := s.CreateBloom("scalable", store.BloomConfig{Capacity: 1000, ErrorRate: 0.2, Expansion: 4})
	if err != nil {
		return c.fail("create scalable", err)
	}
	for i := range 1500 {
		k := fmt.Sprint("pre-", i)
		if _, err := scalable.Add([]byte(k)); err != nil {
			return c.fail("add", err)
		}
		c.emit("scalable " + k + " pre")
	}
	if in, err := scalable.Info(); err != nil || in.Layers != 2 {
		return c.fail("scalable", fmt.Errorf("%d layers (%v), want 2", in.Layers, err))
	}
	if err := s.Checkpoint(); err != nil {
		return c.fail("checkpoint", err)
	}
	keys := plRange{"k", 3000}.keys()
	result := map[bool]string{true: "new", false: "notnew"}
	for name, f := range map[string]*store.Bloom{"fixed": fixed, "scalable": scalable} {
		added, err := f.AddMany(keys[:len(keys)/2])
		if err != nil {
			return c.fail(name+" AddMany", err)
		}
		for i, ok := range added {
			c.emit(fmt.Sprintf("%s %s %s", name, keys[i], result[ok]))
		}
		for _, k := range keys[len(keys)/2:] {
			ok, err := f.Add(k)
			if errors.Is(err, store.ErrFull) && name == "fixed" {
				continue // refused: not acknowledged
			}
			if err != nil {
				return c.fail(name+" Add", err)
			}
			c.emit(fmt.Sprintf("%s %s %s", name, k, result[ok]))
		}
	}
	c.emit("DONE")
	return 0
}
