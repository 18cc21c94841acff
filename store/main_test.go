package store

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/catalog"
)

// rssLimit is the resident memory past which the store tests stop with
// every goroutine's stack: the suite needs about 150 MiB, and a test that
// grows without bound would otherwise be ended by the kernel's OOM killer
// without a word (CI once saw only "signal: killed").
// -rss.limit raises it (in MiB) for benchmarks of large filters, e.g.
// BenchmarkLoad -load.n 1000000000.
var rssLimit = flag.Int64("rss.limit", 2048, "MiB of resident memory past which the store tests panic")

// smallPages sets Options.SmallPages in the stores of the Load, lookup,
// HasMany and checkpoint benchmarks, to compare 4 KiB mappings against the
// default huge-page ones.
var smallPages = flag.Bool("small.pages", false, "benchmark stores map filter files with 4 KiB pages only (Options.SmallPages)")

func TestMain(m *testing.M) {
	flag.Parse()
	// The lock-timeout tests wait out the catalog's lock wait, some of
	// them twice: 3 s instead of 5 keeps them shorter, and is still many
	// times what a legitimate holder (another store's catalog commit,
	// two fsyncs) keeps the lock on a busy CI machine.
	catalog.Wait = 3 * time.Second
	go watchMemory(*rssLimit << 20)
	os.Exit(m.Run())
}

// watchMemory panics, with all goroutines' stacks, once the process's
// resident set exceeds limit bytes. Where /proc/self/statm cannot be read
// it does nothing.
func watchMemory(limit int64) {
	page := int64(os.Getpagesize())
	for {
		b, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			return
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return
		}
		pages, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return
		}
		if rss := pages * page; rss > limit {
			debug.SetTraceback("all")
			panic(fmt.Sprintf("store tests: resident memory %d MiB passed the watchdog's %d MiB", rss>>20, limit>>20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}
