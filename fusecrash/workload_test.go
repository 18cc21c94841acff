package fusecrash_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"testing"

	"github.com/filterstore/filterstore/store"
)

// op is one call of the workload, as the child reports it.
type op struct {
	K     string   // create, drop, rename, add, addmany, del, batch, load, ckpt, close
	N     string   `json:",omitempty"` // filter
	To    string   `json:",omitempty"` // rename target
	F     string   `json:",omitempty"` // filter kind (create)
	G     uint64   `json:",omitempty"` // generation (create)
	Keys  []string `json:",omitempty"` // keys added
	Dels  []string `json:",omitempty"` // keys deleted (from N)
	B     []bitem  `json:",omitempty"` // batch items
	Par   bool     `json:",omitempty"` // load: LoadParallel
	Bytes int      `json:",omitempty"`
}

type bitem struct {
	N   string
	G   uint64
	Key string
	Del bool `json:",omitempty"`
}

// msg is one line from a work child.
type msg struct {
	T   string // "open", "s" (op started), "a" (acknowledged), "e" (failed), "fatal"
	I   int    `json:",omitempty"`
	Op  *op    `json:",omitempty"`
	Err string `json:",omitempty"`
	Exp bool   `json:",omitempty"` // an expected error (ErrFull, ErrAmbiguous, ErrNotFound of a retiring drop)
	At  int64  `json:",omitempty"` // CLOCK_MONOTONIC
}

// filt is the model of one filter: its kind, generation and the keys
// that must be found.
type filt struct {
	Kind   string
	Gen    uint64
	Keys   map[string]bool
	Unsure bool // an op in flight may have changed it in any way
}

func (f *filt) clone() *filt {
	g := *f
	g.Keys = make(map[string]bool, len(f.Keys))
	for k := range f.Keys {
		g.Keys[k] = true
	}
	return &g
}

type view map[string]*filt

func (v view) clone() view {
	c := make(view, len(v))
	for k, f := range v {
		c[k] = f.clone()
	}
	return c
}

// workModel is what the work child gets: the filters it may use (with
// their keys, for deletes) and the names it must drop first.
type workModel struct {
	Filters map[string]*filt
	Retire  []string
}

// verifyModel is what the verify child checks.
type verifyModel struct {
	Want    map[string]*filt // names whose filter must be there with every key (Unsure: skipped)
	Allowed []string         // names that may exist beyond Want
	// ReadOnlyOnly: check through a read-only open only.
	ReadOnlyOnly bool
}

const (
	maxFilters  = 10
	maxKeysEach = 2500
)

var kinds = []string{"bloom", "cuckoo", "counting"}

func openOpts(a childArgs) *store.Options {
	o := &store.Options{}
	if a.Interval {
		o.Sync = store.SyncInterval
	}
	if a.Small {
		o.SegmentSize = 64 << 10
		o.CheckpointBytes = 64 << 10
		o.CheckpointEvery = 300 * time.Millisecond
		if a.Interval {
			o.SyncEvery = 20 * time.Millisecond
		}
	}
	return o
}

func workChild(t *testing.T, a childArgs, w *reporter) {
	var wm workModel
	b, err := os.ReadFile(a.Model)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &wm); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(a.Seed, uint64(a.Cycle)))
	opts := openOpts(a)
	// A failed Open is reported (a fault, but after an injected EIO,
	// where the documented recovery is the next Open) and tried again.
	var s *store.Store
	for {
		if s, err = store.Open(a.Dir, opts); err == nil {
			break
		}
		w.send(msg{T: "fatal", Err: fmt.Sprintf("open: %v (corrupt %v)", err, errors.Is(err, store.ErrCorrupt)), At: monotonic()})
		time.Sleep(100 * time.Millisecond)
	}
	w.send(msg{T: "open", At: monotonic()})
	fl := map[string]*filt{}
	for n, f := range wm.Filters {
		fl[n] = f
	}
	// mu: structural ops (create, drop, rename, load, close) hold it
	// exclusively, others shared; km guards the key sets.
	var mu sync.RWMutex
	var km sync.Mutex
	var opid, nextKey atomic.Int64
	var needReopen atomic.Bool
	newKey := func() string {
		return fmt.Sprintf("c%d-%d", a.Cycle, nextKey.Add(1))
	}
	gen := uint64(a.Cycle) << 32
	var unsureMu sync.Mutex
	unsure := map[string]bool{}
	// run reports op o, runs fn and reports its end.
	run := func(o *op, fn func() error) error {
		id := int(opid.Add(1))
		w.send(msg{T: "s", I: id, Op: o})
		err := fn()
		if err != nil {
			exp := errors.Is(err, store.ErrFull) || errors.Is(err, store.ErrAmbiguous) || (o.K == "drop" && errors.Is(err, store.ErrNotFound))
			unsureMu.Lock()
			switch {
			case o.K == "create" && errors.Is(err, store.ErrExists) && unsure[o.N]:
				// A create, drop or rename of this name failed earlier
				// (an injected EIO): it may have happened.
				exp = true
			case !exp && (o.K == "create" || o.K == "drop" || o.K == "rename"):
				unsure[o.N], unsure[o.To] = true, true
			}
			unsureMu.Unlock()
			w.send(msg{T: "e", I: id, Err: err.Error(), Exp: exp, At: monotonic()})
			return err
		}
		w.send(msg{T: "a", I: id, At: monotonic()})
		return nil
	}
	reopen := func() {
		s.Close()
		for {
			s, err = store.Open(a.Dir, opts)
			if err == nil {
				w.send(msg{T: "open", At: monotonic()})
				return
			}
			w.send(msg{T: "e", Err: "reopen: " + err.Error(), At: monotonic()})
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, n := range wm.Retire {
		run(&op{K: "drop", N: n}, func() error { return s.Drop(n) })
		delete(fl, n)
	}
	names := func(kinds ...string) []string {
		var ns []string
		for n, f := range fl {
			if len(kinds) == 0 || slices.Contains(kinds, f.Kind) {
				ns = append(ns, n)
			}
		}
		slices.Sort(ns)
		return ns
	}
	pick := func(ns []string) string {
		if len(ns) == 0 {
			return ""
		}
		return ns[rng.IntN(len(ns))]
	}
	keysOf := func(f *filt, n int) []string {
		ks := make([]string, 0, len(f.Keys))
		for k := range f.Keys {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		rng.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
		return ks[:min(n, len(ks))]
	}
	bytesOf := func(ks []string) [][]byte {
		bs := make([][]byte, len(ks))
		for i, k := range ks {
			bs[i] = []byte(k)
		}
		return bs
	}
	fail := func(err error) {
		if err != nil && errors.Is(err, store.ErrFailed) {
			needReopen.Store(true)
		}
	}
	// Backups of earlier cycles were checked (or not) by now.
	// Backup wants the directory above its copy to exist; it syncs that
	// one, the caller the one above (as for any directory it makes).
	bdir := filepath.Join(filepath.Dir(a.Dir), "backups")
	if !a.KeepBackups {
		os.RemoveAll(bdir)
	}
	if err := os.Mkdir(bdir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
	if d, err := os.Open(filepath.Dir(a.Dir)); err == nil {
		d.Sync()
		d.Close()
	}
	nb := 0
	adders := rng.IntN(3)
	for i := range adders {
		arng := rand.New(rand.NewPCG(a.Seed^uint64(i+1)<<40, uint64(a.Cycle)))
		go func() {
			for {
				mu.RLock()
				n := ""
				if ns := names(); len(ns) > 0 {
					n = ns[arng.IntN(len(ns))]
				}
				if n == "" {
					mu.RUnlock()
					time.Sleep(time.Millisecond)
					continue
				}
				f := fl[n]
				km.Lock()
				full := len(f.Keys) >= maxKeysEach
				km.Unlock()
				if full {
					mu.RUnlock()
					time.Sleep(time.Millisecond)
					continue
				}
				ks := make([]string, 1+arng.IntN(2)*arng.IntN(16))
				for i := range ks {
					ks[i] = newKey()
				}
				err := run(&op{K: "addmany", N: n, G: f.Gen, Keys: ks}, func() error { return addKeys(s, n, f.Kind, ks) })
				if err == nil {
					km.Lock()
					for _, k := range ks {
						f.Keys[k] = true
					}
					km.Unlock()
				}
				fail(err)
				mu.RUnlock()
			}
		}()
	}
	for step := 0; ; step++ {
		if needReopen.Load() || (step > 0 && step%1000 == 0) {
			mu.Lock()
			needReopen.Store(false)
			run(&op{K: "close"}, func() error { return s.Close() })
			reopen()
			mu.Unlock()
			continue
		}
		r := rng.IntN(100)
		structural := r < 14 || len(fl) == 0 || (r >= 88 && r < 92) || r >= 99
		func() {
			if structural {
				mu.Lock()
				defer mu.Unlock()
			} else {
				mu.RLock()
				defer mu.RUnlock()
			}
			switch {
			case r < 8 || len(fl) == 0: // create
				if len(fl) >= maxFilters {
					return
				}
				n := fmt.Sprintf("f%d", rng.IntN(maxFilters+4))
				if fl[n] != nil {
					return
				}
				gen++
				kind := kinds[rng.IntN(3)]
				o := &op{K: "create", N: n, F: kind, G: gen}
				err := run(o, func() error {
					var err error
					switch kind {
					case "bloom":
						_, err = s.CreateBloom(n, store.BloomConfig{Capacity: 300})
					case "cuckoo":
						_, err = s.CreateCuckoo(n, store.CuckooConfig{Capacity: 300})
					case "counting":
						_, err = s.CreateCounting(n, store.BloomConfig{Capacity: 4000})
					}
					return err
				})
				if err == nil {
					fl[n] = &filt{Kind: kind, Gen: gen, Keys: map[string]bool{}}
				} else if errors.Is(err, store.ErrExists) {
					run(&op{K: "drop", N: n}, func() error { return s.Drop(n) })
				}
				fail(err)
			case r < 11: // drop
				n := pick(names())
				if n == "" {
					return
				}
				err := run(&op{K: "drop", N: n}, func() error { return s.Drop(n) })
				delete(fl, n)
				fail(err)
			case r < 14: // rename
				n := pick(names())
				to := fmt.Sprintf("f%d", rng.IntN(maxFilters+4))
				if n == "" || to == n {
					return
				}
				err := run(&op{K: "rename", N: n, To: to}, func() error { return s.Rename(n, to) })
				if err == nil {
					fl[to] = fl[n]
				} else {
					delete(fl, to)
				}
				delete(fl, n)
				fail(err)
			case r < 45: // add
				n := pick(names())
				if n == "" || keyCount(&km, fl[n]) >= maxKeysEach {
					return
				}
				f := fl[n]
				k := newKey()
				err := run(&op{K: "add", N: n, G: f.Gen, Keys: []string{k}}, func() error {
					switch f.Kind {
					case "bloom":
						h, err := s.Bloom(n)
						if err == nil {
							_, err = h.Add([]byte(k))
						}
						return err
					case "cuckoo":
						h, err := s.Cuckoo(n)
						if err == nil {
							err = h.Add([]byte(k))
						}
						return err
					default:
						h, err := s.Counting(n)
						if err == nil {
							err = h.Add([]byte(k))
						}
						return err
					}
				})
				if err == nil {
					km.Lock()
					f.Keys[k] = true
					km.Unlock()
				}
				fail(err)
			case r < 60: // addmany
				n := pick(names())
				if n == "" || keyCount(&km, fl[n]) >= maxKeysEach {
					return
				}
				f := fl[n]
				ks := make([]string, 1+rng.IntN(64))
				for i := range ks {
					ks[i] = newKey()
				}
				err := run(&op{K: "addmany", N: n, G: f.Gen, Keys: ks}, func() error {
					var err error
					switch f.Kind {
					case "bloom":
						var h *store.Bloom
						if h, err = s.Bloom(n); err == nil {
							_, err = h.AddMany(bytesOf(ks))
						}
					case "cuckoo":
						var h *store.Cuckoo
						if h, err = s.Cuckoo(n); err == nil {
							_, err = h.AddMany(bytesOf(ks))
						}
					default:
						var h *store.Counting
						if h, err = s.Counting(n); err == nil {
							_, err = h.AddMany(bytesOf(ks))
						}
					}
					return err
				})
				if err == nil {
					km.Lock()
					for _, k := range ks {
						f.Keys[k] = true
					}
					km.Unlock()
				}
				fail(err)
			case r < 72: // delete, single or many
				n := pick(names("cuckoo", "counting"))
				if n == "" || keyCount(&km, fl[n]) == 0 {
					return
				}
				f := fl[n]
				km.Lock()
				ks := keysOf(f, 1+rng.IntN(3)*rng.IntN(8))
				for _, k := range ks {
					delete(f.Keys, k)
				}
				km.Unlock()
				err := run(&op{K: "del", N: n, Dels: ks}, func() error {
					var err error
					if f.Kind == "cuckoo" {
						var h *store.Cuckoo
						if h, err = s.Cuckoo(n); err == nil {
							if len(ks) == 1 {
								_, err = h.Delete([]byte(ks[0]))
							} else {
								_, err = h.DeleteMany(bytesOf(ks))
							}
						}
					} else {
						var h *store.Counting
						if h, err = s.Counting(n); err == nil {
							if len(ks) == 1 {
								_, err = h.Delete([]byte(ks[0]))
							} else {
								_, err = h.DeleteMany(bytesOf(ks))
							}
						}
					}
					return err
				})
				fail(err)
			case r < 84: // batch over several filters
				ns := names()
				if len(ns) == 0 {
					return
				}
				bt := s.NewBatch()
				km.Lock()
				var items []bitem
				used := map[string]map[string]bool{}
				for range 1 + rng.IntN(12) {
					n := pick(ns)
					f := fl[n]
					if used[n] == nil {
						used[n] = map[string]bool{}
					}
					var it bitem
					if f.Kind != "bloom" && len(f.Keys) > 0 && rng.IntN(3) == 0 {
						k := keysOf(f, 1)[0]
						if used[n][k] {
							continue
						}
						it = bitem{N: n, G: f.Gen, Key: k, Del: true}
					} else {
						if len(f.Keys) >= maxKeysEach {
							continue
						}
						it = bitem{N: n, G: f.Gen, Key: newKey()}
					}
					used[n][it.Key] = true
					var err error
					switch f.Kind {
					case "bloom":
						var h *store.Bloom
						if h, err = s.Bloom(n); err == nil {
							bt.BloomAdd(h, []byte(it.Key))
						}
					case "cuckoo":
						var h *store.Cuckoo
						if h, err = s.Cuckoo(n); err == nil {
							if it.Del {
								bt.CuckooDelete(h, []byte(it.Key))
							} else {
								bt.CuckooAdd(h, []byte(it.Key))
							}
						}
					default:
						var h *store.Counting
						if h, err = s.Counting(n); err == nil {
							if it.Del {
								bt.CountingDelete(h, []byte(it.Key))
							} else {
								bt.CountingAdd(h, []byte(it.Key))
							}
						}
					}
					if err != nil {
						continue
					}
					if it.Del {
						delete(f.Keys, it.Key)
					}
					items = append(items, it)
				}
				km.Unlock()
				if len(items) == 0 {
					return
				}
				err := run(&op{K: "batch", B: items}, func() error { _, err := bt.Commit(); return err })
				if err == nil {
					km.Lock()
					for _, it := range items {
						if !it.Del {
							fl[it.N].Keys[it.Key] = true
						}
					}
					km.Unlock()
				}
				fail(err)
			case r < 88: // checkpoint
				fail(run(&op{K: "ckpt"}, s.Checkpoint))
			case r < 92: // load
				n := pick(names())
				if n == "" || len(fl[n].Keys) >= maxKeysEach {
					return
				}
				f := fl[n]
				ks := make([]string, 100+rng.IntN(1500))
				for i := range ks {
					ks[i] = newKey()
				}
				par := rng.IntN(2) == 0
				src := func(ks []string) iter.Seq2[[]byte, error] {
					return func(yield func([]byte, error) bool) {
						for _, k := range ks {
							if !yield([]byte(k), nil) {
								return
							}
						}
					}
				}
				err := run(&op{K: "load", N: n, Keys: ks, Par: par}, func() error {
					var err error
					srcs := []iter.Seq2[[]byte, error]{src(ks)}
					if par {
						h := len(ks) / 2
						srcs = []iter.Seq2[[]byte, error]{src(ks[:h]), src(ks[h:])}
					}
					switch f.Kind {
					case "bloom":
						var h *store.Bloom
						if h, err = s.Bloom(n); err == nil {
							err = h.LoadParallel(srcs...)
						}
					case "cuckoo":
						var h *store.Cuckoo
						if h, err = s.Cuckoo(n); err == nil {
							err = h.LoadParallel(srcs...)
						}
					default:
						var h *store.Counting
						if h, err = s.Counting(n); err == nil {
							err = h.LoadParallel(srcs...)
						}
					}
					return err
				})
				if err == nil {
					for _, k := range ks {
						f.Keys[k] = true
					}
				} else {
					// incomplete: retire it
					run(&op{K: "drop", N: n}, func() error { return s.Drop(n) })
					delete(fl, n)
				}
				fail(err)
			case r < 94: // backup
				nb++
				if nb > 2 {
					return
				}
				to := filepath.Join(filepath.Dir(a.Dir), "backups", fmt.Sprintf("c%d-%d", a.Cycle, nb))
				fail(run(&op{K: "backup", To: to}, func() error { return s.Backup(to) }))
			case r < 99:
				return
			default: // close and reopen
				run(&op{K: "close"}, func() error { return s.Close() })
				reopen()
			}
		}()
	}
}

// addKeys adds ks to filter n of kind kind with AddMany.
func addKeys(s *store.Store, n, kind string, ks []string) error {
	bs := make([][]byte, len(ks))
	for i, k := range ks {
		bs[i] = []byte(k)
	}
	var err error
	switch kind {
	case "bloom":
		var h *store.Bloom
		if h, err = s.Bloom(n); err == nil {
			_, err = h.AddMany(bs)
		}
	case "cuckoo":
		var h *store.Cuckoo
		if h, err = s.Cuckoo(n); err == nil {
			_, err = h.AddMany(bs)
		}
	default:
		var h *store.Counting
		if h, err = s.Counting(n); err == nil {
			_, err = h.AddMany(bs)
		}
	}
	return err
}

// verifyChild opens the crashed store read-only, then as a writer that
// recovers it, checks every acknowledged key both times, runs Check and
// closes; it sends one line per problem and a final "done".
func verifyChild(t *testing.T, a childArgs, w *reporter) {
	var vm verifyModel
	b, err := os.ReadFile(a.Model)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vm); err != nil {
		t.Fatal(err)
	}
	bad := func(format string, args ...any) { w.send(msg{T: "bad", Err: fmt.Sprintf(format, args...)}) }
	check := func(what string, s *store.Store) {
		infos, err := s.List()
		if err != nil {
			bad("%s: List: %v", what, err)
			return
		}
		listed := map[string]store.Info{}
		for _, in := range infos {
			listed[in.Name] = in
			if vm.Want[in.Name] == nil && !slices.Contains(vm.Allowed, in.Name) {
				bad("%s: filter %s (%s, %s) exists, but no acknowledged op left it there", what, in.Name, in.Kind, in.State)
			}
		}
		for _, n := range sortedKeys(vm.Want) {
			f := vm.Want[n]
			if f.Unsure {
				continue
			}
			in, ok := listed[n]
			if !ok {
				bad("%s: filter %s (%s, %d keys) is gone", what, n, f.Kind, len(f.Keys))
				continue
			}
			if in.Kind != f.Kind {
				bad("%s: filter %s is a %s, want %s", what, n, in.Kind, f.Kind)
				continue
			}
			if in.State != "ok" {
				bad("%s: filter %s is %s (%s)", what, n, in.State, in.Reason)
				continue
			}
			ks := make([][]byte, 0, len(f.Keys))
			for k := range f.Keys {
				ks = append(ks, []byte(k))
			}
			slices.SortFunc(ks, func(x, y []byte) int { return string2cmp(x, y) })
			// HasMany for every key, and the single lookups (Has, and
			// Count >= 1) for the first 200.
			var has []bool
			var one func([]byte) bool
			switch f.Kind {
			case "bloom":
				h, err := s.Bloom(n)
				if err != nil {
					bad("%s: %s: %v", what, n, err)
					continue
				}
				has, one = h.HasMany(ks), h.Has
			case "cuckoo":
				h, err := s.Cuckoo(n)
				if err != nil {
					bad("%s: %s: %v", what, n, err)
					continue
				}
				has, one = h.HasMany(ks), func(k []byte) bool { return h.Has(k) && h.Count(k) >= 1 }
			case "counting":
				h, err := s.Counting(n)
				if err != nil {
					bad("%s: %s: %v", what, n, err)
					continue
				}
				has, one = h.HasMany(ks), func(k []byte) bool { return h.Has(k) && h.Count(k) >= 1 }
			}
			for i, k := range ks[:min(200, len(ks))] {
				if has[i] && !one(k) {
					bad("%s: %s %s: key %s: HasMany says present, the single lookup (Has, Count) absent", what, f.Kind, n, k)
				}
			}
			var miss []string
			for i, ok := range has {
				if !ok {
					miss = append(miss, string(ks[i]))
				}
			}
			if len(miss) > 0 {
				bad("%s: I1: %s %s: %d of %d acknowledged keys absent (e.g. %v)", what, f.Kind, n, len(miss), len(ks), miss[:min(5, len(miss))])
			}
		}
	}
	if _, err := os.Stat(filepath.Join(a.Dir, "catalog.db")); err != nil {
		// The power failed before the first Open made the store: a
		// read-only Open finds no store, rightly.
		w.send(msg{T: "note", Err: "no catalog.db: " + err.Error()})
	} else if ro, err := store.Open(a.Dir, &store.Options{ReadOnly: true}); err != nil {
		bad("read-only open: %v (corrupt %v)", err, errors.Is(err, store.ErrCorrupt))
	} else {
		check("read-only", ro)
		ro.Close()
	}
	if vm.ReadOnlyOnly {
		w.send(msg{T: "done"})
		return
	}
	s, err := store.Open(a.Dir, openOpts(a))
	if err != nil {
		bad("writer open: %v (corrupt %v)", err, errors.Is(err, store.ErrCorrupt))
		w.send(msg{T: "done"})
		return
	}
	check("writer", s)
	if rep, err := s.Check(); err != nil {
		bad("Check: %v (%+v)", err, rep)
		if infos, err := s.List(); err == nil {
			for _, in := range infos {
				bad("  filter %s: %s %s (%s) layers %d items %d", in.Name, in.Kind, in.State, in.Reason, in.Layers, in.Items)
			}
		}
	}
	if err := s.Close(); err != nil {
		bad("close: %v", err)
	}
	w.send(msg{T: "done"})
}

func keyCount(km *sync.Mutex, f *filt) int {
	km.Lock()
	defer km.Unlock()
	return len(f.Keys)
}

func string2cmp(x, y []byte) int {
	switch {
	case string(x) < string(y):
		return -1
	case string(x) > string(y):
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
