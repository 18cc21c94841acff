package wal

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Group commit.
//
// Append only encodes records into l.pend under l.mu. Whoever needs them
// written (WaitDurable, Sync, Close, the background syncer, or Append past
// maxPending) calls await, which makes at most one goroutine at a time the
// leader: the leader takes all of l.pend, drops the lock, writes it with one
// Write per segment and, if asked, one fdatasync, then publishes the new
// watermarks and wakes everyone (those waiting only for the write, as
// soon as it is done: see lead). Records appended while it works wait for
// the next leader, who takes them all at once: that is what makes N
// concurrent WaitDurable calls cost far fewer than N syncs.
//
// Under SyncAlways a leader first gathers its group (see gather): the
// writers the last sync released are on their way back with their next
// records, and a sync started before they arrive makes them wait for a
// whole further sync. Without it, N closed-loop writers split into two
// halves that alternate between the sync in flight and the next one, so a
// sync carries N/2 records and each write waits about two syncs.
//
// Under SyncInterval a record needs only its write to be acknowledged, and
// the background fdatasync would hold up every write that came during it
// (a millisecond on a quiet SSD, much more on a busy disk: the write path
// of an engine that logs its filter changes externally). So while the
// leader waits in the fdatasync of its round, one goroutine that needs its
// records written, and only that, may write the records appended since
// (sideWrite): the leader's sync covers only the records it wrote before
// it (its target), so which of the two finishes first does not matter.
// The side writer never starts a segment (it leaves records that start
// one to the next leader), and the leader waits for it before its round
// ends, so that writes stay in LSN order and Close and truncation still
// find no one writing once the leader is gone.

// maxExtraRounds bounds how many rounds a leader runs for others after its
// own records are durable, so that its own latency stays bounded.
const maxExtraRounds = 4

// Bounds of gather: it stops waiting for the expected writers once none has
// appended for gatherIdle (or a sixteenth of the last fdatasync's duration,
// if longer), or once it has waited half the last fdatasync's duration (at
// most gatherMax), so that it adds at most that to a write's latency when
// the writers do not come back.
const (
	gatherIdle = 30 * time.Microsecond
	gatherMax  = 2 * time.Millisecond
)

// checkWait validates the arguments common to the wait methods. l.mu is
// held.
func (l *Log) checkWait(op string, lsn uint64) error {
	if l.closed {
		return ErrClosed
	}
	if lsn >= l.next {
		return fmt.Errorf("wal: %s(%d): LSN not appended yet (last is %d): %w", op, lsn, l.next-1, ErrInvalid)
	}
	return nil
}

// await blocks until record lsn is written (sync false) or fdatasynced
// (sync true), leading the writes itself when no one else does.
func (l *Log) await(op string, lsn uint64, sync bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWait(op, lsn); err != nil {
		return err
	}
	return l.awaitLocked(lsn, sync)
}

// awaitLocked is await with l.mu held; it may release and reacquire it.
func (l *Log) awaitLocked(lsn uint64, sync bool) error {
	for {
		if sync && l.durable >= lsn || !sync && l.written >= lsn {
			return nil
		}
		if l.err != nil {
			return l.err
		}
		if l.closed {
			return ErrClosed
		}
		if l.leading {
			if !sync && l.canSideWrite() {
				l.sideWrite()
				continue
			}
			if sync {
				l.syncWaiters++
			} else {
				l.writeWaiters++
			}
			l.cond.Wait()
			if sync {
				l.syncWaiters--
			} else {
				l.writeWaiters--
			}
			continue
		}
		if sync {
			l.gather()
		}
		l.lead(sync)
		// Keep leading a few rounds while others wait for a sync: handing
		// over costs a wake-up storm on the critical path.
		for range maxExtraRounds {
			if l.err != nil || l.closed || l.syncWaiters == 0 || len(l.pend) == 0 || !sync {
				break
			}
			l.gather()
			l.lead(true)
		}
	}
}

// gather makes the caller the leader and, under SyncAlways, waits for the
// group the last sync predicted (l.expect appends) before it returns to
// sync them: it yields the processor with l.mu released, so that the
// writers that sync released can run and append, and stops early once
// appends stop arriving (gatherIdle) or after half the last sync's
// duration. A single writer, or writers that all appended already, pass
// straight through. l.mu is held on entry and on return; l.leading is true
// on return, so that no one else leads (and Close and truncation wait)
// meanwhile.
func (l *Log) gather() {
	l.leading = true
	if l.opts.Sync != SyncAlways || l.appends >= l.expect || l.syncTook <= 0 {
		return
	}
	limit := min(l.syncTook/2, gatherMax)
	idle := max(gatherIdle, l.syncTook/16)
	start := time.Now()
	last, seen := start, l.appends
	for l.appends < l.expect {
		l.mu.Unlock()
		runtime.Gosched()
		l.mu.Lock()
		now := time.Now()
		if l.appends != seen {
			last, seen = now, l.appends
		}
		if now.Sub(last) > idle || now.Sub(start) > limit {
			break
		}
	}
	l.stats.Gathers++
}

// lead makes the calling goroutine the leader for one round: it writes all
// pending records and, if sync, fdatasyncs them, releasing the callers
// that wait only for the write in between. l.mu is held on entry and on
// return but not during I/O. l.leading may be true on entry only if the
// caller set it (gather).
func (l *Log) lead(sync bool) {
	// The round calls the caller's code: its FS (Options.FS) and OnSync,
	// which may panic (its Logger cannot: package safelog). The panic
	// must not leave the log led by no one (leading set for ever: every
	// waiter, Close and the next round hung) nor with l.mu in the wrong
	// state for the callers' deferred unlock: abandonRound fails the log
	// (buf's records may be unwritten), ends the round, and the panic
	// goes on with l.mu held, as on entry.
	held := true // l.mu is held by this goroutine
	defer func() {
		if p := recover(); p != nil {
			if !held {
				l.mu.Lock()
			}
			l.abandonRound(p, false)
			panic(p)
		}
	}()
	l.leading = true
	buf, cuts := l.pend, l.pendCuts
	l.pend, l.pendCuts = l.spare[:0], l.spareCuts[:0]
	taken := l.appends
	l.appends = 0
	target := l.next - 1 // every record in buf is <= target
	l.mu.Unlock()
	held = false

	synced, err := l.flush(buf, cuts)
	if sync && err == nil {
		l.mu.Lock()
		held = true
		dirty := l.activeDirty
		if dirty {
			// The records are with the operating system: release the
			// calls that wait for no more (WaitWritten: a SyncInterval
			// add, an external apply) before the fdatasync, which on a
			// slow disk is most of the round, and let one of the calls
			// that come during it write their records (sideWrite).
			l.written = target
			l.syncing = true
			if l.writeWaiters > 0 {
				l.cond.Broadcast()
			}
		}
		l.mu.Unlock()
		held = false
		if dirty {
			err = l.syncActive()
		}
	}
	if sync && err == nil {
		synced = target
	}

	l.mu.Lock()
	held = true
	if err != nil && l.err == nil {
		// Before waiting for a side write, which then acknowledges
		// nothing.
		l.err = err
		l.failed.Store(true)
		l.logUnlocked(func() { l.log.Error("wal: write failed; the log refuses further appends", "err", err) })
	}
	for l.sideWriting {
		l.cond.Wait()
	}
	l.syncing = false
	if sync && err == nil {
		// The writers released now come back, and those that appended
		// meanwhile wait: together, the next group.
		l.expect = taken + l.appends
	}
	if cap(buf) <= 2*maxPending {
		l.spare, l.spareCuts = buf, cuts
	} else {
		l.spare, l.spareCuts = nil, nil
	}
	if err == nil {
		l.written = max(l.written, target) // a side write may have gone further
	}
	if synced > l.durable {
		l.durable = synced
		if cb := l.opts.OnSync; cb != nil {
			l.mu.Unlock()
			held = false
			cb(synced)
			l.mu.Lock()
			held = true
		}
	}
	l.leading = false
	l.cond.Broadcast()
}

// canSideWrite reports whether the calling goroutine, which waits for
// records to be written, may write the pending ones itself while the
// leader waits in its fdatasync. l.mu is held.
func (l *Log) canSideWrite() bool {
	return l.syncing && !l.sideWriting && len(l.pend) > 0 && len(l.pendCuts) == 0 &&
		l.opts.Sync == SyncInterval
}

// sideWrite writes the pending records while the leader waits in the
// fdatasync of its round (see the top of this file). Under SyncInterval
// only: reserve, which SyncAlways uses, is the leader's alone. l.mu is
// held on entry and on return, but not during the write.
func (l *Log) sideWrite() {
	// As in lead: a panic of the FS must not leave sideWriting set, which
	// the leader waits on for ever.
	defer func() {
		if p := recover(); p != nil {
			l.abandonRound(p, true)
			panic(p)
		}
	}()
	l.sideWriting = true
	buf := l.pend
	l.pend = nil // the leader's spare may share buf's array
	l.appends = 0
	target := l.next - 1
	l.mu.Unlock()

	err := l.write(buf)

	l.mu.Lock()
	if err != nil && l.err == nil {
		l.err = err
		l.failed.Store(true)
		l.logUnlocked(func() { l.log.Error("wal: write failed; the log refuses further appends", "err", err) })
	}
	// If the leader's fdatasync failed meanwhile, acknowledge nothing more.
	if err == nil && l.err == nil {
		l.written = max(l.written, target)
	}
	l.stats.SideWrites++
	l.sideWriting = false
	l.cond.Broadcast()
}

// flush writes buf to the log, starting new segments at cuts (the
// segments it seals are fdatasynced; the last one is not). It returns the LSN up to which a
// rotation made records durable (0 if none). Only the leader calls it.
func (l *Log) flush(buf []byte, cuts []cut) (synced uint64, err error) {
	start := 0
	for i := 0; i <= len(cuts); i++ {
		end := len(buf)
		if i < len(cuts) {
			end = cuts[i].off
		}
		if end > start {
			if err := l.write(buf[start:end]); err != nil {
				return synced, err
			}
		}
		if i < len(cuts) {
			if err := l.sealActive(); err != nil {
				return synced, err
			}
			synced = cuts[i].first - 1
			if err := l.rotate(cuts[i].first); err != nil {
				return synced, err
			}
		}
		start = end
	}
	return synced, nil
}

// write appends b to the active segment.
func (l *Log) write(b []byte) error {
	if err := l.reserve(int64(len(b))); err != nil {
		return err
	}
	n, err := l.active.Write(b)
	l.mu.Lock()
	// After the write, so that a sync that began before the write ended
	// cannot clear it (syncActive clears it before it syncs).
	l.activeDirty = true
	l.segs[len(l.segs)-1].size += int64(n)
	l.stats.Writes++
	l.stats.Bytes += uint64(n)
	name := l.segs[len(l.segs)-1].name
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("wal: write segment %s: %w", name, err)
	}
	return nil
}

// syncActive fdatasyncs the active segment. It marks the segment clean
// before the sync starts, so that a side write during the sync leaves it
// dirty; a failed sync fails the log, which then writes nothing more.
func (l *Log) syncActive() error {
	l.mu.Lock()
	l.activeDirty = false
	l.mu.Unlock()
	start := time.Now()
	err := l.active.Sync()
	took := time.Since(start)
	l.mu.Lock()
	l.syncTook = took
	l.stats.Syncs++
	name := l.segs[len(l.segs)-1].name
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("wal: sync segment %s: %w", name, err)
	}
	return nil
}

// allocChunk is how far ahead of its writes the log reserves the space of
// its last segment (at most to SegmentSize, unless a write goes past it or
// a rotation was postponed: rotate).
// Each reservation writes and syncs that many zeros, a few milliseconds
// that the write taking the log past the reserved space waits for.
const allocChunk = 1 << 20

// reserve makes sure that the active segment's file extends past a write
// of n more bytes with zeros that are durable, if the log syncs every
// commit (SyncAlways) and its File is an Allocator: then the write changes
// no file size and allocates no block, and the fdatasync after it has only
// data to flush. (Under SyncInterval a sync every SyncEvery would gain
// little, and writers that never wait for a sync would wait for the
// reservation's.) The reservation is an optimization: if Allocate fails
// (a full disk), the log appends without, and the write reports the error
// that matters. It returns the error of the sync that makes the zeros
// durable, which is the log's: that sync covers the records written
// before too.
func (l *Log) reserve(n int64) error {
	if l.opts.Sync != SyncAlways {
		return nil // and touches nothing: side writes call it too
	}
	a, ok := l.active.(Allocator)
	if !ok || l.noAlloc {
		return nil
	}
	l.mu.Lock()
	s := l.segs[len(l.segs)-1]
	l.mu.Unlock()
	need := s.size + n
	if need <= l.allocated {
		return nil
	}
	size := (need + allocChunk - 1) / allocChunk * allocChunk
	if l.postponed == 0 {
		// A rotation ends the segment at SegmentSize (or after a write
		// larger than that). Once a rotation was postponed the segment
		// goes on: it reserves by chunks.
		size = min(size, max(l.opts.SegmentSize, need))
	}
	l.reserved = true // even a failed Allocate may have grown the file
	if err := a.Allocate(size); err != nil {
		l.noAlloc = true
		l.log.Warn("wal: cannot reserve segment space; appending without", "segment", s.name, "err", err)
		return nil
	}
	err := l.active.Sync()
	l.mu.Lock()
	l.stats.Syncs++
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("wal: sync segment %s: %w", s.name, err)
	}
	l.allocated = size
	return nil
}

// sealActive makes the active segment final before a new one follows it:
// it trims the space reserved past its records (a segment that is not the
// last must end with its last record) and syncs it.
func (l *Log) sealActive() error {
	if l.reserved {
		l.mu.Lock()
		s := l.segs[len(l.segs)-1]
		l.mu.Unlock()
		if err := l.active.Truncate(s.size); err != nil {
			return fmt.Errorf("wal: trim segment %s to %d: %w", s.name, s.size, err)
		}
		l.reserved, l.allocated = false, 0
		l.mu.Lock()
		l.activeDirty = true
		l.mu.Unlock()
	}
	l.mu.Lock()
	dirty := l.activeDirty
	l.mu.Unlock()
	if dirty {
		return l.syncActive()
	}
	return nil
}

// rotate seals the active segment and makes a new segment starting at
// first the active one.
//
// If the new segment cannot be made for want of room (ENOSPC: no free
// block or inode; EDQUOT) or of file descriptors (EMFILE, ENFILE), and
// its name never appeared in the directory (the temporary file's create,
// header write, sync or rename failed), rotate postpones the rotation:
// it logs the error and returns nil, and the records go on into the
// active segment, which the log tries to leave again once another
// SegmentSize of records has gone into it, or at the next StartSegment.
// A segment is read to its end whatever its size, and the next segment's
// first LSN is the cut's where the rotation succeeds, so the log stays
// one sequence; what is lost is only that the longer segment is deleted
// later. A disk out of inodes, or too full for a segment's header but
// not for records, thus no longer fails the log. The segment Open found
// holding records (activeInherited) is never written to, so a rotation
// away from it fails as before.
func (l *Log) rotate(first uint64) error {
	if err := l.sealActive(); err != nil {
		return err
	}
	f, err := l.createSegment(first)
	if err != nil {
		var nm *notMadeError
		l.mu.Lock()
		inherited := l.activeInherited
		l.mu.Unlock()
		if !errors.As(err, &nm) || !lacksRoom(err) || inherited {
			return err
		}
		l.postponed++
		l.mu.Lock()
		l.stats.PostponedRotations++
		name := l.segs[len(l.segs)-1].name
		l.mu.Unlock()
		if l.postponed == 1 {
			l.log.Warn("wal: cannot start a new segment; appending to the active one", "segment", name, "err", err)
		} else {
			l.log.Debug("wal: cannot start a new segment again", "segment", name, "times", l.postponed, "err", err)
		}
		return nil
	}
	if l.postponed > 0 {
		l.log.Info("wal: started a new segment after postponing", "first", first, "postponed", l.postponed)
		l.postponed = 0
	}
	old := l.active
	l.active = f
	l.noAlloc = false
	l.mu.Lock()
	l.activeInherited = false
	l.segs = append(l.segs, segment{first: first, name: SegmentName(first), size: SegmentHeaderSize})
	l.mu.Unlock()
	if err := old.Close(); err != nil {
		l.log.Warn("wal: close segment", "err", err)
	}
	return nil
}

// syncLoop is the background syncer of SyncInterval.
func (l *Log) syncLoop() {
	defer close(l.bgDone)
	t := time.NewTicker(l.opts.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if !l.closed && l.err == nil {
			// An error is sticky and already logged; Close reports it.
			_ = l.awaitLocked(l.next-1, true)
		}
		l.mu.Unlock()
	}
}

// logUnlocked runs log, a call of the caller's Logger, with l.mu released
// (and takes it again): the logger's handler is the caller's code, and
// one that calls back into the log (Store.Stats, which reads the log's
// counters under l.mu) would otherwise wait for itself, with every writer,
// the background sync and Close behind it (an adversarial review: a
// handler that added Stats to each error record hung the store at its
// first failed WAL write). Called with l.mu held, by the leader or a side
// writer, whose flags (leading, sideWriting) keep the others waiting
// meanwhile, as during their writes; the error it logs is already set.
func (l *Log) logUnlocked(log func()) {
	l.mu.Unlock()
	defer l.mu.Lock()
	log()
}

// abandonRound ends a round (side, a side write; else the leader's) that
// a panic of the caller's code interrupted, with l.mu held: the log
// fails, if it has not already (the round's records may be unwritten,
// and a later round must not make LSNs past them durable), and the
// others are released, as at the end of a failed round.
func (l *Log) abandonRound(p any, side bool) {
	if l.err == nil {
		l.err = fmt.Errorf("wal: a panic during a write (%v): the log refuses further appends", p)
		l.failed.Store(true)
	}
	if side {
		l.sideWriting = false
	} else {
		for l.sideWriting {
			l.cond.Wait()
		}
		l.syncing = false
		// buf was not handed back: pend may share the spare's array.
		l.spare, l.spareCuts = nil, nil
		l.leading = false
	}
	l.cond.Broadcast()
}
