package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/internal/smaps"

	panmari "github.com/panmari/cuckoofilter"
	seiflotfy "github.com/seiflotfy/cuckoofilter"
)

// TestLibs builds every adapter over 20000 keys and checks that it finds
// every key it accepted, that its measured false-positive rate is below
// 3% (every library targets 1%, seiflotfy's fixed 8-bit fingerprints give
// about 2.5%), and that its size is plausible.
func TestLibs(t *testing.T) {
	const n, seed = 20000, 7
	t.Logf("seed %d", seed)
	keys := NewKeys(n, seed, 1)
	miss := NewKeys(n, seed, 2)
	for _, lib := range Libs() {
		t.Run(lib.Name, func(t *testing.T) {
			f, err := lib.New(Config{N: n, FPR: 0.01, Dir: filepath.Join(t.TempDir(), "store")})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			failed, err := Build(f, keys)
			if err != nil {
				t.Fatal(err)
			}
			if failed != 0 {
				t.Fatalf("%d adds failed", failed)
			}
			for i := range keys.Len() {
				if !f.Has(keys.At(i)) {
					t.Fatalf("key %d not found", i)
				}
			}
			if b, ok := f.(Batcher); ok {
				for i, v := range b.HasMany(keys.Slices(), nil) {
					if !v {
						t.Fatalf("HasMany: key %d not found", i)
					}
				}
			}
			fp := 0
			for i := range miss.Len() {
				if f.Has(miss.At(i)) {
					fp++
				}
			}
			if rate := float64(fp) / n; rate > 0.03 {
				t.Errorf("FPR %.4f", rate)
			}
			if bpk := f.BitsPerKey(); bpk < 8 || bpk > 40 {
				t.Errorf("bits/key %.2f", bpk)
			}
		})
	}
}

func TestPeerSizes(t *testing.T) {
	for _, n := range []uint64{1, 3, 1000, 1 << 20, 1<<20 - 1, 1_000_000, 1_007_000} {
		if got, want := PanmariBits(n), uint64(8*len(panmari.NewFilter(uint(n)).Encode())); got != want {
			t.Errorf("PanmariBits(%d) = %d, Encode has %d bits", n, got, want)
		}
		if got, want := SeiflotfyBits(n), uint64(8*len(seiflotfy.NewFilter(uint(n)).Encode())); got != want {
			t.Errorf("SeiflotfyBits(%d) = %d, Encode has %d bits", n, got, want)
		}
	}
}

func TestCuckooShape(t *testing.T) {
	for _, c := range []struct {
		fpr  float64
		b, f int
	}{{0.01, 5, 10}, {0.001, 4, 13}, {1e-9, 4, 16}} {
		if b, f := CuckooShape(c.fpr); b != c.b || f != c.f {
			t.Errorf("CuckooShape(%g) = %d, %d; want %d, %d", c.fpr, b, f, c.b, c.f)
		}
	}
}

func TestKeys(t *testing.T) {
	a, b := NewKeys(100, 1, 1), NewKeys(100, 1, 1)
	c := NewKeys(100, 1, 2)
	for i := range a.Len() {
		if !bytes.Equal(a.At(i), b.At(i)) {
			t.Fatal("same seed, different keys")
		}
		if bytes.Equal(a.At(i), c.At(i)) {
			t.Fatal("two streams gave the same key")
		}
	}
	if a.Len() != 100 || len(a.At(99)) != KeySize || cap(a.At(0)) != KeySize {
		t.Fatal("bad key shape")
	}
}

// TestMemory: every adapter that implements Memory shows memory of the
// size its bits/key gives (within the headers and padding of a store's
// file and of aligned words), holding the filter's data (some word
// nonzero once keys are added), for fs-bloom, blobloom, panmari and the
// store at least (a peer that renamed its unexported slice would return
// nil; the store's adapters only where /proc/self/smaps can be read),
// also when the store's directory is reached through a symbolic link,
// as smaps names the file by its real path; and LineReads reads it.
func TestMemory(t *testing.T) {
	const n, seed = 200000, 7
	keys := NewKeys(n, seed, 1)
	_, smapsErr := smaps.Read()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, lib := range Libs() {
		t.Run(lib.Name, func(t *testing.T) {
			f, err := lib.New(Config{N: n, FPR: 0.01, Dir: filepath.Join(link, lib.Name, "store")})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := Build(f, keys); err != nil {
				t.Fatal(err)
			}
			m, ok := f.(Memory)
			if !ok {
				return
			}
			mem := m.Memory()
			if mem == nil && smapsErr != nil && strings.HasPrefix(lib.Name, "fs-store") {
				t.Skipf("no /proc/self/smaps to find the store's mapping in: %v", smapsErr)
			}
			want := f.BitsPerKey() * n / 8
			if got := float64(len(mem)); got < want || got > want+64<<10 {
				t.Fatalf("Memory: %d bytes, want %.0f to 64 KiB more", len(mem), want)
			}
			if !slices.ContainsFunc(mem, func(b byte) bool { return b != 0 }) {
				t.Fatalf("Memory: %d bytes, all zero after %d keys were added", len(mem), n)
			}
			for _, chained := range []bool{false, true} {
				if ns := LineReads(mem, 1000, seed, chained); ns <= 0 {
					t.Fatalf("LineReads(chained %v) = %v ns", chained, ns)
				}
			}
			shown[lib.Name] = true
		})
	}
	want := []string{"fs-bloom", "fs-bloom-owned", "blobloom", "panmari", "fs-cuckoo-f16"}
	if smapsErr == nil {
		want = append(want, "fs-store-bloom", "fs-store-cuckoo")
	}
	for _, name := range want {
		if !shown[name] {
			t.Errorf("%s shows no memory", name)
		}
	}
}
