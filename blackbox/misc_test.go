package blackbox_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/store"
)

// BloomConfig.Expansion: "Counting filters have one layer and ignore it."
func TestCountingIgnoresExpansion(t *testing.T) {
	s, _ := newStore(t, nil)
	for _, e := range []uint{3, 65, 1000} {
		n, err := s.CreateCounting(sprintf("n%d", e), store.BloomConfig{Expansion: e})
		if err != nil {
			t.Errorf("CreateCounting(Expansion %d): %v (doc: counting filters ignore it)", e, err)
			continue
		}
		in, _ := n.Info()
		t.Logf("counting Expansion %d: Info.Expansion %d", e, in.Expansion)
	}
}

// A bitmap of MaxBits (128 GiB) on a disk with less free space: "one larger
// than the free space is refused before a block is allocated" with ENOSPC;
// nothing is left behind and the store goes on.
func TestHugeBitmapRefusedForSpace(t *testing.T) {
	s, dir := newStore(t, nil)
	var st syscall.Statfs_t
	must(t, syscall.Statfs(dir, &st))
	if free := st.Bavail * uint64(st.Bsize); free > 130<<30 {
		t.Skip("more than 130 GiB free")
	}
	_, err := s.CreateBitmap("huge", 1<<40)
	if err == nil {
		t.Fatal("a 128 GiB bitmap was created")
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("CreateBitmap(2^40) on a small disk: %v, want ENOSPC", err)
	}
	ents, _ := os.ReadDir(dir + "/filters")
	if len(ents) != 0 {
		t.Errorf("refused create left %d files", len(ents))
	}
	if _, err := s.CreateBitmap("small", 10); err != nil {
		t.Errorf("store did not go on: %v", err)
	}
}

// Info.BitsPerKey: "data bits / Items". FillInfo.Total: "bits ... over all
// layers". For a small Bloom filter the two disagree: BitsPerKey counts the
// whole 4 KiB data pages (README: "the data pages' bits over items"), not the
// geometry's bits.
func TestMismatchBitsPerKeyDefinition(t *testing.T) {
	mismatch(t)
	s, _ := newStore(t, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 1000})
	_, err := b.AddMany(keys("i", 500))
	must(t, err)
	in, _ := b.Info()
	fi, _ := b.Fill()
	want := float64(fi.Total) / float64(in.Items)
	if in.BitsPerKey != want {
		t.Errorf("Info.BitsPerKey %.3f, data bits (Fill.Total %d) / Items %d = %.3f", in.BitsPerKey, fi.Total, in.Items, want)
	}
}

// README, "What the figures are": the demo's filter is "capacity 5,200,000
// at the configured rate 0.01: 100,506 blocks of 512 bits, k=6", "1571
// pages", "6,447,104 bytes", and "every run prints the same counts"
// (5,190,073 items, 10,091 false positives, bits/key 9.92). Today's Plan
// sizes that filter at 100,730 blocks, and `go run ./cmd/demo` prints
// 5,190,039 items, 9,815 false positives, 6.5 MB, bits/key 9.94.
func TestMismatchREADMEDemoGeometry(t *testing.T) {
	mismatch(t)
	g, err := bloom.Plan(5_200_000, 0.01)
	must(t, err)
	pages := (g.Blocks*64 + 4095) / 4096
	t.Logf("Plan(5.2e6, 0.01) = %d blocks, k=%d, %d data pages; PlanClassic: %v", g.Blocks, g.K, pages, classic())
	if g.Blocks != 100506 || g.K != 6 || pages != 1571 {
		t.Errorf("README says 100,506 blocks, k=6, 1571 pages; Plan gives %d blocks, k=%d, %d pages", g.Blocks, g.K, pages)
	}
}

func classic() string {
	g, err := bloom.PlanClassic(5_200_000, 0.01)
	if err != nil {
		return err.Error()
	}
	return sprintf("%d blocks, k=%d", g.Blocks, g.K)
}
