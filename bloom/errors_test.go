package bloom

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestBadInput checks that every invalid parameter is an error wrapping
// ErrInvalid whose message names the field, and that nothing panics.
func TestBadInput(t *testing.T) {
	good := Geometry{Blocks: 4, K: 3}
	layer0, _ := New(Geometry{Blocks: 4, K: 3, Salt: LayerSalt(0)}, nil)
	wrongSalt, _ := New(Geometry{Blocks: 4, K: 3, Salt: 1}, nil)
	for _, tc := range []struct {
		name  string
		field string
		call  func() error
	}{
		{"Plan capacity 0", "capacity", func() error { _, err := Plan(0, 0.01); return err }},
		{"Plan rate 0", "error rate", func() error { _, err := Plan(10, 0); return err }},
		{"Plan rate 1", "error rate", func() error { _, err := Plan(10, 1); return err }},
		{"Plan rate negative", "error rate", func() error { _, err := Plan(10, -0.1); return err }},
		{"Plan rate NaN", "error rate", func() error { _, err := Plan(10, math.NaN()); return err }},
		{"Plan rate +Inf", "error rate", func() error { _, err := Plan(10, math.Inf(1)); return err }},
		{"Plan too large", "capacity", func() error { _, err := Plan(math.MaxUint64, 1e-9); return err }},
		{"Plan rate tiny", "error rate", func() error { _, err := Plan(10, 1e-300); return err }},
		{"PlanCounting capacity 0", "capacity", func() error { _, err := PlanCounting(0, 0.01); return err }},
		{"PlanCounting rate NaN", "error rate", func() error { _, err := PlanCounting(10, math.NaN()); return err }},
		{"PlanCounting too large", "capacity", func() error { _, err := PlanCounting(math.MaxUint64, 0.01); return err }},
		{"Validate blocks 0", "blocks", func() error { return Geometry{Blocks: 0, K: 3}.Validate() }},
		{"Validate blocks huge", "blocks", func() error { return Geometry{Blocks: MaxBlocks + 1, K: 3}.Validate() }},
		{"Validate k 0", "k must", func() error { return Geometry{Blocks: 1, K: 0}.Validate() }},
		{"Validate k 33", "k must", func() error { return Geometry{Blocks: 1, K: MaxK + 1}.Validate() }},
		{"New bad geometry", "blocks", func() error { _, err := New(Geometry{K: 3}, nil); return err }},
		{"New short words", "words", func() error { _, err := New(good, make([]uint64, 31)); return err }},
		{"New long words", "words", func() error { _, err := New(good, make([]uint64, 33)); return err }},
		{"New empty words", "words", func() error { _, err := New(good, []uint64{}); return err }},
		{"NewCounting bad geometry", "k must", func() error { _, err := NewCounting(Geometry{Blocks: 1}, nil); return err }},
		{"NewCounting short words", "words", func() error { _, err := NewCounting(good, make([]uint64, 8)); return err }},
		{"NewScalable capacity 0", "capacity", func() error { _, err := NewScalable(Config{ErrorRate: 0.01}, nil); return err }},
		{"NewScalable rate 0", "error rate", func() error { _, err := NewScalable(Config{Capacity: 10}, nil); return err }},
		{"NewScalable rate NaN", "error rate", func() error {
			_, err := NewScalable(Config{Capacity: 10, ErrorRate: math.NaN()}, nil)
			return err
		}},
		{"NewScalable expansion 65", "expansion", func() error {
			_, err := NewScalable(Config{Capacity: 10, ErrorRate: 0.01, Expansion: 65}, nil)
			return err
		}},
		{"NewScalable too large", "capacity", func() error {
			_, err := NewScalable(Config{Capacity: math.MaxUint64, ErrorRate: 0.01}, nil)
			return err
		}},
		{"NewScalable allocator wrong length", "words", func() error {
			_, err := NewScalable(Config{Capacity: 10, ErrorRate: 0.01}, func(int, Geometry) ([]uint64, error) {
				return make([]uint64, 3), nil
			})
			return err
		}},
		{"NewScalable allocator nil words", "nil words", func() error {
			_, err := NewScalable(Config{Capacity: 10, ErrorRate: 0.01}, func(int, Geometry) ([]uint64, error) { return nil, nil })
			return err
		}},
		{"LayerParams bad config", "expansion", func() error {
			_, _, _, err := LayerParams(Config{Capacity: 10, ErrorRate: 0.01, Expansion: 100}, 0)
			return err
		}},
		{"LayerParams negative layer", "layer", func() error {
			_, _, _, err := LayerParams(Config{Capacity: 10, ErrorRate: 0.01}, -1)
			return err
		}},
		{"LayerParams non-scaling layer 1", "layer", func() error {
			_, _, _, err := LayerParams(Config{Capacity: 10, ErrorRate: 0.01, NonScaling: true}, 1)
			return err
		}},
		{"LayerParams capacity overflow", "capacity overflows", func() error {
			_, _, _, err := LayerParams(Config{Capacity: 1 << 40, ErrorRate: 0.01, Expansion: 64}, 5)
			return err
		}},
		{"LayerParams rate underflow", "error rate", func() error {
			_, _, _, err := LayerParams(Config{Capacity: 10, ErrorRate: 0.01, Expansion: 1}, 2000)
			return err
		}},
		{"ResumeScalable no layers", "layers", func() error { _, err := ResumeScalable(Config{Capacity: 10, ErrorRate: 0.01}, nil, nil); return err }},
		{"ResumeScalable nil layer", "layer 0", func() error {
			_, err := ResumeScalable(Config{Capacity: 10, ErrorRate: 0.01}, []*Filter{nil}, nil)
			return err
		}},
		{"ResumeScalable wrong salt", "salt", func() error {
			_, err := ResumeScalable(Config{Capacity: 10, ErrorRate: 0.01}, []*Filter{wrongSalt}, nil)
			return err
		}},
		{"ResumeScalable non-scaling two layers", "layers", func() error {
			_, err := ResumeScalable(Config{Capacity: 10, ErrorRate: 0.01, NonScaling: true}, []*Filter{layer0, layer0}, nil)
			return err
		}},
		{"ResumeScalable bad config", "capacity", func() error {
			_, err := ResumeScalable(Config{ErrorRate: 0.01}, []*Filter{layer0}, nil)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want one wrapping ErrInvalid", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "bloom: ") || !strings.Contains(msg, tc.field) {
				t.Fatalf("error %q: want prefix %q and field %q", msg, "bloom: ", tc.field)
			}
		})
	}
}

func TestAllocatorError(t *testing.T) {
	boom := errors.New("boom")
	_, err := NewScalable(Config{Capacity: 10, ErrorRate: 0.01}, func(int, Geometry) ([]uint64, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("NewScalable with a failing allocator: %v, want it to wrap %v", err, boom)
	}
}
