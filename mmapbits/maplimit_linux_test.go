package mmapbits

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// withMapLimit makes the guard see limit as the process's mapping limit
// (none if limit is 0), from a fresh state, until the test ends; count,
// if not nil, counts the guard's counts of the process's mappings.
func withMapLimit(t *testing.T, limit int, count *int) {
	t.Helper()
	mapMu.Lock()
	saved, savedLimit, savedCount := guard, mapLimitHook, mapCountHook
	guard = mapGuard{}
	mapLimitHook = func() (int, error) {
		if limit > 0 {
			return limit, nil
		}
		return 0, errNoMapLimit
	}
	mapCountHook = func() (int, error) {
		if count != nil {
			*count++
		}
		return mapCount()
	}
	mapMu.Unlock()
	t.Cleanup(func() {
		mapMu.Lock()
		guard, mapLimitHook, mapCountHook = saved, savedLimit, savedCount
		mapMu.Unlock()
	})
}

// limitFor returns the smallest mapping limit under which the guard admits
// mappings while the process holds fewer than bound.
func limitFor(bound int) int {
	l := bound
	for l-headroom(l) < bound {
		l++
	}
	return l
}

// TestMapLimitRefusesNearTheLimit: with the process's mapping limit set a
// little above what it holds, regions are mapped until the mappings come
// within the guard's headroom, then Create, Open, OpenRead and AnonWords
// fail with ErrTooManyMappings naming the file, before the kernel's limit
// is reached; once the limit is raised, mapping works again.
func TestMapLimitRefusesNearTheLimit(t *testing.T) {
	held, err := mapCount()
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	const room = 90 // mappings the guard may make room for
	bound := held + room
	withMapLimit(t, limitFor(bound), nil)
	dir := t.TempDir()
	var regions []Region
	defer func() {
		for _, r := range regions {
			r.Close()
		}
	}()
	var refused error
	var path string
	for i := 0; i < 4*room && refused == nil; i++ {
		path = filepath.Join(dir, fmt.Sprintf("%d.flt", i))
		r, err := OS{}.Create(path, Header{Kind: KindBitmap, DataPages: 1, Size: 1})
		if err != nil {
			refused = err
			break
		}
		regions = append(regions, r)
	}
	if refused == nil {
		t.Fatalf("%d regions mapped with the limit %d mappings above the %d held: none refused", len(regions), room, held)
	}
	if !errors.Is(refused, ErrTooManyMappings) || !strings.Contains(refused.Error(), path) {
		t.Fatalf("Create refused with %v; want ErrTooManyMappings naming %s", refused, path)
	}
	now, _ := mapCount()
	if len(regions) < room/maxPerMapping || now < bound-2*maxPerMapping-8 {
		t.Errorf("refused early: after %d regions, %d mappings held under a bound of %d", len(regions), now, bound)
	}
	t.Logf("%d regions mapped, then refused at %d mappings (bound %d): %v", len(regions), now, bound, refused)
	existing := filepath.Join(dir, "0.flt")
	for name, try := range map[string]func() error{
		"Open":     func() error { r, err := (OS{}).Open(existing); closeIf(r); return err },
		"OpenRead": func() error { r, err := (OS{}).OpenRead(existing); closeIf(r); return err },
		"AnonWords": func() error {
			_, free, err := AnonWords(1024, false)
			if free != nil {
				free()
			}
			return err
		},
	} {
		if err := try(); !errors.Is(err, ErrTooManyMappings) {
			t.Errorf("%s near the limit: %v, want ErrTooManyMappings", name, err)
		}
	}
	withMapLimit(t, limitFor(bound+10*room), nil)
	r, err := OS{}.Open(existing)
	if err != nil {
		t.Fatalf("Open after the limit was raised: %v", err)
	}
	regions = append(regions, r)
}

func closeIf(r Region) {
	if r != nil {
		r.Close()
	}
}

// TestMapLimitCountsRarely: far from the limit the guard counts the
// process's mappings once, then once every minRecount mappings (the
// process holds fewer than minRecount); with no limit to read it admits
// everything uncounted.
func TestMapLimitCountsRarely(t *testing.T) {
	held, err := mapCount()
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	if held+3 > minRecount {
		t.Skipf("the process holds %d mappings", held)
	}
	var counts int
	withMapLimit(t, 1<<30, &counts)
	dir := t.TempDir()
	path := filepath.Join(dir, "a.flt")
	r, err := OS{}.Create(path, Header{Kind: KindBitmap, DataPages: 1, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	const opens = 3*minRecount + 10
	for i := 0; i < opens; i++ {
		r, err := OS{}.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if want := 1 + (opens+1-1)/minRecount; counts != want {
		t.Errorf("%d mappings far from the limit counted the process's mappings %d times, want %d", opens+1, counts, want)
	}
	counts = 0
	withMapLimit(t, 0, &counts)
	for i := 0; i < 3; i++ {
		if r, err = (OS{}).Open(path); err != nil {
			t.Fatalf("Open with no limit to read: %v", err)
		}
		r.Close()
	}
	if counts != 0 {
		t.Errorf("with no limit to read the guard counted mappings %d times", counts)
	}
}

// BenchmarkOpenManyRegions opens 20,000 one-page regions, each a file
// mapped while the others stay mapped, as a store's Open maps its
// filters, and closes them: the guard's counts of the process's mappings
// against none (a guard with no limit to read). Reported per region
// opened.
func BenchmarkOpenManyRegions(b *testing.B) {
	const n = 20000
	dir := b.TempDir()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("%d.flt", i))
		r, err := OS{}.Create(paths[i], Header{Kind: KindBitmap, DataPages: 1, Size: 1})
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("guard=%v", on), func(b *testing.B) {
			rs := make([]Region, n)
			for b.Loop() {
				mapMu.Lock()
				saved := guard
				guard = mapGuard{noLimit: !on}
				mapMu.Unlock()
				for i, p := range paths {
					r, err := OS{}.Open(p)
					if err != nil {
						b.Fatal(err)
					}
					rs[i] = r
				}
				for _, r := range rs {
					r.Close()
				}
				mapMu.Lock()
				guard = saved
				mapMu.Unlock()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/region")
		})
	}
}
