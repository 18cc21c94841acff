package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/wal"
)

// TestBloomAddManyMatchesAddLoop: AddMany (pipelined, a chunk of keys at
// a time) answers, sets, counts and logs as a loop of Add on a twin
// filter: keys repeat within and across batches, batches pass chunk
// boundaries, scaling chains grow layers mid-batch (the keys after the
// growth point go to the new layer unless an older one holds them), and a
// NonScaling filter stops mid-batch with ErrFull, answering the keys
// before it. The WAL holds the same hash parts, layer and order for
// both, and the filters match again after recovery from it.
func TestBloomAddManyMatchesAddLoop(t *testing.T) {
	r := testseed.New(t)
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	type twin struct{ many, loop *Bloom }
	var twins []twin
	grewMidBatch, fullMidBatch := 0, 0
	for round := range 8 {
		cfg := BloomConfig{Capacity: uint64(50 + r.IntN(300)), ErrorRate: 0.001 + r.Float64()/20, NonScaling: round%2 == 1}
		many, err := s.CreateBloom(fmt.Sprintf("many-%d", round), cfg)
		must(t, err)
		loop, err := s.CreateBloom(fmt.Sprintf("loop-%d", round), cfg)
		must(t, err)
		twins = append(twins, twin{many, loop})
		pool := int(cfg.Capacity) * 4
		for batch := range 12 {
			keys := make([][]byte, r.IntN(int(cfg.Capacity)*2))
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "r%d-k%d", round, r.IntN(pool))
			}
			before := *many.layers.Load()
			newestBefore := before[len(before)-1].Count()
			got, gotErr := many.AddMany(keys)
			var want []bool
			var wantErr error
			for _, k := range keys {
				added, err := loop.Add(k)
				if err != nil {
					wantErr = err
					break
				}
				want = append(want, added)
			}
			where := fmt.Sprintf("round %d (%+v) batch %d of %d keys", round, cfg, batch, len(keys))
			if !errors.Is(gotErr, ErrFull) && gotErr != nil || !errors.Is(wantErr, ErrFull) && wantErr != nil {
				t.Fatalf("%s: AddMany: %v; Add loop: %v", where, gotErr, wantErr)
			}
			if (gotErr == nil) != (wantErr == nil) || !slices.Equal(got, want) {
				t.Fatalf("%s: AddMany = %d answers, %v; Add loop = %d answers, %v (or the answers differ)",
					where, len(got), gotErr, len(want), wantErr)
			}
			if gotErr != nil && len(got) > 0 && slices.Contains(got, true) {
				fullMidBatch++
			}
			if len(*many.layers.Load()) > len(before) && before[len(before)-1].Count() > newestBefore {
				grewMidBatch++ // keys went to the old newest layer, then to a new one
			}
			sameBlooms(t, where, many, loop)
		}
	}
	t.Logf("%d batches grew a layer midway, %d stopped with ErrFull midway", grewMidBatch, fullMidBatch)
	if grewMidBatch == 0 || fullMidBatch == 0 {
		t.Fatalf("%d batches grew a layer after adding keys, %d stopped with ErrFull after adding keys: want both", grewMidBatch, fullMidBatch)
	}
	// The records: the same hash parts, in order, for each twin.
	parts := map[uint64][][2]uint64{}
	_, err := wal.Scan(format.WALDir(dir), wal.ScanOptions{Live: true}, func(_ wal.Position, p []byte) error {
		rec, err := format.DecodeWALRecord(p)
		if err != nil {
			return err
		}
		for op := range rec.Ops() {
			if op.Op == format.WALOpHash {
				parts[op.FilterID] = append(parts[op.FilterID], [2]uint64{uint64(op.Layer), op.Hash})
			}
		}
		return nil
	})
	must(t, err)
	for i, tw := range twins {
		m, l := parts[tw.many.b.id], parts[tw.loop.b.id]
		if len(m) == 0 || !slices.Equal(m, l) {
			t.Fatalf("round %d: AddMany logged %d hash parts, the Add loop %d (or they differ)", i, len(m), len(l))
		}
	}
	// Recovery from those records.
	s.abandonForTest()
	s = mustOpen(t, dir, nil)
	defer s.Close()
	for i := range twins {
		many, err := s.Bloom(fmt.Sprintf("many-%d", i))
		must(t, err)
		loop, err := s.Bloom(fmt.Sprintf("loop-%d", i))
		must(t, err)
		sameBlooms(t, fmt.Sprintf("round %d after recovery", i), many, loop)
	}
}

// sameBlooms fails t unless a and b have the same layers, counts and
// words.
func sameBlooms(t *testing.T, where string, a, b *Bloom) {
	t.Helper()
	la, lb := *a.layers.Load(), *b.layers.Load()
	if len(la) != len(lb) || a.Card() != b.Card() {
		t.Fatalf("%s: %d layers holding %d, want %d holding %d", where, len(la), a.Card(), len(lb), b.Card())
	}
	for i := range la {
		if la[i].Count() != lb[i].Count() || !slices.Equal(la[i].Words(), lb[i].Words()) {
			t.Fatalf("%s: layer %d: count %d, want %d (or the words differ)", where, i, la[i].Count(), lb[i].Count())
		}
	}
}
