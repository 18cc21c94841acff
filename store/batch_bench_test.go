package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/filterstore/filterstore/wal"
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

// BenchmarkBatchBehindEngineLog is the write path of the pebble example's
// batch mode without pebble: 16 goroutines each put a key as one Batch (a
// Bloom and a cuckoo add, SyncAlways) and then as one record of a second
// SyncAlways wal.Log in another directory, standing for the engine's own
// log; "engine-only" writes the engine record alone. Both logs fsync on
// the same disk, so a put costs two syncs where the engine alone costs
// one: the ratio of the two puts/s is bounded by the records per sync the
// two logs reach, which the fsyncs/put metrics show.
func BenchmarkBatchBehindEngineLog(b *testing.B) {
	for _, withFilters := range []bool{false, true} {
		name := map[bool]string{false: "engine-only", true: "batch"}[withFilters]
		b.Run(name, func(b *testing.B) {
			engine, err := wal.Open(b.TempDir(), wal.Options{Sync: wal.SyncAlways})
			if err != nil {
				b.Fatal(err)
			}
			defer engine.Close()
			s, err := Open(b.TempDir(), &Options{Sync: SyncAlways})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			capacity := uint64(b.N) + 1024
			bl, err := s.CreateBloom("seen", BloomConfig{Capacity: capacity})
			if err != nil {
				b.Fatal(err)
			}
			c, err := s.CreateCuckoo("live", CuckooConfig{Capacity: capacity})
			if err != nil {
				b.Fatal(err)
			}
			before, engineBefore := s.log.Stats(), engine.Stats()
			value := make([]byte, 120)
			var next atomic.Uint64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > uint64(b.N) {
							return
						}
						if withFilters {
							bt := s.NewBatch()
							bt.BloomAdd(bl, benchKey(i))
							bt.CuckooAdd(c, benchKey(i))
							if _, err := bt.Commit(); err != nil {
								b.Error(err)
								return
							}
						}
						lsn, err := engine.Append(value)
						if err == nil {
							err = engine.WaitDurable(lsn)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			perSecond(b, float64(b.N), "puts/s")
			b.ReportMetric(float64(s.log.Stats().Syncs-before.Syncs)/float64(b.N), "store-fsyncs/put")
			b.ReportMetric(float64(engine.Stats().Syncs-engineBefore.Syncs)/float64(b.N), "engine-fsyncs/put")
		})
	}
}
