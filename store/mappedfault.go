package store

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"unsafe"

	"github.com/filterstore/filterstore/mmapbits"
)

// A read through a layer file's mapping faults (SIGBUS) where the page
// lies past the file's end (another process truncated it) or the disk
// cannot read it (EIO, once the page has left the cache). The Go runtime
// kills the process for such a fault, unless the goroutine asked to
// panic instead (debug.SetPanicOnFault). The calls that read a whole
// filter, and are no hot path (Check, Fill, WriteTo), read under
// readMapped, which turns the fault into an error naming the file and
// what is wrong with it. Batch lookups (HasMany and its forms, a Bitmap's
// GetMany) read under guardLookup, once a chunk of 256 keys (a GetMany
// whole): a fault makes the filter answer "maybe" from then on and fails
// the store. Single lookups do the same with Options.GuardLookups, off by
// default (each pays the guard: 17-27 ns, 1.8-3.4x a lookup's time on
// filters of 2^20 keys in BenchmarkLookupGuarded). Changes, and Open's
// replay, run under guards of their own, always (changeguard.go). A
// chunk's guard costs nothing measurable: the batch lookups took
// 0.95-1.05x their time unguarded (medians of three alternated runs of
// BenchmarkHasMany at 1e7, every kind).

// readMapped runs read, which reads the mapping of the layer file at path
// whose data words are words, and returns nil, or, if a read faulted, an
// error naming the file: wrapping ErrCorrupt if the file is shorter than
// its header says or gone, else the error a plain read of the faulting
// page returns (EIO from a failing disk), else syscall.EIO. A panic that
// is not such a fault goes on.
func readMapped(path string, h mmapbits.Header, words []uint64, read func()) error {
	return accessMapped(path, h, words, "a read", read)
}

// accessMapped is readMapped for fn, which reads or writes the mapping
// as access says ("a read", "a write"), for the error's words.
func accessMapped(path string, h mmapbits.Header, words []uint64, access string, fn func()) error {
	if addr, faulted := faultGuarded(fn); faulted {
		return mappedFaultError(path, h, words, addr, access)
	}
	return nil
}

// faultGuarded runs read with faults turned into panics (see
// readMapped), and returns the address of the fault that stopped it, if
// one did. A panic that is not such a fault goes on.
func faultGuarded(read func()) (addr uintptr, faulted bool) {
	// One deferred call, which checks recover's answer before it calls
	// on: 14 ns a call against 19 with a second defer for the setting (a
	// throwaway benchmark on the development VM).
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			addr, faulted = faultOf(r)
		}
	}()
	read()
	return 0, false
}

// faultOf returns the address of r, a recovered panic, if it is a fault
// of a mapping's read (mappedFault); false for no panic (r nil). Any other
// panic goes on.
func faultOf(r any) (uintptr, bool) {
	if r == nil {
		return 0, false
	}
	addr, ok := mappedFault(r)
	if !ok {
		panic(r)
	}
	return addr, true
}

// mappedFault reports whether a recovered panic is a memory fault at an
// address a mapping may hold (not a nil dereference, whose address is in
// the unmapped first pages), and the address.
func mappedFault(r any) (uintptr, bool) {
	re, ok := r.(runtime.Error)
	if !ok {
		return 0, false
	}
	a, ok := re.(interface{ Addr() uintptr })
	if !ok || a.Addr() < 1<<16 {
		return 0, false
	}
	return a.Addr(), true
}

// mappedFaultError explains a fault at addr reading the mapping of the
// layer file at path (see readMapped), or writing it: access says which
// ("a read", "a write", "a read or write"). (The runtime's text for such a
// fault, whatever the signal, is that of a nil dereference: the message
// gives the address instead.)
func mappedFaultError(path string, h mmapbits.Header, words []uint64, addr uintptr, access string) error {
	fault := fmt.Sprintf("%s of its mapping faulted (SIGBUS at %#x)", access, addr)
	fi, err := os.Stat(path)
	if err != nil {
		// Gone or replaced since it was mapped.
		return fmt.Errorf("store: %s: %w: %s, and the file cannot be looked at: %w", path, ErrCorrupt, fault, err)
	}
	if want := h.FileSize(); fi.Size() < want {
		return fmt.Errorf("store: %s: %w: the file is %d bytes, its header says %d: truncated while mapped (%s)",
			path, ErrCorrupt, fi.Size(), want, fault)
	}
	// The faulting page, where the address is in the data; else the
	// checksum pages after the data (small: 4 bytes a data page), which
	// the checks read too.
	dataEnd := int64(mmapbits.HeaderSize) + int64(h.DataPages)*mmapbits.PageSize
	off, n := dataEnd, max(h.FileSize()-dataEnd, 0)
	if len(words) > 0 {
		base := uintptr(unsafe.Pointer(&words[0]))
		switch {
		case addr >= base && addr-base < uintptr(len(words))*8:
			off = mmapbits.HeaderSize + int64(addr-base)/mmapbits.PageSize*mmapbits.PageSize
			n = mmapbits.PageSize
		case addr < base && base-addr <= mmapbits.HeaderSize:
			// The header page, before the data in the mapping.
			off, n = 0, mmapbits.HeaderSize
		}
	}
	if rerr := readRange(path, off, n); rerr != nil {
		return fmt.Errorf("store: %s: reading bytes %d-%d: %w (%s)", path, off, off+n-1, rerr, fault)
	}
	return fmt.Errorf("store: %s: %w: %s, though a plain read of bytes %d-%d succeeds now", path, syscall.EIO, fault, off, off+n-1)
}

// readRange reads n bytes of the file at path from off, and returns the
// first error other than the end of the file.
func readRange(path string, off, n int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, min(n, 1<<20))
	for end := off + n; off < end; off += int64(len(buf)) {
		m, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		if err == io.EOF || err == nil && m == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// guardLookup runs read, a batch lookup's reads of b's mapped layers, and
// reports whether it ran to its end. read must hold no mutex: a fault
// unwinds it. If a read faulted, the filter answers every lookup "maybe"
// from then on (off is set, and slow, called here, points the handle's
// front at the path that checks off before it reads), the store fails
// with an error naming the file (changes to a file that faults could
// not be made), and guardLookup returns false: the caller answers every
// key of the batch "maybe". A panic that is not such a fault goes on.
func (b *filterBase) guardLookup(read func(), slow func()) (ok bool) {
	addr, faulted := faultGuarded(read)
	if faulted {
		b.lookupFaulted(addr, slow)
	}
	return !faulted
}

// lookupFaulted turns the filter's lookups off (off, then slow, which
// points the handle's front at the path that checks off before it reads)
// and fails the store for a lookup's fault at addr, with the error
// readMapped would give for the layer whose data holds addr.
func (b *filterBase) lookupFaulted(addr uintptr, slow func()) {
	b.off.Store(true)
	slow()
	b.mu.Lock()
	err, _ := b.faultError(addr, "a read")
	b.mu.Unlock()
	if err == nil {
		err = fmt.Errorf("store: filter %q: %w: a lookup's read of its mapping faulted (SIGBUS at %#x)", b.name(), syscall.EIO, addr)
	}
	b.s.opts.Logger.Error("a lookup's read faulted: the filter answers every lookup \"maybe\"", "filter", b.name(), "err", err)
	b.s.fail(err)
}

// faultError returns the error readMapped would give for a fault at addr
// in the mapping of one of b's layer files (its header page, data or
// checksum pages; access as for mappedFaultError), and true; nil and
// false if addr is in none of them. Called with b.mu held.
func (b *filterBase) faultError(addr uintptr, access string) (error, bool) {
	for i, r := range b.regions {
		words := r.Words()
		if len(words) > 0 {
			// The whole file is mapped, the data after the header page
			// (mmapbits.OS).
			start := uintptr(unsafe.Pointer(&words[0])) - mmapbits.HeaderSize
			if addr >= start && addr-start < uintptr(r.Header().FileSize()) {
				return mappedFaultError(b.path(i), r.Header(), words, addr, access), true
			}
		}
	}
	return nil, false
}

// recoverLookup is deferred by a guarded single lookup, after it asked
// for faults as panics (debug.SetPanicOnFault, whose earlier setting was
// old): it puts the setting back, recovers a fault as guardLookup does
// and sets *ok, the lookup's answer, to "maybe". A panic that is not such
// a fault goes on. (One deferred call for both, as in faultGuarded; in
// BenchmarkLookupGuarded the guard's cost did not move beyond the noise,
// 18-29 ns over an unguarded lookup against 19-27 with two.)
func (b *filterBase) recoverLookup(ok *bool, slow func(), old bool) {
	debug.SetPanicOnFault(old)
	r := recover()
	if r == nil {
		return // the common case, with no call (faultOf is not inlined)
	}
	addr, _ := faultOf(r)
	*ok = true
	b.lookupFaulted(addr, slow)
}
