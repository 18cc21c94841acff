package wal

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAppendWaitDurable measures Append+WaitDurable of 128-byte
// payloads on the real file system (OSFS in a temporary directory), from 1,
// 16 and 64 goroutines, under SyncAlways and SyncInterval. records/s is the
// acknowledged throughput, records/sync the group-commit factor.
func BenchmarkAppendWaitDurable(b *testing.B) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		for _, g := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%v/goroutines=%d", mode, g), func(b *testing.B) {
				benchAppend(b, mode, g)
			})
		}
	}
}

func benchAppend(b *testing.B, mode SyncMode, goroutines int) {
	l, err := Open(b.TempDir(), Options{Sync: mode, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := make([]byte, 128)
	before := l.Stats()
	var left atomic.Int64
	left.Store(int64(b.N))
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				lsn, err := l.Append(payload)
				if err == nil {
					err = l.WaitDurable(lsn)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	st := l.Stats()
	syncs := st.Syncs - before.Syncs
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(syncs), "syncs")
	if syncs > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs), "records/sync")
	}
}
