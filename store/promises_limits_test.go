package store_test

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
	"github.com/filterstore/filterstore/wal"
)

func openPromise(t *testing.T, dir string, o *store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(dir, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// TestPromiseOptionsLimits: every documented Options limit, at and past it.
func TestPromiseOptionsLimits(t *testing.T) {
	type c struct {
		name string
		o    store.Options
		ok   bool
	}
	cases := []c{
		{"SyncEvery=1ms", store.Options{SyncEvery: time.Millisecond}, true},
		{"SyncEvery=1ms-1", store.Options{SyncEvery: time.Millisecond - 1}, false},
		{"SyncEvery=1h", store.Options{SyncEvery: time.Hour}, true},
		{"SyncEvery=1h+1", store.Options{SyncEvery: time.Hour + 1}, false},
		{"SyncEvery=-1", store.Options{SyncEvery: -1}, false},
		{"SyncEvery=minInt", store.Options{SyncEvery: math.MinInt64}, false},
		{"SyncEvery=maxInt", store.Options{SyncEvery: math.MaxInt64}, false},
		{"Sync=-1", store.Options{Sync: -1}, false},
		{"Sync=2", store.Options{Sync: 2}, false},
		{"CheckpointBytes=64K", store.Options{CheckpointBytes: 64 << 10}, true},
		{"CheckpointBytes=64K-1", store.Options{CheckpointBytes: 64<<10 - 1}, false},
		{"CheckpointBytes=-1", store.Options{CheckpointBytes: -1}, false},
		{"CheckpointBytes=minInt", store.Options{CheckpointBytes: math.MinInt64}, false},
		{"CheckpointBytes=maxInt", store.Options{CheckpointBytes: math.MaxInt64}, true},
		{"CheckpointEvery=1ms", store.Options{CheckpointEvery: time.Millisecond}, true},
		{"CheckpointEvery=1ms-1", store.Options{CheckpointEvery: time.Millisecond - 1}, false},
		{"CheckpointEvery=1ns", store.Options{CheckpointEvery: 1}, false},
		{"CheckpointEvery=-1", store.Options{CheckpointEvery: -1}, true},
		{"CheckpointEvery=minInt", store.Options{CheckpointEvery: math.MinInt64}, true},
		{"CheckpointEvery=maxInt", store.Options{CheckpointEvery: math.MaxInt64}, true},
		{"SegmentSize=64K", store.Options{SegmentSize: 64 << 10}, true},
		{"SegmentSize=64K-1", store.Options{SegmentSize: 64<<10 - 1}, false},
		{"SegmentSize=-1", store.Options{SegmentSize: -1}, false},
		{"SegmentSize=Max", store.Options{SegmentSize: wal.MaxSegmentSize}, true},
		{"SegmentSize=Max+1", store.Options{SegmentSize: wal.MaxSegmentSize + 1}, false},
		{"SegmentSize=maxInt", store.Options{SegmentSize: math.MaxInt64}, false},
	}
	for _, ro := range []bool{false, true} {
		base := filepath.Join(t.TempDir(), "s")
		s0 := openPromise(t, base, nil)
		if err := s0.Close(); err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			o := tc.o
			o.ReadOnly = ro
			dir := filepath.Join(t.TempDir(), "s")
			if ro {
				dir = base
			}
			s, err := store.Open(dir, &o)
			if tc.ok {
				if err != nil {
					t.Errorf("ro=%v %s: Open: %v, want success", ro, tc.name, err)
					continue
				}
				if !ro {
					b, err := s.CreateBloom("b", store.BloomConfig{})
					if err != nil {
						t.Errorf("%s: create: %v", tc.name, err)
					} else if _, err := b.Add([]byte("k")); err != nil {
						t.Errorf("%s: add: %v", tc.name, err)
					}
				}
				if err := s.Close(); err != nil {
					t.Errorf("ro=%v %s: Close: %v", ro, tc.name, err)
				}
				continue
			}
			if err == nil {
				s.Close()
				t.Errorf("ro=%v %s: Open succeeded, want ErrInvalid", ro, tc.name)
				continue
			}
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("ro=%v %s: Open: %v, want ErrInvalid", ro, tc.name, err)
			}
		}
	}
}

// TestPromiseBloomConfigLimits: BloomConfig at and past its limits, for Bloom
// and counting filters, plain and Ensure.
func TestPromiseBloomConfigLimits(t *testing.T) {
	s := openPromise(t, t.TempDir(), &store.Options{CheckpointEvery: -1})
	defer s.Close()
	type c struct {
		name    string
		cfg     store.BloomConfig
		bloomOK bool
		countOK bool
	}
	cases := []c{
		{"rate NaN", store.BloomConfig{ErrorRate: math.NaN()}, false, false},
		{"rate +Inf", store.BloomConfig{ErrorRate: math.Inf(1)}, false, false},
		{"rate -Inf", store.BloomConfig{ErrorRate: math.Inf(-1)}, false, false},
		{"rate 1", store.BloomConfig{ErrorRate: 1}, false, false},
		{"rate -0.1", store.BloomConfig{ErrorRate: -0.1}, false, false},
		{"rate -0", store.BloomConfig{ErrorRate: math.Copysign(0, -1)}, true, true}, // -0 == 0: default
		{"rate 1-eps", store.BloomConfig{ErrorRate: math.Nextafter(1, 0)}, true, true},
		{"rate smallest", store.BloomConfig{ErrorRate: math.SmallestNonzeroFloat64}, false, false},
		{"rate 1e-300", store.BloomConfig{ErrorRate: 1e-300}, false, false},
		{"cap maxuint", store.BloomConfig{Capacity: math.MaxUint64}, false, false},
		{"cap maxuint/2", store.BloomConfig{Capacity: math.MaxUint64 / 2}, false, false},
		{"cap 1", store.BloomConfig{Capacity: 1}, true, true},
		{"exp 64", store.BloomConfig{Expansion: 64}, true, true},
		{"exp 65", store.BloomConfig{Expansion: 65}, false, true},
		{"exp 2^32+2", store.BloomConfig{Expansion: 1<<32 + 2}, false, true},
		{"exp maxuint", store.BloomConfig{Expansion: math.MaxUint}, false, true},
		{"nonscaling exp 65", store.BloomConfig{Expansion: 65, NonScaling: true}, false, true},
	}
	for i, tc := range cases {
		for _, kind := range []string{"bloom", "counting", "ensurebloom", "ensurecounting"} {
			name := tc.name + ":" + kind
			var err error
			switch kind {
			case "bloom":
				_, err = s.CreateBloom(name, tc.cfg)
			case "counting":
				_, err = s.CreateCounting(name, tc.cfg)
			case "ensurebloom":
				_, err = s.EnsureBloom(name, tc.cfg)
			case "ensurecounting":
				_, err = s.EnsureCounting(name, tc.cfg)
			}
			ok := tc.bloomOK
			if strings.Contains(kind, "counting") {
				ok = tc.countOK
			}
			if ok && err != nil {
				t.Errorf("case %d %s: %v, want success", i, name, err)
			}
			if !ok && !errors.Is(err, store.ErrInvalid) {
				t.Errorf("case %d %s: %v, want ErrInvalid", i, name, err)
			}
			if err == nil {
				if inf, ierr := s.List(); ierr == nil {
					for _, in := range inf {
						if in.Name == name && kind == "bloom" && in.Expansion != 0 && uint64(in.Expansion) != uint64(max(tc.cfg.Expansion, 0)) && tc.cfg.Expansion != 0 {
							t.Errorf("%s: Info.Expansion %d, config %d", name, in.Expansion, tc.cfg.Expansion)
						}
					}
				}
			}
		}
	}
}

// TestPromiseCuckooConfigLimits: CuckooConfig fields at and past their limits.
func TestPromiseCuckooConfigLimits(t *testing.T) {
	s := openPromise(t, t.TempDir(), &store.Options{CheckpointEvery: -1})
	defer s.Close()
	type c struct {
		name string
		cfg  store.CuckooConfig
		ok   bool
	}
	cases := []c{
		{"b=-1", store.CuckooConfig{BucketSize: -1}, false},
		{"b=1", store.CuckooConfig{BucketSize: 1}, true},
		{"b=16 f=4", store.CuckooConfig{BucketSize: 16, FingerprintBits: 4}, true},
		{"b=16 f=5", store.CuckooConfig{BucketSize: 16, FingerprintBits: 5}, false},
		{"b=17 f=4", store.CuckooConfig{BucketSize: 17, FingerprintBits: 4}, false},
		{"b=minint", store.CuckooConfig{BucketSize: math.MinInt}, false},
		{"b=2^32+4", store.CuckooConfig{BucketSize: 1<<32 + 4}, false},
		{"f=-1", store.CuckooConfig{FingerprintBits: -1}, false},
		{"f=3", store.CuckooConfig{FingerprintBits: 3}, false},
		{"f=17 b=1", store.CuckooConfig{FingerprintBits: 17, BucketSize: 1}, false},
		{"f=2^32+16", store.CuckooConfig{FingerprintBits: 1<<32 + 16}, false},
		{"f=4 b=1", store.CuckooConfig{FingerprintBits: 4, BucketSize: 1}, true},
		{"iter=-1", store.CuckooConfig{MaxIterations: -1}, false},
		{"iter=1", store.CuckooConfig{MaxIterations: 1}, true},
		{"iter=65535", store.CuckooConfig{MaxIterations: 65535}, true},
		{"iter=65536", store.CuckooConfig{MaxIterations: 65536}, false},
		{"iter=2^32+5", store.CuckooConfig{MaxIterations: 1<<32 + 5}, false},
		{"exp=64", store.CuckooConfig{Expansion: 64}, true},
		{"exp=65", store.CuckooConfig{Expansion: 65}, false},
		{"exp=2^32+1", store.CuckooConfig{Expansion: 1<<32 + 1}, false},
		{"nonscaling exp=65", store.CuckooConfig{Expansion: 65, NonScaling: true}, true}, // "Expansion is then ignored"
		{"cap maxuint", store.CuckooConfig{Capacity: math.MaxUint64}, false},
		{"cap maxuint/2", store.CuckooConfig{Capacity: math.MaxUint64 / 2}, false},
		{"cap 1", store.CuckooConfig{Capacity: 1}, true},
	}
	for i, tc := range cases {
		for _, ensure := range []bool{false, true} {
			name := tc.name
			var err error
			var f *store.Cuckoo
			if ensure {
				name += ":ensure"
				f, err = s.EnsureCuckoo(name, tc.cfg)
			} else {
				f, err = s.CreateCuckoo(name, tc.cfg)
			}
			if tc.ok && err != nil {
				t.Errorf("case %d %s: %v, want success", i, name, err)
			}
			if !tc.ok && !errors.Is(err, store.ErrInvalid) {
				t.Errorf("case %d %s: %v, want ErrInvalid", i, name, err)
			}
			if err == nil && f != nil {
				if err := f.Add([]byte("k")); err != nil {
					t.Errorf("%s: add: %v", name, err)
				}
				if !f.Has([]byte("k")) {
					t.Errorf("%s: false negative", name)
				}
				in, _ := f.Info()
				if tc.cfg.NonScaling && in.Expansion != 0 {
					t.Errorf("%s: NonScaling Info.Expansion = %d, doc says 0", name, in.Expansion)
				}
			}
		}
	}
}

// TestPromiseBitmapLimits: CreateBitmap 1..2^40; offsets at the end.
func TestPromiseBitmapLimits(t *testing.T) {
	s := openPromise(t, t.TempDir(), &store.Options{CheckpointEvery: -1})
	defer s.Close()
	for _, bits := range []uint64{0, 1<<40 + 1, math.MaxUint64} {
		if _, err := s.CreateBitmap("x", bits); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateBitmap(%d): %v, want ErrInvalid", bits, err)
		}
		if _, err := s.EnsureBitmap("x", bits); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("EnsureBitmap(%d): %v, want ErrInvalid", bits, err)
		}
	}
	for _, bits := range []uint64{1, 63, 64, 65, 4096*8 + 1} {
		name := "bm" + strings.Repeat("x", int(bits%7))
		name = name + string(rune('a'+bits%26))
		bm, err := s.CreateBitmap(name+time.Now().String(), bits)
		if err != nil {
			t.Fatalf("CreateBitmap(%d): %v", bits, err)
		}
		if _, err := bm.Set(bits - 1); err != nil {
			t.Errorf("Set(last=%d): %v", bits-1, err)
		}
		for _, off := range []uint64{bits, bits + 1, math.MaxUint64} {
			if _, err := bm.Set(off); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("bits %d Set(%d): %v, want ErrInvalid", bits, off, err)
			}
			if _, err := bm.Clear(off); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("bits %d Clear(%d): %v, want ErrInvalid", bits, off, err)
			}
			res, err := bm.SetMany([]uint64{0, off})
			if !errors.Is(err, store.ErrInvalid) || len(res) != 1 {
				t.Errorf("bits %d SetMany(0,%d): %v %v, want 1 answer + ErrInvalid", bits, off, res, err)
			}
			if bm.Get(off) != true && bm.Get(off) != false {
			}
			bt := s.NewBatch()
			bt.BitmapSet(bm, off)
			if _, err := bt.Commit(); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("batch set %d: %v, want ErrInvalid", off, err)
			}
		}
		want := uint64(2)
		if bits == 1 {
			want = 1
		}
		if bm.Count() != want {
			t.Errorf("bits %d: Count %d, want %d", bits, bm.Count(), want)
		}
	}
}

// TestPromiseNames: the name rule, 1-200 bytes of valid UTF-8, no NUL, no '/',
// for every call taking a name.
func TestPromiseNames(t *testing.T) {
	dir := t.TempDir()
	s := openPromise(t, dir, &store.Options{CheckpointEvery: -1})
	bad := []string{"", strings.Repeat("a", 201), "a/b", "/", "a\x00b", "\xff", "a\xc3", strings.Repeat("a", 199) + "é"}
	good := []string{strings.Repeat("a", 200), ".", "..", "a\nb", "\t", " ", "a\\b", "*", "-x", "é" + strings.Repeat("a", 198), "\u202e", "\x1b[31mred", "%s%d", "\r", "a\x7fb"}
	if _, err := s.CreateBloom("existing", store.BloomConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range bad {
		calls := map[string]error{}
		_, calls["CreateBloom"] = s.CreateBloom(n, store.BloomConfig{})
		_, calls["CreateCuckoo"] = s.CreateCuckoo(n, store.CuckooConfig{})
		_, calls["CreateCounting"] = s.CreateCounting(n, store.BloomConfig{})
		_, calls["CreateBitmap"] = s.CreateBitmap(n, 10)
		_, calls["EnsureBloom"] = s.EnsureBloom(n, store.BloomConfig{})
		_, calls["EnsureBitmap"] = s.EnsureBitmap(n, 10)
		calls["RenameTo"] = s.Rename("existing", n)
		calls["Import"] = s.Import(n, strings.NewReader(""))
		for call, err := range calls {
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s(%q): %v, want ErrInvalid", call, n, err)
			}
		}
		// Lookups of a bad name: ErrInvalid or ErrNotFound are both sane; must not succeed.
		if _, err := s.Bloom(n); err == nil {
			t.Errorf("Bloom(%q) succeeded", n)
		}
		if err := s.Drop(n); err == nil {
			t.Errorf("Drop(%q) succeeded", n)
		}
		if err := s.Rename(n, "zzz"); err == nil {
			t.Errorf("Rename(%q, zzz) succeeded", n)
		}
	}
	for _, n := range good {
		if _, err := s.CreateBloom(n, store.BloomConfig{}); err != nil {
			t.Errorf("CreateBloom(%q): %v", n, err)
		}
		if _, err := s.CreateBloom(n, store.BloomConfig{}); !errors.Is(err, store.ErrExists) {
			t.Errorf("CreateBloom(%q) twice: %v, want ErrExists", n, err)
		}
		if _, err := s.CreateBitmap(n, 5); !errors.Is(err, store.ErrExists) {
			t.Errorf("CreateBitmap(%q) over a bloom: %v, want ErrExists", n, err)
		}
		if _, err := s.EnsureCuckoo(n, store.CuckooConfig{}); !errors.Is(err, store.ErrWrongKind) {
			t.Errorf("EnsureCuckoo(%q) over a bloom: %v, want ErrWrongKind", n, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openPromise(t, dir, nil)
	defer s.Close()
	for _, n := range good {
		if _, err := s.Bloom(n); err != nil {
			t.Errorf("after reopen Bloom(%q): %v", n, err)
		}
	}
	ro := openPromise(t, dir, &store.Options{ReadOnly: true})
	defer ro.Close()
	for _, n := range good {
		if _, err := ro.Bloom(n); err != nil {
			t.Errorf("read-only Bloom(%q): %v", n, err)
		}
	}
}
