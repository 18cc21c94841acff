package store

import (
	"errors"
	"fmt"
	"testing"
)

// batchBenchOps is how many ops one iteration of BenchmarkBatchCommit
// commits: batchBenchOps/4 on each of four filters, one of each kind.
const batchBenchOps = 16

// BenchmarkBatchCommit measures batchBenchOps changes over four filters
// (Bloom, cuckoo and counting adds, bitmap sets) under SyncAlways, from
// one goroutine: committed as one Batch (one WAL write, one fdatasync),
// and as the same single calls one after another (one of each per op).
// fsyncs/iter shows what the batch saves.
func BenchmarkBatchCommit(b *testing.B) {
	for _, batched := range []bool{true, false} {
		name := map[bool]string{true: "batch", false: "single"}[batched]
		b.Run(fmt.Sprintf("sync=%v/%s/ops=%d", SyncAlways, name, batchBenchOps), func(b *testing.B) {
			s, err := Open(b.TempDir(), &Options{Sync: SyncAlways})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			capacity := uint64(b.N)*batchBenchOps + 1024
			bl, err := s.CreateBloom("b", BloomConfig{Capacity: capacity, NonScaling: true})
			if err != nil {
				b.Fatal(err)
			}
			c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: capacity})
			if err != nil {
				b.Fatal(err)
			}
			n, err := s.CreateCounting("n", BloomConfig{Capacity: capacity})
			if err != nil {
				b.Fatal(err)
			}
			m, err := s.CreateBitmap("m", capacity)
			if err != nil {
				b.Fatal(err)
			}
			before := s.log.Stats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				base := uint64(i) * batchBenchOps / 4
				if batched {
					bt := s.NewBatch()
					for j := range uint64(batchBenchOps / 4) {
						k := benchKey(base + j)
						bt.BloomAdd(bl, k)
						bt.CuckooAdd(c, k)
						bt.CountingAdd(n, k)
						bt.BitmapSet(m, base+j)
					}
					if _, err := bt.Commit(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for j := range uint64(batchBenchOps / 4) {
					k := benchKey(base + j)
					_, err1 := bl.Add(k)
					err2 := c.Add(k)
					err3 := n.Add(k)
					_, err4 := m.Set(base + j)
					if err := errors.Join(err1, err2, err3, err4); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			perSecond(b, float64(b.N)*batchBenchOps, "ops/s")
			reportWAL(b, s, before, float64(b.N), "iter")
		})
	}
}
