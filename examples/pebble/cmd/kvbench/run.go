package main

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filterstore/filterstore/examples/pebble/kv"
)

// config is what every run shares.
type config struct {
	n          int    // keys put
	g          int    // goroutines
	gets       int    // Gets of present keys
	absentGets int    // Gets of absent keys
	valueSize  int    // bytes per value
	parent     string // of the temporary directories; "" for os.TempDir()
	disk       *disk  // the device holding them; nil if its counters cannot be read

	present [][]byte // the keys put, present[i] by the i-th Put
	absent  [][]byte // keys never put, which the absent Gets cycle through
	order   []int    // indexes into present, the order of the present Gets
	value   []byte
}

// result is one run of one mode.
type result struct {
	putsPerSec    float64
	presentPerSec float64
	absentPerSec  float64
	// absentReads is how many absent Gets read pebble: the filters'
	// false positives; every one in ModePebbleOnly.
	absentReads uint64
	restart     time.Duration // Close, Open, first Get
	open        time.Duration // of which Open and the first Get

	// During the puts: the filter store's fdatasyncs, and the device's
	// counters (valid only if cfg.disk is set and both readings worked).
	filterSyncs uint64
	groups      uint64 // write groups (ModeBatch)
	putTime     time.Duration
	disk        diskCounters
	diskOK      bool
}

// run measures mode in a fresh directory, which it removes.
func run(cfg config, mode kv.Mode) (res result, err error) {
	dir, err := os.MkdirTemp(cfg.parent, "kvbench-"+mode.String()+"-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	opts := &kv.Options{Capacity: uint64(cfg.n)}
	s, err := kv.Open(dir, mode, opts)
	if err != nil {
		return res, err
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()

	syncs, groups := s.Stats().FilterSyncs, s.Stats().Groups
	var before diskCounters
	if cfg.disk != nil {
		var derr error
		before, derr = cfg.disk.read()
		res.diskOK = derr == nil
	}
	d, err := parallel(cfg.g, cfg.n, func(i int) error { return s.Put(cfg.present[i], cfg.value) })
	if err != nil {
		return res, err
	}
	if res.diskOK {
		after, err := cfg.disk.read()
		res.disk, res.diskOK = after.sub(before), err == nil
	}
	res.putsPerSec = float64(cfg.n) / d.Seconds()
	res.putTime = d
	res.filterSyncs = s.Stats().FilterSyncs - syncs
	res.groups = s.Stats().Groups - groups

	d, err = parallel(cfg.g, cfg.gets, func(i int) error {
		k := cfg.present[cfg.order[i]]
		v, found, err := s.Get(k)
		if err == nil && (!found || !bytes.Equal(v, cfg.value)) {
			err = fmt.Errorf("present key %q: found %v, %d-byte value", k, found, len(v))
		}
		return err
	})
	if err != nil {
		return res, err
	}
	res.presentPerSec = float64(cfg.gets) / d.Seconds()

	reads := s.Stats().PebbleReads
	d, err = parallel(cfg.g, cfg.absentGets, func(i int) error {
		k := cfg.absent[i%len(cfg.absent)]
		_, found, err := s.Get(k)
		if err == nil && found {
			err = fmt.Errorf("absent key %q: found, never put", k)
		}
		return err
	})
	if err != nil {
		return res, err
	}
	res.absentPerSec = float64(cfg.absentGets) / d.Seconds()
	res.absentReads = s.Stats().PebbleReads - reads

	start := time.Now()
	err = s.Close()
	s = nil
	if err != nil {
		return res, err
	}
	opened := time.Now()
	if s, err = kv.Open(dir, mode, opts); err != nil {
		return res, err
	}
	if _, found, err := s.Get(cfg.present[0]); err != nil || !found {
		return res, fmt.Errorf("first Get after restart: found %v, %v", found, err)
	}
	res.restart, res.open = time.Since(start), time.Since(opened)
	return res, nil
}

// chunk is how many indexes a goroutine of parallel takes at a time: one
// atomic add per chunk, not per call, so that the counter is not what
// fast calls (a Get the filters answer) wait on.
const chunk = 64

// parallel runs f(0..n-1) on g goroutines, which take the next chunk of
// indexes from a shared counter, and returns the time they took; it stops
// at the first error.
func parallel(g, n int, f func(i int) error) (time.Duration, error) {
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, g)
	start := time.Now()
	for range g {
		wg.Go(func() {
			for !failed.Load() {
				lo := int(next.Add(chunk) - chunk)
				for i := lo; i < min(lo+chunk, n); i++ {
					if err := f(i); err != nil {
						failed.Store(true)
						errs <- err
						return
					}
				}
				if lo+chunk >= n {
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	return d, <-errs
}
