package mmapbits

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/fdlimit"
)

// TestMapLimitGuardOutlivesADescriptorShortage: a mapping made while the
// process has no descriptor left for the guard to count its mappings
// with (EMFILE opening /proc/self/maps, or vm.max_map_count) is admitted
// or fails with EMFILE, and the guard goes on: once descriptors are
// back, regions are refused with ErrTooManyMappings near the limit as
// before. A shortage of descriptors passes; the kernel's mapping limit
// stays, and a guard that stopped counting for good would let the
// process map on to it, where the Go runtime's next mapping ends the
// process.
func TestMapLimitGuardOutlivesADescriptorShortage(t *testing.T) {
	held, err := mapCount()
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	dir := t.TempDir()
	first := filepath.Join(dir, "first.flt")
	r, err := OS{}.Create(first, Header{Kind: KindBitmap, DataPages: 1, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	const room = 90
	bound := held + room
	withMapLimit(t, limitFor(bound), nil)
	var regions []Region
	defer func() {
		for _, r := range regions {
			r.Close()
		}
	}()
	// The file's descriptor takes the last one: the guard's count, at
	// the first mapping under this limit, finds none.
	restore := fdlimit.Leave(t, 1)
	r, err = OS{}.Open(first)
	restore()
	if err != nil && !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Open with one descriptor left: %v; want success or EMFILE", err)
	}
	if r != nil {
		regions = append(regions, r)
	}
	t.Logf("Open with one descriptor left: %v", err)
	var refused error
	for i := 0; i < 4*room && refused == nil; i++ {
		r, err := OS{}.Create(filepath.Join(dir, fmt.Sprintf("%d.flt", i)), Header{Kind: KindBitmap, DataPages: 1, Size: 1})
		if err != nil {
			refused = err
			break
		}
		regions = append(regions, r)
	}
	if refused == nil {
		now, _ := mapCount()
		t.Fatalf("after a descriptor shortage %d regions were mapped, %d mappings held under a bound of %d: none refused", len(regions), now, bound)
	}
	if !errors.Is(refused, ErrTooManyMappings) {
		t.Fatalf("refused with %v; want ErrTooManyMappings", refused)
	}
}
