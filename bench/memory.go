package bench

import (
	"math/bits"
	"path/filepath"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/filterstore/filterstore/internal/smaps"
)

// Memory is implemented by the adapters that can show where their
// filter's data lies, so that the pairs mode can time plain reads of it:
// a lookup out of the caches costs at least a read of a random line of
// that memory, and where two filters' memory answers at different speeds
// (page sizes, and on a virtual machine how the host backs each part of
// the guest's memory) their lookups differ by that much whatever their
// code does.
type Memory interface {
	// Memory returns the filter's data (not copied); nil if it cannot
	// be found. The caller only reads it, while the filter is open.
	Memory() []byte
}

// Memory implements Memory.
func (a *fsBloom) Memory() []byte { return wordBytes(a.f.Words()) }

// Memory implements Memory.
func (a *fsCuckoo) Memory() []byte { return wordBytes(a.f.Words()) }

// Memory implements Memory: blobloom's blocks (its unexported field b).
func (a *blobloomF) Memory() []byte { return sliceField(a.f, "b") }

// Memory implements Memory: panmari's buckets (its unexported field
// buckets).
func (a *panmariF) Memory() []byte { return sliceField(a.f, "buckets") }

// Memory implements Memory: the store's mapping of the filter's file,
// found in /proc/self/smaps (the store does not export its words).
func (a *StoreFilter) Memory() []byte {
	ms, err := smaps.Read()
	if err != nil {
		return nil
	}
	dir := RealPath(a.dir)
	for _, m := range ms {
		if strings.HasPrefix(m.Path, dir+"/") && strings.HasSuffix(m.Path, ".flt") {
			// The mapping's address, read as a pointer: the store holds
			// the mapping while the filter is open.
			start := *(*unsafe.Pointer)(unsafe.Pointer(&m.Start))
			return unsafe.Slice((*byte)(start), m.End-m.Start)
		}
	}
	return nil
}

// RealPath returns path made absolute, with its symbolic links resolved,
// as /proc/self/smaps names mapped files (the path unchanged if either
// fails).
func RealPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// wordBytes returns w's memory as bytes.
func wordBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// sliceField returns the memory of the slice field name of the struct p
// points to, or nil if it has none.
func sliceField(p any, name string) []byte {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Len() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(f.UnsafePointer()), uintptr(f.Len())*f.Type().Elem().Size())
}

// LineReads reads n random 64-byte lines of mem (one word each, the
// lines drawn from seed) and returns the time per read in ns. With
// chained unset the reads are independent of each other, as the blocks
// of lookups of random keys are, and the CPU overlaps as many as it can;
// with chained set each line's address depends on the word read before
// (x += word), so each read waits out the one before: the whole latency
// of a read, its page walk included.
func LineReads(mem []byte, n int, seed uint64, chained bool) float64 {
	lines := uint64(len(mem) / 64)
	if lines == 0 || n <= 0 {
		return 0
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	start := time.Now()
	if chained {
		chainedReads(base, lines, n, seed)
	} else {
		freeReads(base, lines, n, seed)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// freeReads is LineReads' loop of independent reads. (One loop for both
// kinds, choosing per read whether the next address takes in the word,
// compiled to a conditional move that chained every read.) Not inlined,
// so that the sum it returns keeps its loads.
//
//go:noinline
func freeReads(base unsafe.Pointer, lines uint64, n int, x uint64) (sum uint64) {
	for range n {
		x += 0x9e3779b97f4a7c15
		i, _ := bits.Mul64(mixLine(x), lines)
		sum += *(*uint64)(unsafe.Add(base, i*64))
	}
	return sum
}

// chainedReads is LineReads' loop of chained reads; not inlined either.
//
//go:noinline
func chainedReads(base unsafe.Pointer, lines uint64, n int, x uint64) (sum uint64) {
	for range n {
		x += 0x9e3779b97f4a7c15
		i, _ := bits.Mul64(mixLine(x), lines)
		v := *(*uint64)(unsafe.Add(base, i*64))
		sum += v
		x += v
	}
	return sum
}

// mixLine is splitmix64's finalizer: a random line number from a counter.
func mixLine(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
