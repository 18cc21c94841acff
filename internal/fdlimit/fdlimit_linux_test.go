package fdlimit

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestLeave: with n descriptors left, n opens succeed and the next fails
// with EMFILE; after restore, opens succeed again.
func TestLeave(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		restore := Leave(t, n)
		var opened []*os.File
		var err error
		for range n + 1 {
			var f *os.File
			if f, err = os.Open(os.DevNull); err != nil {
				break
			}
			opened = append(opened, f)
		}
		restore()
		for _, f := range opened {
			f.Close()
		}
		if len(opened) != n || !errors.Is(err, syscall.EMFILE) {
			t.Errorf("with %d left: %d opens succeeded, then %v; want %d, then EMFILE", n, len(opened), err, n)
		}
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatalf("open after restore: %v", err)
		}
		f.Close()
	}
}
