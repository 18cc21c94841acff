package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The package's promise is "bad input gets a clear error naming what was
// wrong; no panic from any input", and a handle is input: a nil pointer,
// or a pointer to a zero value that no Open, Create, Ensure or lookup
// made. As a nil *os.File's methods return os.ErrInvalid, every exported
// method of *Store, *Bloom, *Cuckoo, *Counting, *Bitmap and *Batch called
// on such a handle returns an error wrapping ErrInvalid that names the
// handle's type, or, where it returns no error, the safe answer: "maybe
// present" (true; math.MaxUint64 for a cuckoo or counting Count) for a
// lookup, as a closed filter answers, and zero for a size or counter.

// nilCall is one exported method called on a nil or zero handle, with
// harmless arguments. call returns "" if the answer is the one expected,
// else what is wrong with it.
type nilCall struct {
	name string
	call func() string
}

// nilPanics are the methods documented to panic on a nil or zero handle:
// the single lookups, inlined into their callers, which a check would
// slow (with one, BenchmarkLookup's in-cache lookups took 1.07-1.12x the
// time, four alternated runs). The test fails if one of them panics no
// more (the docs would be wrong) or if any other method panics.
var nilPanics = map[string]bool{
	"Bloom.Has": true, "Bloom.HasHash": true,
	"Cuckoo.Has": true, "Cuckoo.HasHash": true,
	"Counting.Has": true, "Counting.HasHash": true,
}

// wantInvalid checks err, the error of a call on a nil or zero handle of
// type typ (any type if typ is ""), and zero, whether the call's other
// results are zero values.
func wantInvalid(typ string, err error, zero bool) string {
	switch {
	case err == nil:
		return "no error"
	case !errors.Is(err, ErrInvalid):
		return "error does not wrap ErrInvalid: " + err.Error()
	case !strings.Contains(err.Error(), "nil or zero "+typ):
		return "error does not name the nil or zero " + typ + " handle: " + err.Error()
	case !zero:
		return "non-zero results beside the error"
	}
	return ""
}

func wantTrue(ok bool) string {
	if !ok {
		return `answered false ("absent"), want true ("maybe present")`
	}
	return ""
}

// wantAllTrue checks a batched lookup's answers for n keys.
func wantAllTrue(res []bool, n int) string {
	if len(res) != n || slices.Contains(res, false) {
		return fmt.Sprintf("answered %v for %d keys, want every answer true", res, n)
	}
	return ""
}

func wantZero[T comparable](got, want T) string {
	if got != want {
		return "answered a value other than the safe one"
	}
	return ""
}

func isZero(v any) bool { return reflect.ValueOf(v).IsZero() }

// Harmless arguments.
var (
	nilKey  = []byte("k")
	nilKeys = [][]byte{nilKey}
	nilHs   = []uint64{Hash(nilKey)}
	nilOffs = []uint64{0}
)

func bloomNilCalls(f *Bloom) []nilCall {
	const typ = "Bloom"
	return []nilCall{
		{"Add", func() string { ok, err := f.Add(nilKey); return wantInvalid(typ, err, !ok) }},
		{"AddHash", func() string { ok, err := f.AddHash(1); return wantInvalid(typ, err, !ok) }},
		{"AddMany", func() string { r, err := f.AddMany(nilKeys); return wantInvalid(typ, err, r == nil) }},
		{"AddManyHash", func() string { r, err := f.AddManyHash(nilHs); return wantInvalid(typ, err, r == nil) }},
		{"Card", func() string { return wantZero(f.Card(), 0) }},
		{"Fill", func() string { in, err := f.Fill(); return wantInvalid(typ, err, isZero(in)) }},
		{"Has", func() string { return wantTrue(f.Has(nilKey)) }},
		{"HasHash", func() string { return wantTrue(f.HasHash(1)) }},
		{"HasMany", func() string { return wantAllTrue(f.HasMany(nilKeys), 1) }},
		{"HasManyHash", func() string { return wantAllTrue(f.HasManyHash(nilHs), 1) }},
		{"HasManyHashInto", func() string { return wantAllTrue(f.HasManyHashInto(make([]bool, 0, 4), nilHs), 1) }},
		{"HasManyInto", func() string { return wantAllTrue(f.HasManyInto(nil, nilKeys), 1) }},
		{"Info", func() string { in, err := f.Info(); return wantInvalid(typ, err, isZero(in)) }},
		{"Load", func() string { return wantInvalid(typ, f.Load(Keys(slices.Values(nilKeys))), true) }},
		{"LoadParallel", func() string {
			return wantInvalid(typ, f.LoadParallel(Keys(slices.Values(nilKeys)), Keys(slices.Values(nilKeys))), true)
		}},
		{"WriteTo", func() string { n, err := f.WriteTo(io.Discard); return wantInvalid(typ, err, n == 0) }},
	}
}

func cuckooNilCalls(f *Cuckoo) []nilCall {
	const typ = "Cuckoo"
	return []nilCall{
		{"Add", func() string { return wantInvalid(typ, f.Add(nilKey), true) }},
		{"AddHash", func() string { return wantInvalid(typ, f.AddHash(1), true) }},
		{"AddMany", func() string { n, err := f.AddMany(nilKeys); return wantInvalid(typ, err, n == 0) }},
		{"AddManyHash", func() string { n, err := f.AddManyHash(nilHs); return wantInvalid(typ, err, n == 0) }},
		{"AddNX", func() string { ok, err := f.AddNX(nilKey); return wantInvalid(typ, err, !ok) }},
		{"AddNXHash", func() string { ok, err := f.AddNXHash(1); return wantInvalid(typ, err, !ok) }},
		{"Count", func() string { return wantZero(f.Count(nilKey), uint64(math.MaxUint64)) }},
		{"CountHash", func() string { return wantZero(f.CountHash(1), uint64(math.MaxUint64)) }},
		{"Delete", func() string { ok, err := f.Delete(nilKey); return wantInvalid(typ, err, !ok) }},
		{"DeleteHash", func() string { ok, err := f.DeleteHash(1); return wantInvalid(typ, err, !ok) }},
		{"DeleteMany", func() string { r, err := f.DeleteMany(nilKeys); return wantInvalid(typ, err, r == nil) }},
		{"DeleteManyHash", func() string { r, err := f.DeleteManyHash(nilHs); return wantInvalid(typ, err, r == nil) }},
		{"Fill", func() string { in, err := f.Fill(); return wantInvalid(typ, err, isZero(in)) }},
		{"Has", func() string { return wantTrue(f.Has(nilKey)) }},
		{"HasHash", func() string { return wantTrue(f.HasHash(1)) }},
		{"HasMany", func() string { return wantAllTrue(f.HasMany(nilKeys), 1) }},
		{"HasManyHash", func() string { return wantAllTrue(f.HasManyHash(nilHs), 1) }},
		{"HasManyHashInto", func() string { return wantAllTrue(f.HasManyHashInto(make([]bool, 0, 4), nilHs), 1) }},
		{"HasManyInto", func() string { return wantAllTrue(f.HasManyInto(nil, nilKeys), 1) }},
		{"Info", func() string { in, err := f.Info(); return wantInvalid(typ, err, isZero(in)) }},
		{"Items", func() string { return wantZero(f.Items(), 0) }},
		{"Load", func() string { return wantInvalid(typ, f.Load(Keys(slices.Values(nilKeys))), true) }},
		{"LoadParallel", func() string {
			return wantInvalid(typ, f.LoadParallel(Keys(slices.Values(nilKeys)), Keys(slices.Values(nilKeys))), true)
		}},
		{"WriteTo", func() string { n, err := f.WriteTo(io.Discard); return wantInvalid(typ, err, n == 0) }},
	}
}

func countingNilCalls(f *Counting) []nilCall {
	const typ = "Counting"
	return []nilCall{
		{"Add", func() string { return wantInvalid(typ, f.Add(nilKey), true) }},
		{"AddHash", func() string { return wantInvalid(typ, f.AddHash(1), true) }},
		{"AddMany", func() string { n, err := f.AddMany(nilKeys); return wantInvalid(typ, err, n == 0) }},
		{"AddManyHash", func() string { n, err := f.AddManyHash(nilHs); return wantInvalid(typ, err, n == 0) }},
		{"Count", func() string { return wantZero(f.Count(nilKey), uint64(math.MaxUint64)) }},
		{"CountHash", func() string { return wantZero(f.CountHash(1), uint64(math.MaxUint64)) }},
		{"Delete", func() string { ok, err := f.Delete(nilKey); return wantInvalid(typ, err, !ok) }},
		{"DeleteHash", func() string { ok, err := f.DeleteHash(1); return wantInvalid(typ, err, !ok) }},
		{"DeleteMany", func() string { r, err := f.DeleteMany(nilKeys); return wantInvalid(typ, err, r == nil) }},
		{"DeleteManyHash", func() string { r, err := f.DeleteManyHash(nilHs); return wantInvalid(typ, err, r == nil) }},
		{"Fill", func() string { in, err := f.Fill(); return wantInvalid(typ, err, isZero(in)) }},
		{"Has", func() string { return wantTrue(f.Has(nilKey)) }},
		{"HasHash", func() string { return wantTrue(f.HasHash(1)) }},
		{"HasMany", func() string { return wantAllTrue(f.HasMany(nilKeys), 1) }},
		{"HasManyHash", func() string { return wantAllTrue(f.HasManyHash(nilHs), 1) }},
		{"HasManyHashInto", func() string { return wantAllTrue(f.HasManyHashInto(make([]bool, 0, 4), nilHs), 1) }},
		{"HasManyInto", func() string { return wantAllTrue(f.HasManyInto(nil, nilKeys), 1) }},
		{"Info", func() string { in, err := f.Info(); return wantInvalid(typ, err, isZero(in)) }},
		{"Items", func() string { return wantZero(f.Items(), 0) }},
		{"Load", func() string { return wantInvalid(typ, f.Load(Keys(slices.Values(nilKeys))), true) }},
		{"LoadParallel", func() string {
			return wantInvalid(typ, f.LoadParallel(Keys(slices.Values(nilKeys)), Keys(slices.Values(nilKeys))), true)
		}},
		{"WriteTo", func() string { n, err := f.WriteTo(io.Discard); return wantInvalid(typ, err, n == 0) }},
	}
}

func bitmapNilCalls(f *Bitmap) []nilCall {
	const typ = "Bitmap"
	return []nilCall{
		{"Bits", func() string { return wantZero(f.Bits(), 0) }},
		{"Clear", func() string { ok, err := f.Clear(0); return wantInvalid(typ, err, !ok) }},
		{"ClearMany", func() string { r, err := f.ClearMany(nilOffs); return wantInvalid(typ, err, r == nil) }},
		{"Count", func() string { return wantZero(f.Count(), 0) }},
		{"Fill", func() string { in, err := f.Fill(); return wantInvalid(typ, err, isZero(in)) }},
		{"Get", func() string { return wantTrue(f.Get(0)) }},
		{"GetMany", func() string { return wantAllTrue(f.GetMany(nilOffs), 1) }},
		{"Info", func() string { in, err := f.Info(); return wantInvalid(typ, err, isZero(in)) }},
		{"Set", func() string { ok, err := f.Set(0); return wantInvalid(typ, err, !ok) }},
		{"SetMany", func() string { r, err := f.SetMany(nilOffs); return wantInvalid(typ, err, r == nil) }},
		{"WriteTo", func() string { n, err := f.WriteTo(io.Discard); return wantInvalid(typ, err, n == 0) }},
	}
}

// batchNilCalls adds ops of nil filter handles (a Store's batch fails
// those: TestBatchFailsWhole) to bt, nil or zero: a nil batch takes none,
// and the Commit and Encode of either fail with the batch's own error
// first.
func batchNilCalls(bt *Batch) []nilCall {
	const typ = "Batch"
	add := func(fn func()) func() string {
		return func() string {
			fn()
			if bt == nil {
				return wantZero(bt.Len(), 0)
			}
			return ""
		}
	}
	return []nilCall{
		{"BitmapClear", add(func() { bt.BitmapClear(nil, 0) })},
		{"BitmapSet", add(func() { bt.BitmapSet(nil, 0) })},
		{"BloomAdd", add(func() { bt.BloomAdd(nil, nilKey) })},
		{"BloomAddHash", add(func() { bt.BloomAddHash(nil, 1) })},
		{"Commit", func() string { r, err := bt.Commit(); return wantInvalid(typ, err, r == nil) }},
		{"CountingAdd", add(func() { bt.CountingAdd(nil, nilKey) })},
		{"CountingAddHash", add(func() { bt.CountingAddHash(nil, 1) })},
		{"CountingDelete", add(func() { bt.CountingDelete(nil, nilKey) })},
		{"CountingDeleteHash", add(func() { bt.CountingDeleteHash(nil, 1) })},
		{"CuckooAdd", add(func() { bt.CuckooAdd(nil, nilKey) })},
		{"CuckooAddHash", add(func() { bt.CuckooAddHash(nil, 1) })},
		{"CuckooDelete", add(func() { bt.CuckooDelete(nil, nilKey) })},
		{"CuckooDeleteHash", add(func() { bt.CuckooDeleteHash(nil, 1) })},
		{"Encode", func() string { r, err := bt.Encode(); return wantInvalid(typ, err, r == nil) }},
		{"Len", add(func() {})},
	}
}

// storeNilCalls calls every method of a nil or zero Store; dir is a
// directory Backup may write to.
func storeNilCalls(s *Store, dir string) []nilCall {
	const typ = "Store"
	var cfg BloomConfig
	return []nilCall{
		{"AbortExternal", func() string { return wantInvalid(typ, s.AbortExternal(nil), true) }},
		{"ApplyExternal", func() string { r, err := s.ApplyExternal(nil); return wantInvalid(typ, err, r == nil) }},
		{"Backup", func() string { return wantInvalid(typ, s.Backup(dir), true) }},
		{"Bitmap", func() string { f, err := s.Bitmap("x"); return wantInvalid(typ, err, f == nil) }},
		{"Bloom", func() string { f, err := s.Bloom("x"); return wantInvalid(typ, err, f == nil) }},
		{"Check", func() string { r, err := s.Check(); return wantInvalid(typ, err, r == nil) }},
		{"CheckFilter", func() string { r, err := s.CheckFilter("f"); return wantInvalid(typ, err, r == nil) }},
		{"Checkpoint", func() string { return wantInvalid(typ, s.Checkpoint(), true) }},
		{"Close", func() string { return wantInvalid(typ, s.Close(), true) }},
		{"Counting", func() string { f, err := s.Counting("x"); return wantInvalid(typ, err, f == nil) }},
		{"CreateBitmap", func() string { f, err := s.CreateBitmap("x", 8); return wantInvalid(typ, err, f == nil) }},
		{"CreateBloom", func() string { f, err := s.CreateBloom("x", cfg); return wantInvalid(typ, err, f == nil) }},
		{"CreateCounting", func() string { f, err := s.CreateCounting("x", cfg); return wantInvalid(typ, err, f == nil) }},
		{"CreateCuckoo", func() string { f, err := s.CreateCuckoo("x", CuckooConfig{}); return wantInvalid(typ, err, f == nil) }},
		{"Cuckoo", func() string { f, err := s.Cuckoo("x"); return wantInvalid(typ, err, f == nil) }},
		{"Drop", func() string { return wantInvalid(typ, s.Drop("x"), true) }},
		{"EnsureBitmap", func() string { f, err := s.EnsureBitmap("x", 8); return wantInvalid(typ, err, f == nil) }},
		{"EnsureBloom", func() string { f, err := s.EnsureBloom("x", cfg); return wantInvalid(typ, err, f == nil) }},
		{"EnsureCounting", func() string { f, err := s.EnsureCounting("x", cfg); return wantInvalid(typ, err, f == nil) }},
		{"EnsureCuckoo", func() string { f, err := s.EnsureCuckoo("x", CuckooConfig{}); return wantInvalid(typ, err, f == nil) }},
		{"ExternalDurable", func() string { return wantZero(s.ExternalDurable(), 0) }},
		{"ID", func() string { return wantZero(s.ID(), 0) }},
		{"Import", func() string { return wantInvalid(typ, s.Import("x", bytes.NewReader(nil)), true) }},
		{"List", func() string { r, err := s.List(); return wantInvalid(typ, err, r == nil) }},
		{"NewBatch", func() string {
			// The batch of a nil Store is a Batch without a store: its
			// error names the Batch; a zero Store's names the Store.
			r, err := s.NewBatch().Commit()
			return wantInvalid("", err, r == nil)
		}},
		{"Rename", func() string { return wantInvalid(typ, s.Rename("x", "y"), true) }},
		{"Stats", func() string { return wantZero(s.Stats(), Stats{}) }},
	}
}

// runNilCalls runs every call, each on its own goroutine with a recover
// and a time limit, and returns the names of those that panicked or did
// not return, and what was wrong with the answers of the others.
func runNilCalls(calls []nilCall) (panicked, wrong []string) {
	for _, c := range calls {
		done := make(chan string, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- "panic"
				}
			}()
			if msg := c.call(); msg != "" {
				done <- msg
				return
			}
			done <- ""
		}()
		select {
		case msg := <-done:
			switch msg {
			case "":
			case "panic":
				panicked = append(panicked, c.name)
			default:
				wrong = append(wrong, c.name+": "+msg)
			}
		case <-time.After(10 * time.Second):
			panicked = append(panicked, c.name+" (did not return)")
		}
	}
	return panicked, wrong
}

// exportedMethods returns the names of the exported methods of v's type.
func exportedMethods(v any) []string {
	t := reflect.TypeOf(v)
	names := make([]string, t.NumMethod())
	for i := range names {
		names[i] = t.Method(i).Name
	}
	return names
}

func TestNilAndZeroHandles(t *testing.T) {
	type handleCase struct {
		typ        string
		recv       any // for the method list
		nil0, zero []nilCall
	}
	dir := t.TempDir()
	cases := []handleCase{
		{"Store", (*Store)(nil), storeNilCalls(nil, dir+"/nil"), storeNilCalls(&Store{}, dir+"/zero")},
		{"Bloom", (*Bloom)(nil), bloomNilCalls(nil), bloomNilCalls(&Bloom{})},
		{"Cuckoo", (*Cuckoo)(nil), cuckooNilCalls(nil), cuckooNilCalls(&Cuckoo{})},
		{"Counting", (*Counting)(nil), countingNilCalls(nil), countingNilCalls(&Counting{})},
		{"Bitmap", (*Bitmap)(nil), bitmapNilCalls(nil), bitmapNilCalls(&Bitmap{})},
		{"Batch", (*Batch)(nil), batchNilCalls(nil), batchNilCalls(&Batch{})},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			// Every exported method is called: a new one needs a call
			// here.
			var called []string
			for _, nc := range c.nil0 {
				called = append(called, nc.name)
			}
			methods := exportedMethods(c.recv)
			sort.Strings(called)
			if !slices.Equal(called, methods) {
				t.Errorf("calls %v, want one per exported method %v", called, methods)
			}
			for _, v := range []struct {
				what  string
				calls []nilCall
			}{{"nil", c.nil0}, {"zero", c.zero}} {
				panicked, wrong := runNilCalls(v.calls)
				var failing []string
				for _, name := range panicked {
					if !nilPanics[c.typ+"."+name] {
						failing = append(failing, name)
					}
				}
				if len(failing) > 0 {
					t.Errorf("%s *%s: %d methods panic: %s", v.what, c.typ, len(failing), strings.Join(failing, ", "))
				}
				for _, m := range methods {
					if nilPanics[c.typ+"."+m] && !slices.Contains(panicked, m) {
						t.Errorf("%s *%s: %s, documented to panic, did not", v.what, c.typ, m)
					}
				}
				for _, w := range wrong {
					t.Errorf("%s *%s: %s", v.what, c.typ, w)
				}
			}
		})
	}
}
