package store

import (
	"fmt"
	"runtime/debug"
	"syscall"
)

// Changes read and write a filter's mapping too, with its mutex held: a
// Bloom add reads the layers and sets bits, a cuckoo, counting or bitmap
// change reads the words it plans against, and the after-images of a
// durable change are stored into the file (applyThrough). Each of those
// runs under the fault guard of changes (guardChange, or recoverChange
// deferred by the single changes themselves), always: a layer file
// truncated by another process, or a page the disk cannot read back, fails
// the change and the store with an error naming the file, where the fault
// (SIGBUS) killed the process before. It costs a change that changes
// nothing 9-36 ns more (medians of five alternations, BenchmarkNoopChange:
// 1.05-1.17x), a change that logs a record no more than the noise of its
// WAL write (1.4-1.5 µs under SyncInterval, BenchmarkDurableAdd). What the
// change did before the fault is never acknowledged (the store has
// failed): Bloom bits it set are extra bits, harmless as after a crash,
// and after-images it stored are those of durable records, which the next
// Open replays onto the file again (or finds the file short and opens
// that filter broken).

// guardChange runs change, the part of a change of b that reads or
// writes b's mapped layers, with b.mu held, and returns change's error.
// If a read or write faulted, it returns changeFaulted's error instead,
// with b.mu still held (change must not release it: a fault unwinds it).
// A panic that is not such a fault goes on.
func (b *filterBase) guardChange(change func() error) (err error) {
	defer b.recoverChange(&err, debug.SetPanicOnFault(true))
	return change()
}

// recoverChange is the guard of guardChange, which the single changes
// defer themselves (planAdd and its like: a closure fewer, 15-20 ns of a
// cuckoo AddNX that finds its key in BenchmarkNoopChange): deferred by a
// function that reads or writes b's mapped layers with b.mu held, after
// it asked for faults as panics (debug.SetPanicOnFault, whose earlier
// setting was old), it puts the setting back and turns a fault into
// changeFaulted's error in *err. A panic that is not such a fault goes
// on.
func (b *filterBase) recoverChange(err *error, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		addr, _ := faultOf(r)
		*err = changeFaulted(addr, []*filterBase{b})
	}
}

// guardChanges is guardChange for a change of the filters of fs (a
// Batch's), whose mutexes the caller holds. (The filters' list for
// changeFaulted is made only on a fault: a commit pays nothing for it.)
func guardChanges(fs []*batchFilter, change func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			addr, _ := faultOf(r)
			err = changeFaulted(addr, bases(fs))
		}
	}()
	return change()
}

// changeFaulted handles a change's fault at addr, reading or writing the
// mapping of one of bs, whose mutexes the caller holds: that filter (the
// one whose layer holds addr, else the first) answers every lookup
// "maybe" from then on without reading, as after a lookup's fault, and
// the store fails with the error readMapped would give for the file,
// which changeFaulted returns (wrapping ErrFailed).
func changeFaulted(addr uintptr, bs []*filterBase) error {
	b := bs[0]
	var err error
	for _, c := range bs {
		if e, ok := c.faultError(addr, "a read or write"); ok {
			b, err = c, e
			break
		}
	}
	if err == nil {
		err = fmt.Errorf("store: filter %q: %w: a change's read or write of its mapping faulted (SIGBUS at %#x)", b.name(), syscall.EIO, addr)
	}
	b.off.Store(true)
	if b.toSlow != nil {
		b.toSlow()
	}
	b.s.opts.Logger.Error("a change's read or write of a filter's mapping faulted: the filter answers every lookup \"maybe\"", "filter", b.name(), "err", err)
	return b.s.fail(err)
}
