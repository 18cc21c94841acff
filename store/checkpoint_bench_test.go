package store

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// BenchmarkCheckpoint measures a checkpoint after 1000 adds to a Bloom
// filter of each capacity: its cost (msync and data-page checksums) must
// follow the pages the adds changed, not the filter's size: ~1000 4 KiB
// pages with -small.pages, by default the 2 MiB folios holding them
// (Options.SmallPages), at most the whole file. The adds are not timed.
func BenchmarkCheckpoint(b *testing.B) {
	for _, n := range []uint64{1e6, 1e7, 1e8} {
		b.Run(fmt.Sprintf("capacity=%.0e", float64(n)), func(b *testing.B) {
			s, err := Open(b.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1, SmallPages: *smallPages})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			f, err := s.CreateBloom("ckpt", BloomConfig{Capacity: n, ErrorRate: 0.01, NonScaling: true})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Checkpoint(); err != nil {
				b.Fatal(err)
			}
			hs := make([]uint64, 1000)
			var next uint64
			for b.Loop() {
				b.StopTimer()
				for i := range hs {
					var k [8]byte
					binary.LittleEndian.PutUint64(k[:], next)
					next++
					hs[i] = Hash(k[:])
				}
				if _, err := f.AddManyHash(hs); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := s.Checkpoint(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
