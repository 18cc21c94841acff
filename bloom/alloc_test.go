package bloom

import "testing"

// TestLookupsDoNotAllocate: Has and Count on every filter kind of this
// package allocate nothing per call.
func TestLookupsDoNotAllocate(t *testing.T) {
	g, err := Plan(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := PlanCounting(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCounting(cg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.AddHash(1)
	c.AddHash(1)
	h := uint64(1)
	for name, fn := range map[string]func(){
		"Filter.HasHash":     func() { f.HasHash(h); h++ },
		"Counting.HasHash":   func() { c.HasHash(h); h++ },
		"Counting.CountHash": func() { c.CountHash(h); h++ },
	} {
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Errorf("%s: %.1f allocations per call, want 0", name, n)
		}
	}
}
