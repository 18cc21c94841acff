package mmapbits

import (
	"fmt"

	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// catchFault runs fn with SetPanicOnFault and returns the fault it raised,
// if any.
func catchFault(fn func()) (fault any) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() { fault = recover() }()
	fn()
	return nil
}

// TestUpdateSumsRacingClose: UpdateSums beside Close stores no checksum
// through the placeholder pages Close puts in the mapping's place (read
// only: a store there faults, SIGSEGV, which kills a process that did not
// set SetPanicOnFault). Before, UpdateSums checked that the region was
// open and then stored, with a Close free to come in between; it faulted
// in most of 40 cycles (an adversarial review's finding). Now it holds
// the region's mutex, as Sync and Close do.
func TestUpdateSumsRacingClose(t *testing.T) {
	dir := t.TempDir()
	const pages = 4096
	faults := 0
	for i := range 40 {
		p := filepath.Join(dir, fmt.Sprint("u", i))
		r, err := OS{}.Create(p, Header{Kind: KindBitmap, DataPages: pages})
		if err != nil {
			t.Fatal(err)
		}
		w := r.Words()
		for pg := uint64(0); pg < pages; pg++ {
			atomic.StoreUint64(&w[pg*WordsPerPage], pg+1)
		}
		r.Touch(0, uint64(len(w)))
		var wg sync.WaitGroup
		var fault any
		var uerr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			fault = catchFault(func() { _, uerr = r.UpdateSums(false) })
		}()
		time.Sleep(time.Duration(i%10) * 100 * time.Microsecond)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if fault != nil {
			faults++
			t.Logf("cycle %d: UpdateSums faulted after Close: %v (err %v)", i, fault, uerr)
		}
	}
	if faults > 0 {
		t.Errorf("UpdateSums racing Close faulted in %d of 40 cycles (without SetPanicOnFault: SIGSEGV, process killed)", faults)
	}
}

// TestSetStampRacingClose: SetStamp beside Close, as UpdateSums (it
// faulted in about one cycle in a hundred before).
func TestSetStampRacingClose(t *testing.T) {
	dir := t.TempDir()
	faults := 0
	cycles := 1000
	for i := range cycles {
		p := filepath.Join(dir, fmt.Sprint("s", i%2))
		r, err := OS{}.Create(p, Header{Kind: KindBitmap, DataPages: 1})
		if err != nil {
			t.Fatal(err)
		}
		var start, stop atomic.Bool
		var fault any
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			fault = catchFault(func() {
				for v := uint64(1); !stop.Load(); v++ {
					r.SetStamp(v)
					start.Store(true)
				}
			})
		}()
		for !start.Load() {
		}
		r.Close()
		stop.Store(true)
		wg.Wait()
		if fault != nil {
			faults++
			if faults == 1 {
				t.Logf("cycle %d: SetStamp faulted after Close: %v", i, fault)
			}
		}
		OS{}.Remove(p)
	}
	if faults > 0 {
		t.Errorf("SetStamp racing Close faulted in %d of %d cycles", faults, cycles)
	}
}
