package cuckoo_test

import (
	"fmt"

	"github.com/filterstore/filterstore/cuckoo"
)

// A filter filled on one goroutine with InsertOwned (no lock, plain
// writes) before it is shared; afterwards Insert, Delete and Has are safe
// from any goroutines.
func ExampleFilter_InsertOwned() {
	g, err := cuckoo.Plan(10_000, 4, 16)
	if err != nil {
		panic(err)
	}
	f, err := cuckoo.New(g, nil)
	if err != nil {
		panic(err)
	}
	for i := range 10_000 {
		if err := f.InsertOwned(fmt.Appendf(nil, "key-%d", i)); err != nil {
			panic(err)
		}
	}
	fmt.Println(f.Count(), f.Has([]byte("key-42")))
	f.Delete([]byte("key-42"))
	fmt.Println(f.Count())
	// Output:
	// 10000 true
	// 9999
}
