package bloom

import (
	"flag"
	"math/bits"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/filterstore/filterstore/internal/prefetch"
)

var boundMiB = flag.Int("bound.mib", 512, "BenchmarkScalingBound: the array's size in MiB")

var (
	boundMu    sync.Mutex
	boundWords []uint64
)

// BenchmarkScalingBound is what the machine gives a parallel build's
// memory side, with no filter code: GOMAXPROCS goroutines each own an
// equal range of one array of 64-byte blocks (-bound.mib, 512 by default;
// a counting filter of 1e8 keys at 1% is 495 MB, a Bloom filter 124 MB)
// and update random blocks of it, each block's line prefetched one batch
// of batchSize ahead as a Builder lane's addOwned does, with six 4-bit
// increments a block (a counting add at 1% changes six counters). The
// array is written once before the timer starts, so no page fault is
// timed. ns/op is per block update, over all goroutines. Run it with
// -test.cpu 1,2,1,2 and compare the entries of one run: the ratio bounds
// what two lanes can gain over one on this machine.
//
//	go test -run '^$' -bench '^BenchmarkScalingBound$' -benchtime 100000000x -cpu 1,2,1,2,1,2 ./bloom/
//
// (add -args -bound.mib=128 for another size)
func BenchmarkScalingBound(b *testing.B) {
	boundMu.Lock()
	n := uint64(*boundMiB) << 20 / 8
	if uint64(len(boundWords)) != n {
		boundWords = make([]uint64, n)
		for i := range boundWords {
			boundWords[i] = uint64(i)
		}
	}
	words := boundWords
	boundMu.Unlock()
	procs := runtime.GOMAXPROCS(0)
	blocks := uint64(len(words)) / BlockWords
	per := blocks / uint64(procs)
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range procs {
		ops := b.N / procs
		if p < b.N%procs {
			ops++
		}
		wg.Go(func() {
			boundLane(words[uint64(p)*per*BlockWords:][:per*BlockWords], per, uint64(p)+1, ops)
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(procs), "procs")
}

// boundLane makes ops random block updates in words (blocks blocks), as
// BenchmarkScalingBound describes, drawing from a splitmix64 stream.
func boundLane(words []uint64, blocks, seed uint64, ops int) {
	base := unsafe.Pointer(unsafe.SliceData(words))
	next := func() uint64 {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	var blks [2][batchSize]*[BlockWords]uint64
	var draws [2][batchSize]uint64
	var lines [batchSize]unsafe.Pointer
	fill := func(c int) {
		for j := range batchSize {
			x := next()
			hi, _ := bits.Mul64(x, blocks)
			p := unsafe.Add(base, hi*BlockWords*8)
			blks[c][j], draws[c][j], lines[j] = (*[BlockWords]uint64)(p), x, p
		}
		prefetch.Lines(lines[:])
	}
	cur := 0
	fill(cur)
	for done := 0; done < ops; done += batchSize {
		fill(1 - cur)
		for j := range min(batchSize, ops-done) {
			blk, d := blks[cur][j], draws[cur][j]
			for range 6 {
				blk[d&(BlockWords-1)] += 1 << (d >> 3 & 15 * 4)
				d >>= 7
			}
		}
		cur = 1 - cur
	}
}
