package store

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
)

// advSparseMapper is the OS mapper, except that it creates a layer file
// of more than 1 GiB sparse (header written, size set, no block
// allocated) and maps it with Open: a test cannot allocate the hundreds of
// GiB such a layer takes, and needs only its first pages. Every other
// file, and every Create the OS mapper refuses, goes through mmapbits.OS.
type advSparseMapper struct{ mmapbits.OS }

func (m advSparseMapper) Create(path string, h mmapbits.Header) (mmapbits.Region, error) {
	if h.Validate() != nil || h.DataPages < 1<<18 {
		return m.OS.Create(path, h)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.WriteAt(h.Append(nil), 0); err != nil {
		return nil, err
	}
	if err := f.Truncate(h.FileSize()); err != nil {
		return nil, err
	}
	return m.OS.Open(path)
}

// TestGrowPastLayerFilePagesIsFull: bloom.Plan accepts up to
// bloom.MaxBlocks (2^40 blocks, 2^34 pages) but a layer file holds at most
// mmapbits.MaxDataPages (2^32 pages). A scalable chain whose next layer
// plans between the two: Add's doc says the add that needs a layer "whose
// tightened error rate or expanded capacity no layer can have" fails
// with ErrFull (the filter is full; ErrFull's doc: "a next layer that
// cannot be planned"), as TestScalableChainEndIsFull checks for the
// rate's end. Here the add fails with ErrInvalid instead, blaming valid
// arguments, and naming no field ("header data pages ... out of range").
func TestGrowPastLayerFilePagesIsFull(t *testing.T) {
	// The smallest first layer whose 64x next layer has more pages than a
	// file may hold.
	cfg := bloom.Config{Capacity: 1 << 30, ErrorRate: 0.01, Expansion: 64}
	for {
		_, _, g1, err := bloom.LayerParams(cfg, 1)
		if err != nil {
			t.Fatalf("layer 1 of %+v: %v", cfg, err)
		}
		if mmapbits.PagesFor(g1.Words()) > mmapbits.MaxDataPages {
			break
		}
		cfg.Capacity += cfg.Capacity / 8
	}
	_, _, g0, _ := bloom.LayerParams(cfg, 0)
	_, _, g1, _ := bloom.LayerParams(cfg, 1)
	t.Logf("capacity %d: layer 0 %d pages (sparse here), layer 1 %d blocks (bloom.MaxBlocks %d), %d pages (mmapbits.MaxDataPages %d)",
		cfg.Capacity, mmapbits.PagesFor(g0.Words()), g1.Blocks, uint64(bloom.MaxBlocks), mmapbits.PagesFor(g1.Words()), uint64(mmapbits.MaxDataPages))

	opts := &Options{CheckpointEvery: -1}
	opts.mapper = advSparseMapper{}
	s := mustOpen(t, t.TempDir(), opts)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: cfg.Capacity, ErrorRate: cfg.ErrorRate, Expansion: 64})
	must(t, err)
	must(t, second(b.Add(key(0))))
	// The first layer holds its capacity (as after that many adds).
	(*b.layers.Load())[0].SetCount(cfg.Capacity)

	_, addErr := b.Add(key(1))
	_, manyErr := b.AddMany([][]byte{key(2)})
	for what, err := range map[string]error{"Add": addErr, "AddMany": manyErr} {
		if !errors.Is(err, ErrFull) || errors.Is(err, ErrInvalid) {
			t.Errorf("%s that needs layer 1 (%d pages, more than a layer file holds): %v, want ErrFull (the chain cannot grow), not ErrInvalid", what, mmapbits.PagesFor(g1.Words()), err)
		}
	}
	if !b.Has(key(0)) {
		t.Fatal("key 0 absent")
	}
}

// TestCreatePastLayerFilePagesNamesCapacity: ErrInvalid's doc: "a bad
// name, configuration or argument; the message names the field". A
// Bloom, counting or cuckoo capacity that Plan accepts but whose layer is
// more pages than a file holds is refused with ErrInvalid whose message
// named only the file header ("header data pages N out of range"), not
// the capacity that asked for it.
func TestCreatePastLayerFilePagesNamesCapacity(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: -1})
	defer s.Close()
	for what, err := range map[string]error{
		"bloom":    second(s.CreateBloom("b", BloomConfig{Capacity: 1 << 44})),
		"counting": second(s.CreateCounting("n", BloomConfig{Capacity: 1 << 42})),
		"cuckoo":   second(s.CreateCuckoo("c", CuckooConfig{Capacity: 1 << 50})),
	} {
		if !errors.Is(err, ErrInvalid) || !strings.Contains(strings.ToLower(err.Error()), "capacity") {
			t.Errorf("%s of a capacity whose layer no file can hold: %v, want ErrInvalid naming the capacity", what, err)
		}
	}
}
