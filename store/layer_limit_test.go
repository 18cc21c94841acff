package store

import (
	"errors"
	"testing"
)

// TestScalableChainEndIsFull: a scalable Bloom filter with Expansion 1
// halves its error rate per layer until no layer can have it (layer 54
// at capacity 3), before it has the most layers. The add that needs that
// layer, and AddMany, fail with ErrFull, as at the most layers, not with
// ErrInvalid, which blamed valid arguments; the store goes on.
func TestScalableChainEndIsFull(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: -1})
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 3, Expansion: 1})
	must(t, err)
	var addErr error
	i := 0
	for ; i < 10_000 && addErr == nil; i++ {
		_, addErr = b.Add(key(i))
	}
	if !errors.Is(addErr, ErrFull) || errors.Is(addErr, ErrInvalid) {
		t.Fatalf("add %d, at %d layers: %v, want ErrFull", i-1, mustInfo(t, b).Layers, addErr)
	}
	if _, err := b.AddMany([][]byte{key(i)}); !errors.Is(err, ErrFull) || errors.Is(err, ErrInvalid) {
		t.Fatalf("AddMany on the full chain: %v, want ErrFull", err)
	}
	for j := range i - 1 {
		if !b.Has(key(j)) {
			t.Fatalf("key %d absent", j)
		}
	}
	must(t, second(s.CreateBitmap("m", 64)))
}
