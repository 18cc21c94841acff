package bloom_test

import (
	"fmt"
	"sync"

	"github.com/filterstore/filterstore/bloom"
)

// A filter built on one goroutine with AddOwned (plain writes), then
// shared: from then on every goroutine uses Has and Add, which are safe
// together.
func ExampleFilter_AddOwned() {
	g, err := bloom.Plan(10_000, 0.01)
	if err != nil {
		panic(err)
	}
	f, err := bloom.New(g, nil)
	if err != nil {
		panic(err)
	}
	for i := range 10_000 {
		f.AddOwned(fmt.Appendf(nil, "key-%d", i))
	}
	// Count leaves out the adds that were false positives (changed no bit).
	built := f.Count()
	fmt.Println("count over 9,900:", built > 9_900)

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			f.Add(fmt.Appendf(nil, "late-%d", w))
		})
	}
	wg.Wait()
	fmt.Println(f.Has([]byte("key-42")), f.Has([]byte("late-3")), f.Count()-built <= 4)
	// Output:
	// count over 9,900: true
	// true true true
}
