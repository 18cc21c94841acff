// Command kvbench measures the kv service in each of its modes: puts per
// second from many goroutines, Gets per second of keys present and of keys
// never put (where the filters answer without reading pebble), and the
// time to restart (Close, then Open of pebble and the filter store, and a
// first Get). Each mode runs in a fresh directory under os.MkdirTemp; with
// -rounds above 1 the modes take turns, in a rotated order each round, and
// the table gives each column's median. On Linux a last table gives what
// the puts cost: the filter store's fdatasyncs and the disk's flush
// requests per put, from /proc/diskstats for the device holding the
// directories.
//
//	go run ./cmd/kvbench [-n 200000] [-g 16] [-gets 200000] [-absent 2000000] [-value 100] [-rounds 1] [-cpuprofile FILE] [-modes pebble-only,per-filter,batch,external] [-dir DIR]
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/filterstore/filterstore/examples/pebble/kv"
)

func main() {
	cfg := config{}
	flag.IntVar(&cfg.n, "n", 200_000, "keys put, one Put each")
	flag.IntVar(&cfg.g, "g", 16, "goroutines")
	flag.IntVar(&cfg.gets, "gets", 200_000, "Gets of present keys")
	flag.IntVar(&cfg.absentGets, "absent", 2_000_000, "Gets of keys never put (the filters answer most in microseconds: many, for a measurable time)")
	flag.IntVar(&cfg.valueSize, "value", 100, "value size in bytes")
	rounds := flag.Int("rounds", 1, "runs of every mode, in a rotated order each round")
	modes := flag.String("modes", "pebble-only,per-filter,batch,external", "modes to run, comma-separated")
	flag.StringVar(&cfg.parent, "dir", "", "parent of the temporary directories (default: os.TempDir())")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if cfg.n < 1 || cfg.g < 1 || cfg.gets < 1 || cfg.absentGets < 1 || cfg.valueSize < 0 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "kvbench: -n, -g, -gets, -absent and -rounds must be at least 1, -value at least 0")
		os.Exit(2)
	}
	var ms []kv.Mode
	for name := range strings.SplitSeq(*modes, ",") {
		m, err := kv.ParseMode(strings.TrimSpace(name))
		if err != nil {
			fmt.Fprintln(os.Stderr, "kvbench:", err)
			os.Exit(2)
		}
		ms = append(ms, m)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	cfg.present = make([][]byte, cfg.n)
	for i := range cfg.present {
		cfg.present[i] = fmt.Appendf(nil, "user:%08d", i)
	}
	cfg.absent = make([][]byte, min(cfg.absentGets, absentKeys))
	for i := range cfg.absent {
		cfg.absent[i] = fmt.Appendf(nil, "absent:%08d", i)
	}
	cfg.order = make([]int, cfg.gets)
	for i := range cfg.order {
		cfg.order[i] = rng.IntN(cfg.n)
	}
	cfg.value = make([]byte, cfg.valueSize)
	for i := range cfg.value {
		cfg.value[i] = byte('a' + rng.IntN(26))
	}

	fmt.Printf("kvbench: %d keys put by %d goroutines (%d-byte values), %d Gets of present keys, %d of absent keys, %d round(s)\n",
		cfg.n, cfg.g, cfg.valueSize, cfg.gets, cfg.absentGets, *rounds)
	fmt.Printf("%s %s/%s, %d CPUs, directories under %s\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), tempParent(cfg.parent))

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kvbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if d, err := diskOf(tempParent(cfg.parent)); err == nil {
		cfg.disk = d
	} else {
		fmt.Printf("(no device counters: %v)\n\n", err)
	}
	results := make(map[kv.Mode][]result)
	for r := range *rounds {
		for i := range ms {
			m := ms[(i+r)%len(ms)]
			res, err := run(cfg, m)
			if err != nil {
				pprof.StopCPUProfile()
				fmt.Fprintf(os.Stderr, "kvbench: %v: %v\n", m, err)
				os.Exit(1)
			}
			results[m] = append(results[m], res)
		}
	}
	printTable(os.Stdout, ms, results)
	fmt.Println()
	printRounds(os.Stdout, ms, results, *rounds)
	if cfg.disk != nil {
		fmt.Println()
		printDisk(os.Stdout, ms, results, cfg.n)
	}
}

// absentKeys is the most distinct absent keys kvbench makes; the absent
// Gets cycle through them.
const absentKeys = 200_000

func tempParent(dir string) string {
	if dir == "" {
		return os.TempDir()
	}
	return dir
}
