package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/filterstore/filterstore/bench"
)

// Metric names, in table column order.
const (
	mNew      = "new ms"
	mBuild    = "build ns/key"
	mHit      = "Has hit ns"
	mMiss     = "Has miss ns"
	mMany     = "HasMany ns/key"
	mBits     = "bits/key"
	mFPR      = "FPR %"
	mFailed   = "failed adds"
	mHitRate  = "hits found %"
	mCreate   = "create ms"
	mLoad     = "Load ns/key"
	mClose    = "close ms"
	mReopen   = "cold reopen ms"
	mReopenMF = "reopen majflt"
	mColdHas  = "cold Has ns"
	mColdMF   = "cold Has majflt"
	mColdMany = "cold HasMany ns/key"
	mManyMF   = "cold HasMany majflt"
	mWarmHas  = "warm Has ns"
)

var libMetrics = []string{mNew, mBuild, mHit, mMiss, mMany, mBits, mFPR, mFailed, mHitRate}
var coldMetrics = []string{mCreate, mLoad, mClose, mReopen, mReopenMF, mColdHas, mColdMF, mColdMany, mManyMF, mWarmHas}

// job is one library (or one cold-store run) measured once per round.
type job struct {
	name string
	lib  bench.Lib // zero for a cold job
	kind string    // cold job: "bloom" or "cuckoo"
}

// sizeResult holds, per job, every round's value of every metric, and the
// page-cache eviction check.
type sizeResult struct {
	jobs    []job
	vals    map[string]map[string][]float64 // job name -> metric -> rounds
	lookups int
	evict   string
	seed    uint64

	ctr     *counters                    // -counters: the events counted, or nil
	tallies map[string]map[string]*tally // job name -> pass -> events over its rounds
}

// count runs pass, adding its events over n operations to job's tally of
// that pass if counters are open.
func (r *sizeResult) count(jobName, pass string, n int, run func()) {
	if r.ctr == nil {
		run()
		return
	}
	before := r.ctr.read()
	run()
	after := r.ctr.read()
	m := r.tallies[jobName]
	if m == nil {
		m = map[string]*tally{}
		r.tallies[jobName] = m
	}
	t := m[pass]
	if t == nil {
		t = &tally{}
		m[pass] = t
	}
	t.add(before, after, n)
}

// counterPasses are the passes a library job counts, in table order.
var counterPasses = []string{"build", "hit", "miss", "HasMany"}

func (r *sizeResult) add(jobName, metric string, v float64) {
	m := r.vals[jobName]
	if m == nil {
		m = map[string][]float64{}
		r.vals[jobName] = m
	}
	m[metric] = append(m[metric], v)
}

// logLast writes the latest round's values of job j to log, so that a run
// cut short still shows what it measured.
func (r *sizeResult) logLast(log io.Writer, j job) {
	metrics := libMetrics
	if j.kind != "" {
		metrics = coldMetrics
	}
	var b strings.Builder
	for _, m := range metrics {
		if vs := r.vals[j.name][m]; len(vs) > 0 {
			fmt.Fprintf(&b, " %s=%s", strings.ReplaceAll(m, " ", "_"), fmt.Sprintf(format(m), vs[len(vs)-1]))
		}
	}
	fmt.Fprintf(log, "  %s:%s\n", j.name, b.String())
}

// keySet is what every job of one size shares.
type keySet struct {
	n      uint64
	keys   *bench.Keys // n keys to add
	hits   *bench.Keys // the first lookups of keys
	misses *bench.Keys // absent keys, as many as hits
	hitSl  [][]byte    // hits as slices, for HasMany
}

func runSize(o *options, n uint64, log io.Writer, progress func(*sizeResult)) (*sizeResult, error) {
	fmt.Fprintf(log, "n=%d: generating keys (seed %d)\n", n, o.seed)
	l := int(min(n, o.lookups))
	ks := &keySet{n: n, keys: bench.NewKeys(n, o.seed, 1)}
	ks.hits = ks.keys.Prefix(l)
	ks.misses = bench.NewKeys(uint64(l), o.seed, 2)
	ks.hitSl = ks.hits.Slices()

	res := &sizeResult{vals: map[string]map[string][]float64{}, lookups: l, seed: o.seed}
	if o.counters {
		c, done := lockCounters(log, n)
		defer done()
		if c != nil {
			res.ctr, res.tallies = c, map[string]map[string]*tally{}
		}
	}
	for _, lib := range o.libs {
		res.jobs = append(res.jobs, job{name: lib.Name, lib: lib})
	}
	if o.cold {
		res.jobs = append(res.jobs, job{name: "cold-store-bloom", kind: "bloom"}, job{name: "cold-store-cuckoo", kind: "cuckoo"})
	}
	for round := range o.rounds {
		for i := range res.jobs {
			j := res.jobs[(i+round)%len(res.jobs)]
			fmt.Fprintf(log, "n=%d round %d/%d: %s\n", n, round+1, o.rounds, j.name)
			var err error
			if j.kind == "" {
				err = measureLib(o, ks, j, res)
			} else {
				err = measureCold(o, ks, j, res, round == 0)
			}
			if err != nil {
				return nil, fmt.Errorf("n=%d %s: %w", n, j.name, err)
			}
			res.logLast(log, j)
			progress(res)
			freeMemory()
		}
	}
	return res, nil
}

// freeMemory returns the last filter's memory before the next one is built.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

func nsPer(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }

// hasAll times Has over every key of ks and returns ns per lookup and the
// number of positive answers.
func hasAll(f bench.Filter, ks *bench.Keys) (float64, int) {
	pos := 0
	n := ks.Len()
	t0 := time.Now()
	for i := range n {
		if f.Has(ks.At(i)) {
			pos++
		}
	}
	return nsPer(time.Since(t0), n), pos
}

// manyBatch is the batch size of the HasMany passes.
const manyBatch = 1024

// hasMany times HasMany over keys in batches and returns ns per key and the
// number of positive answers.
func hasMany(b bench.Batcher, keys [][]byte) (float64, int) {
	out := make([]bool, manyBatch)
	pos := 0
	t0 := time.Now()
	for i := 0; i < len(keys); i += manyBatch {
		out = b.HasMany(keys[i:min(i+manyBatch, len(keys))], out)
		for _, v := range out {
			if v {
				pos++
			}
		}
	}
	return nsPer(time.Since(t0), len(keys)), pos
}

func measureLib(o *options, ks *keySet, j job, res *sizeResult) (err error) {
	dir, err := os.MkdirTemp(o.tmp, "compare-")
	if err != nil {
		return err
	}
	defer func() {
		if rerr := os.RemoveAll(dir); err == nil {
			err = rerr
		}
	}()
	cfg := bench.Config{N: ks.n, FPR: o.fpr, Dir: filepath.Join(dir, "store")}
	t0 := time.Now()
	f, err := j.lib.New(cfg)
	if err != nil {
		return err
	}
	newDur := time.Since(t0)
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	var failed int
	var buildDur time.Duration
	res.count(j.name, "build", int(ks.n), func() {
		t0 = time.Now()
		failed, err = bench.Build(f, ks.keys)
		buildDur = time.Since(t0)
	})
	if err != nil {
		return err
	}
	res.add(j.name, mNew, float64(newDur.Microseconds())/1000)
	res.add(j.name, mBuild, nsPer(buildDur, int(ks.n)))
	res.add(j.name, mFailed, float64(failed))
	res.add(j.name, mBits, f.BitsPerKey())

	var ns float64
	var pos int
	res.count(j.name, "hit", ks.hits.Len(), func() { ns, pos = hasAll(f, ks.hits) })
	res.add(j.name, mHit, ns)
	res.add(j.name, mHitRate, 100*float64(pos)/float64(ks.hits.Len()))
	res.count(j.name, "miss", ks.misses.Len(), func() { ns, pos = hasAll(f, ks.misses) })
	res.add(j.name, mMiss, ns)
	res.add(j.name, mFPR, 100*float64(pos)/float64(ks.misses.Len()))
	if b, ok := f.(bench.Batcher); ok {
		res.count(j.name, "HasMany", len(ks.hitSl), func() { ns, _ = hasMany(b, ks.hitSl) })
		res.add(j.name, mMany, ns)
	}
	return nil
}

// measureCold measures the store path of one kind: create, Load, close,
// then reopen with every file of the store evicted from the page cache and
// time the first lookups, counting major faults. With check set it also
// runs bench.EvictCheck on the layer file and records the result.
func measureCold(o *options, ks *keySet, j job, res *sizeResult, check bool) (err error) {
	dir, err := os.MkdirTemp(o.tmp, "compare-cold-")
	if err != nil {
		return err
	}
	defer func() {
		if rerr := os.RemoveAll(dir); err == nil {
			err = rerr
		}
	}()
	sdir := filepath.Join(dir, "store")
	cfg := bench.Config{N: ks.n, FPR: o.fpr, Dir: sdir}
	t0 := time.Now()
	a, err := bench.CreateStore(cfg, j.kind)
	if err != nil {
		return err
	}
	res.add(j.name, mCreate, ms(time.Since(t0)))
	t0 = time.Now()
	if _, err := a.Build(ks.keys); err != nil {
		a.Close()
		return err
	}
	res.add(j.name, mLoad, nsPer(time.Since(t0), int(ks.n)))
	t0 = time.Now()
	if err := a.Close(); err != nil {
		return err
	}
	res.add(j.name, mClose, ms(time.Since(t0)))

	if check && j.kind == "bloom" {
		res.evict = evictCheck(sdir)
	}

	cold := ks.hits.Prefix(min(o.coldKeys, ks.hits.Len()))
	// Reopen cold, first Has lookups.
	if err := bench.EvictDir(sdir); err != nil {
		return err
	}
	mf0 := bench.MajorFaults()
	a, d, err := bench.ReopenStore(sdir, j.kind, ks.n)
	if err != nil {
		return err
	}
	mf1 := bench.MajorFaults()
	res.add(j.name, mReopen, ms(d))
	res.add(j.name, mReopenMF, float64(mf1-mf0))
	ns, _ := hasAll(a, cold)
	res.add(j.name, mColdHas, ns)
	res.add(j.name, mColdMF, float64(bench.MajorFaults()-mf1))
	ns, _ = hasAll(a, cold)
	res.add(j.name, mWarmHas, ns)
	if err := a.Close(); err != nil {
		return err
	}

	// Reopen cold again, first lookups through HasMany.
	if err := bench.EvictDir(sdir); err != nil {
		return err
	}
	a, _, err = bench.ReopenStore(sdir, j.kind, ks.n)
	if err != nil {
		return err
	}
	mf1 = bench.MajorFaults()
	ns, _ = hasMany(a, cold.Slices())
	res.add(j.name, mColdMany, ns)
	res.add(j.name, mManyMF, float64(bench.MajorFaults()-mf1))
	return a.Close()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// evictCheck runs bench.EvictCheck on the largest file under dir/filters and
// describes the result in one line.
func evictCheck(dir string) string {
	var path string
	var size int64
	ents, err := os.ReadDir(filepath.Join(dir, "filters"))
	if err != nil {
		return "eviction check: " + err.Error()
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Size() > size {
			path, size = filepath.Join(dir, "filters", e.Name()), fi.Size()
		}
	}
	if path == "" {
		return "eviction check: no layer file"
	}
	pages, mad, fad, err := bench.EvictCheck(path)
	if err != nil {
		return "eviction check: " + err.Error()
	}
	return fmt.Sprintf("eviction check on the Bloom layer file (%d pages, read one byte per page with MADV_RANDOM): "+
		"major faults after madvise(MADV_DONTNEED) %d, after posix_fadvise(POSIX_FADV_DONTNEED) %d", pages, mad, fad)
}
