package blackbox_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// Options: "SyncEvery ... checked in either mode: must be 1ms..1h",
// "CheckpointBytes ... must be at least 64 KiB", "SegmentSize ... must be at
// least 64 KiB", "CheckpointEvery ... a positive one must be at least 1ms",
// "validates every field and reports all problems at once".
func TestOptionsValidation(t *testing.T) {
	cases := []struct {
		name string
		o    store.Options
	}{
		{"SyncEvery too small", store.Options{SyncEvery: time.Microsecond}},
		{"SyncEvery too large", store.Options{SyncEvery: 2 * time.Hour}},
		{"SyncEvery negative", store.Options{SyncEvery: -time.Second}},
		{"SyncEvery too small under SyncInterval", store.Options{Sync: store.SyncInterval, SyncEvery: time.Microsecond}},
		{"CheckpointBytes too small", store.Options{CheckpointBytes: 1000}},
		{"CheckpointBytes negative", store.Options{CheckpointBytes: -1}},
		{"SegmentSize too small", store.Options{SegmentSize: 4096}},
		{"CheckpointEvery tiny positive", store.Options{CheckpointEvery: time.Microsecond}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := c.o
			s, err := store.Open(dir, &o)
			if err == nil {
				s.Close()
				t.Fatalf("Open accepted %+v", c.o)
			}
			wantIs(t, "Open", err, store.ErrInvalid)
		})
	}
	// Boundaries accepted.
	dir := t.TempDir()
	s, err := store.Open(dir, &store.Options{SyncEvery: time.Millisecond, CheckpointBytes: 64 << 10, SegmentSize: 64 << 10, CheckpointEvery: time.Millisecond})
	must(t, err)
	must(t, s.Close())
	s, err = store.Open(dir, &store.Options{SyncEvery: time.Hour, CheckpointEvery: -1})
	must(t, err)
	must(t, s.Close())

	// All problems at once: the message names each field.
	_, err = store.Open(t.TempDir(), &store.Options{SyncEvery: time.Microsecond, CheckpointBytes: 1, SegmentSize: 1})
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, f := range []string{"SyncEvery", "CheckpointBytes", "SegmentSize"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s (doc: reports all problems at once)", err, f)
		}
	}
}

// An unknown SyncMode value: the doc lists two modes; any other should be
// refused as a bad option.
func TestOptionsUnknownSyncMode(t *testing.T) {
	s, err := store.Open(t.TempDir(), &store.Options{Sync: store.SyncMode(99)})
	if err == nil {
		s.Close()
		t.Fatal("Open accepted Sync: 99")
	}
	wantIs(t, "Open(Sync 99)", err, store.ErrInvalid)
}

// MaxNameLen: "the longest filter name, in bytes: 200"; "A name no filter
// could have is ErrInvalid, as for Bloom, Drop and the other calls that take
// a name; a missing name is ErrNotFound".
func TestNames(t *testing.T) {
	s, _ := newStore(t, nil)
	long := strings.Repeat("n", store.MaxNameLen)
	if _, err := s.CreateBloom(long, store.BloomConfig{}); err != nil {
		t.Errorf("name of MaxNameLen bytes refused: %v", err)
	}
	tooLong := long + "x"
	_, err := s.CreateBloom(tooLong, store.BloomConfig{})
	wantIs(t, "CreateBloom(201 bytes)", err, store.ErrInvalid)
	_, err = s.Bloom(tooLong)
	wantIs(t, "Bloom(201 bytes)", err, store.ErrInvalid)
	wantIs(t, "Drop(201 bytes)", s.Drop(tooLong), store.ErrInvalid)
	_, err = s.CheckFilter(tooLong)
	wantIs(t, "CheckFilter(201 bytes)", err, store.ErrInvalid)
	_, err = s.CreateBloom("", store.BloomConfig{})
	wantIs(t, "CreateBloom(\"\")", err, store.ErrInvalid)
	_, err = s.Bloom("")
	wantIs(t, "Bloom(\"\")", err, store.ErrInvalid)
	_, err = s.Bloom("missing")
	wantIs(t, "Bloom(missing)", err, store.ErrNotFound)
	_, err = s.CheckFilter("missing")
	wantIs(t, "CheckFilter(missing)", err, store.ErrNotFound)
	wantIs(t, "Drop(missing)", s.Drop("missing"), store.ErrNotFound)
	wantIs(t, "Rename(missing)", s.Rename("missing", "x"), store.ErrNotFound)
	wantIs(t, "Rename(missing, same)", s.Rename("missing", "missing"), store.ErrNotFound)
	_, err = s.CreateCuckoo(tooLong, store.CuckooConfig{})
	wantIs(t, "CreateCuckoo(201 bytes)", err, store.ErrInvalid)
	_, err = s.CreateCounting(tooLong, store.BloomConfig{})
	wantIs(t, "CreateCounting(201 bytes)", err, store.ErrInvalid)
	_, err = s.CreateBitmap(tooLong, 10)
	wantIs(t, "CreateBitmap(201 bytes)", err, store.ErrInvalid)
	_, err = s.EnsureBloom(tooLong, store.BloomConfig{})
	wantIs(t, "EnsureBloom(201 bytes)", err, store.ErrInvalid)
	f, err := s.CreateBloom("ok", store.BloomConfig{})
	must(t, err)
	_ = f
	wantIs(t, "Rename(ok, 201 bytes)", s.Rename("ok", tooLong), store.ErrInvalid)
	wantIs(t, "Rename(ok, \"\")", s.Rename("ok", ""), store.ErrInvalid)
	wantIs(t, "Import(201 bytes)", s.Import(tooLong, strings.NewReader("")), store.ErrInvalid)
}

// Names with '/', NUL, "." and "..", and multi-byte UTF-8: the doc defines
// no character set (only MaxNameLen). Whatever is accepted must round-trip
// through Close/Open; whatever is refused must be ErrInvalid.
func TestNameCharacters(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	names := []string{"a/b", "a\x00b", ".", "..", "über", "sp ace", "\xff\xfe", "a\nb", strings.Repeat("é", 100)}
	accepted := map[string]bool{}
	for _, n := range names {
		b, err := s.CreateBloom(n, store.BloomConfig{})
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("CreateBloom(%q): %v, want ErrInvalid if refused", n, err)
			}
			t.Logf("refused %q: %v", n, err)
			continue
		}
		accepted[n] = true
		if _, err := b.Add([]byte("k")); err != nil {
			t.Errorf("Add to %q: %v", n, err)
		}
	}
	must(t, s.Close())
	s = openStore(t, dir, nil)
	defer s.Close()
	for n := range accepted {
		b, err := s.Bloom(n)
		if err != nil {
			t.Errorf("reopen Bloom(%q): %v", n, err)
			continue
		}
		if !b.Has([]byte("k")) {
			t.Errorf("%q lost its key", n)
		}
	}
	t.Logf("accepted: %v", accepted)
}

// BloomConfig: "ErrorRate is the target false-positive rate, in (0, 1)";
// "Expansion ... 1..64"; zero fields take defaults (Capacity 100, ErrorRate
// 0.01, Expansion 2).
func TestBloomConfigValidation(t *testing.T) {
	s, _ := newStore(t, nil)
	bad := []store.BloomConfig{
		{ErrorRate: math.NaN()},
		{ErrorRate: -0.1},
		{ErrorRate: 1},
		{ErrorRate: 1.5},
		{ErrorRate: math.Inf(1)},
		{Expansion: 65},
	}
	for i, cfg := range bad {
		_, err := s.CreateBloom("b", cfg)
		wantIs(t, "CreateBloom "+strings.TrimSpace(strings.ReplaceAll(fmtCfg(cfg), "\n", " ")), err, store.ErrInvalid)
		_, err = s.CreateCounting("c", cfg)
		if i < 5 { // counting ignores Expansion
			wantIs(t, "CreateCounting "+fmtCfg(cfg), err, store.ErrInvalid)
		}
		if _, err := s.Bloom("b"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused create left a filter: %v", err)
		}
	}
	b, err := s.CreateBloom("defaults", store.BloomConfig{})
	must(t, err)
	in, err := b.Info()
	must(t, err)
	if in.Capacity != 100 || in.ErrorRate != 0.01 || in.Expansion != 2 || in.NonScaling || in.Kind != "bloom" || in.State != "ok" || in.Layers != 1 || in.Name != "defaults" {
		t.Errorf("defaults Info = %+v, want capacity 100, rate 0.01, expansion 2", in)
	}
	b, err = s.CreateBloom("exp64", store.BloomConfig{Expansion: 64})
	must(t, err)
	in, _ = b.Info()
	if in.Expansion != 64 {
		t.Errorf("Expansion 64: Info %d", in.Expansion)
	}
}

func fmtCfg(c store.BloomConfig) string {
	return strings.Join([]string{"rate", ftoa(c.ErrorRate), "exp", itoa(uint64(c.Expansion))}, " ")
}

func ftoa(f float64) string { return strings.TrimRight(strings.TrimRight(sprintf("%g", f), "0"), ".") }
func itoa(u uint64) string  { return sprintf("%d", u) }

// A huge Capacity: the doc promises no particular error, but a create must
// either succeed or fail with ErrInvalid / ENOSPC-like error, not panic, and
// leave nothing behind.
func TestBloomHugeCapacity(t *testing.T) {
	s, _ := newStore(t, nil)
	for _, c := range []uint64{1 << 62, math.MaxUint64} {
		_, err := s.CreateBloom("huge", store.BloomConfig{Capacity: c, NonScaling: true})
		if err == nil {
			t.Fatalf("capacity %d accepted", c)
		}
		t.Logf("capacity %d: %v", c, err)
		if _, err := s.Bloom("huge"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("failed create left a filter: %v", err)
		}
	}
	// The store goes on.
	if _, err := s.CreateBloom("after", store.BloomConfig{}); err != nil {
		t.Fatal(err)
	}
}

// CuckooConfig: BucketSize 1..16, FingerprintBits 4..16 with
// BucketSize*FingerprintBits <= 64, MaxIterations 0..65535, Expansion 1..64.
func TestCuckooConfigValidation(t *testing.T) {
	s, _ := newStore(t, nil)
	bad := []store.CuckooConfig{
		{BucketSize: 17},
		{BucketSize: -1},
		{FingerprintBits: 3},
		{FingerprintBits: 17},
		{FingerprintBits: -4},
		{BucketSize: 8, FingerprintBits: 16},
		{MaxIterations: 65536},
		{MaxIterations: -1},
		{Expansion: 65},
	}
	for _, cfg := range bad {
		_, err := s.CreateCuckoo("c", cfg)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateCuckoo(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
	good := []store.CuckooConfig{
		{BucketSize: 16, FingerprintBits: 4},
		{BucketSize: 4, FingerprintBits: 16},
		{BucketSize: 1, FingerprintBits: 4},
		{MaxIterations: 65535},
		{Expansion: 64},
	}
	for i, cfg := range good {
		if _, err := s.CreateCuckoo(sprintf("g%d", i), cfg); err != nil {
			t.Errorf("CreateCuckoo(%+v): %v", cfg, err)
		}
	}
	c, err := s.CreateCuckoo("defaults", store.CuckooConfig{})
	must(t, err)
	in, _ := c.Info()
	// "Default 1024", "Default 1 (layers of the first's size)".
	if in.Capacity < 1024 || in.Expansion != 1 || in.NonScaling || in.Kind != "cuckoo" || in.ErrorRate != 0 {
		t.Errorf("cuckoo defaults Info = %+v", in)
	}
	c, err = s.CreateCuckoo("ns", store.CuckooConfig{NonScaling: true, Expansion: 4})
	must(t, err)
	in, _ = c.Info()
	if !in.NonScaling || in.Expansion != 0 {
		t.Errorf("NonScaling cuckoo: Info NonScaling %v Expansion %d, doc: Info reports 0", in.NonScaling, in.Expansion)
	}
}

// CreateBitmap: "creates a bitmap of bits bits (1..2^40)".
func TestBitmapSizeValidation(t *testing.T) {
	s, _ := newStore(t, nil)
	_, err := s.CreateBitmap("z", 0)
	wantIs(t, "CreateBitmap(0)", err, store.ErrInvalid)
	_, err = s.CreateBitmap("big", 1<<40+1)
	wantIs(t, "CreateBitmap(2^40+1)", err, store.ErrInvalid)
	m, err := s.CreateBitmap("one", 1)
	must(t, err)
	if m.Bits() != 1 {
		t.Errorf("Bits = %d", m.Bits())
	}
	_, err = s.EnsureBitmap("z2", 0)
	wantIs(t, "EnsureBitmap(0)", err, store.ErrInvalid)
}

// Create of an existing name is ErrExists (any kind); lookup of another kind
// is ErrWrongKind.
func TestExistsAndWrongKind(t *testing.T) {
	s, _ := newStore(t, nil)
	_, err := s.CreateBloom("x", store.BloomConfig{})
	must(t, err)
	_, err = s.CreateBloom("x", store.BloomConfig{})
	wantIs(t, "CreateBloom dup", err, store.ErrExists)
	_, err = s.CreateCuckoo("x", store.CuckooConfig{})
	wantIs(t, "CreateCuckoo dup", err, store.ErrExists)
	_, err = s.CreateCounting("x", store.BloomConfig{})
	wantIs(t, "CreateCounting dup", err, store.ErrExists)
	_, err = s.CreateBitmap("x", 8)
	wantIs(t, "CreateBitmap dup", err, store.ErrExists)
	_, err = s.Cuckoo("x")
	wantIs(t, "Cuckoo(bloom)", err, store.ErrWrongKind)
	_, err = s.Counting("x")
	wantIs(t, "Counting(bloom)", err, store.ErrWrongKind)
	_, err = s.Bitmap("x")
	wantIs(t, "Bitmap(bloom)", err, store.ErrWrongKind)
	_, err = s.EnsureCounting("x", store.BloomConfig{})
	wantIs(t, "EnsureCounting(bloom)", err, store.ErrWrongKind)
	_, err = s.EnsureBitmap("x", 8)
	wantIs(t, "EnsureBitmap(bloom)", err, store.ErrWrongKind)
	_, err = s.EnsureCuckoo("x", store.CuckooConfig{})
	wantIs(t, "EnsureCuckoo(bloom)", err, store.ErrWrongKind)
}
