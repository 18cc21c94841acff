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
// catalog's size.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("filters=%d", n), func(b *testing.B) {
			c := New(b.TempDir())
			c.NoSync = true
			if err := c.Create(1); err != nil {
				b.Fatal(err)
			}
			all := make(map[string]*format.FilterMeta, n)
			for i := range n {
				all[fmt.Sprintf("filter-%06d", i)] = sumTestMeta(uint64(i + 1))
			}
			if err := c.PutFilters(uint64(n+1), all); err != nil {
				b.Fatal(err)
			}
			one := map[string]*format.FilterMeta{"filter-000000": sumTestMeta(1)}
			b.ResetTimer()
			for i := range b.N {
				one["filter-000000"].Layers[0].Items = uint64(i)
				if err := c.PutFilters(0, one); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoad: reading a whole catalog of 10 to 10,000 filters, as every
// Open does (with format 3, the content checksum recomputed over it).
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("filters=%d", n), func(b *testing.B) {
			c := New(b.TempDir())
			c.NoSync = true
			if err := c.Create(1); err != nil {
				b.Fatal(err)
			}
			all := make(map[string]*format.FilterMeta, n)
			for i := range n {
				all[fmt.Sprintf("filter-%06d", i)] = sumTestMeta(uint64(i + 1))
			}
			if err := c.PutFilters(uint64(n+1), all); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := c.Load(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
