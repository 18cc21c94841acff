package blackbox_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

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

// Info.BitsPerKey: "the bits of the data pages (whole 4 KiB pages, as the
// files hold them ...) over Items". For a small Bloom filter that is more
// than the geometry's bits (Fill.Total) over Items: its last page is
// partly unused.
func TestBitsPerKeyDefinition(t *testing.T) {
	s, _ := newStore(t, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 1000})
	_, err := b.AddMany(keys("i", 500))
	must(t, err)
	in, _ := b.Info()
	fi, _ := b.Fill()
	pages := (fi.Total + 32767) / 32768 // bits of whole 4 KiB pages
	if want := float64(pages*32768) / float64(in.Items); in.BitsPerKey != want {
		t.Errorf("Info.BitsPerKey %.3f, want the data pages' %d bits / Items %d = %.3f", in.BitsPerKey, pages*32768, in.Items, want)
	}
}
