package catalog

import (
	"fmt"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// BenchmarkCommit: one filter's value written (a checkpoint of one busy
// filter) into catalogs of 10 to 10,000 filters, without fdatasync (NoSync),
// so that the CPU work of a commit shows: bbolt's, and the content
// checksum's, which follows the entries the commit writes, not the
// catalog's size. (BenchmarkCatalogLoad measures the reads, which
// recompute the checksum over every entry.)
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("filters=%d", n), func(b *testing.B) {
			c := catalogOf(b, n)
			one := map[string]*format.FilterMeta{"filter-000001": testMeta(1)}
			i := uint64(0)
			for b.Loop() {
				i++
				one["filter-000001"].Layers[0].Items = i
				if err := c.PutFilters(0, one); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
