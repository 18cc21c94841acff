package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFiltersAtTheMappingLimit: in a process that holds nearly as many
// memory mappings as the kernel allows (vm.max_map_count), creates of new
// filters, each a mapped file, fail with ErrTooManyMappings before the
// limit is reached, and fail only the call: the store goes on (an add, a
// lookup, a checkpoint, Close), the process lives, and once mappings are
// freed every filter made is there after a reopen. Before, the creates
// went on to the limit, where a create failed with ENOMEM from the
// catalog's mapping and the Go runtime's next mapping ended the process
// ("fatal error: runtime: out of memory"; a many-filters review's find at
// 65,451 filters). The child process this test runs in takes all but a
// few hundred of the mappings the guard allows with anonymous pages of
// alternating protection (which the kernel cannot merge into one).
func TestFiltersAtTheMappingLimit(t *testing.T) {
	dir := os.Getenv("FILTERSTORE_MAPLIMIT_CHILD")
	if dir == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestFiltersAtTheMappingLimit$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "FILTERSTORE_MAPLIMIT_CHILD="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("child skipped:\n%s", out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		t.Skipf("no vm.max_map_count: %v", err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	if limit > 1<<22 {
		t.Skipf("vm.max_map_count is %d: too many mappings to take", limit)
	}
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	bf, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, second(bf.Add(key(1))))

	// Take mappings up to 300 below the guard's bound (a sixteenth of the
	// limit below it).
	held := countMappings(t)
	take := limit - limit/16 - 300 - held
	if take <= 0 {
		t.Skipf("the process already holds %d mappings of %d", held, limit)
	}
	fill := takeMappings(t, take)
	t.Logf("vm.max_map_count %d; %d mappings held, %d after the fill", limit, held, countMappings(t))

	var cerr error
	made := 0
	for i := range 5000 {
		if _, cerr = s.CreateBitmap(fmt.Sprintf("m%d", i), 64); cerr != nil {
			break
		}
		made++
	}
	t.Logf("after %d creates, %d mappings: %v", made, countMappings(t), cerr)
	if cerr == nil {
		t.Fatal("5000 creates at the mapping limit were all admitted")
	}
	if !errors.Is(cerr, ErrTooManyMappings) || errors.Is(cerr, ErrFailed) {
		t.Fatalf("create at the mapping limit: %v; want ErrTooManyMappings, the store not failed", cerr)
	}
	must(t, second(bf.Add(key(2))))
	if !bf.Has(key(1)) || !bf.Has(key(2)) {
		t.Fatal("an acknowledged key is absent at the mapping limit")
	}
	must(t, s.Checkpoint())
	must(t, s.Close())

	// An Open maps every filter: with the process as near the limit as
	// the last create left it, it is refused with the same error, which
	// says nothing of the files (it wraps ENOMEM), not opened with
	// filters broken, which an operator might drop.
	fill2 := takeMappings(t, limit-limit/16-countMappings(t)-10)
	for _, ro := range []bool{false, true} {
		s2, err := Open(dir, &Options{ReadOnly: ro})
		if err == nil {
			s2.Close()
			t.Fatalf("Open (read-only %v) at the mapping limit succeeded", ro)
		}
		if !errors.Is(err, ErrTooManyMappings) || !errors.Is(err, syscall.ENOMEM) {
			t.Fatalf("Open (read-only %v) at the mapping limit: %v; want ErrTooManyMappings wrapping ENOMEM", ro, err)
		}
		t.Logf("Open (read-only %v) at the mapping limit: %v", ro, err)
	}
	must(t, unix.Munmap(fill2))

	must(t, unix.Munmap(fill))
	s = mustOpen(t, dir, nil)
	defer s.Close()
	l, err := s.List()
	must(t, err)
	if len(l) != made+1 {
		t.Fatalf("%d filters after reopen, want %d", len(l), made+1)
	}
	if _, err := s.Check(); err != nil {
		t.Fatalf("Check after reopen: %v", err)
	}
	bf, err = s.Bloom("b")
	must(t, err)
	if !bf.Has(key(1)) || !bf.Has(key(2)) {
		t.Fatal("an acknowledged key is absent after reopen")
	}
}

// takeMappings maps n pages (at least 2) of alternating protection,
// which the kernel cannot merge: about n mappings.
func takeMappings(t *testing.T, n int) []byte {
	n = max(n, 2)
	page := os.Getpagesize()
	fill, err := unix.Mmap(-1, 0, n*page, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	must(t, err)
	for i := 0; i < n/2; i++ {
		must(t, unix.Mprotect(fill[2*i*page:(2*i+1)*page], unix.PROT_READ))
	}
	return fill
}

// countMappings returns the lines of /proc/self/maps.
func countMappings(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	must(t, err)
	return strings.Count(string(b), "\n")
}
