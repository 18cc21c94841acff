package wal

import (
	"errors"
	"fmt"
	"os"
	"slices"
)

// TruncateBefore deletes the segments all of whose records are below lsn,
// oldest first, never the last (active) segment. Each removal is made
// durable (directory sync) before the next, so a crash leaves a contiguous
// run of segments. FirstLSN reports the result.
func (l *Log) TruncateBefore(lsn uint64) error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	l.mu.Lock()
	if l.closing || l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	var doomed []segment
	for i := 0; i+1 < len(l.segs) && l.segs[i+1].first <= lsn; i++ {
		doomed = append(doomed, l.segs[i])
	}
	l.mu.Unlock()
	for _, s := range doomed {
		if err := l.removeOldest(s); err != nil {
			return err
		}
	}
	return nil
}

// removeOldest durably removes segment s, the oldest, and takes it out of
// the list once its file is gone, even if the directory sync after the
// removal failed: the list names the files there are. Only TruncateBefore
// and SetNextLSN, serialized by adminMu, remove segments, so s is still
// the oldest.
func (l *Log) removeOldest(s segment) error {
	if err := l.fs.Remove(l.path(s.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wal: remove segment %s: %w", s.name, err)
	}
	err := l.fs.SyncDir(l.dir)
	l.mu.Lock()
	l.stats.DirSyncs++
	l.segs = slices.Delete(l.segs, 0, 1)
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("wal: remove segment %s: sync dir: %w", s.name, err)
	}
	return nil
}

// SetNextLSN makes next the LSN of the next appended record, if that is
// beyond LastLSN()+1; otherwise it does nothing, so LSNs never go backwards.
// Moving forward leaves a gap, which the format forbids inside a log, so it
// declares every record of the log obsolete: it syncs, deletes every
// segment (oldest first, durably) and starts an empty segment at next.
//
// The store calls it after Open with its checkpoint LSN + 1: if the
// checkpoint is beyond the end of the log (the log was truncated, or lost
// unsynced records), numbering resumes after the checkpoint. It must not
// run concurrently with Append. If it fails (the log then refuses
// appends), or the process dies, after the deletes and before the new
// segment is in place, the directory holds no segment, and the next Open
// numbers from LSN 1 again: a caller whose LSNs must never go backwards
// calls SetNextLSN after every Open, as the store does with its
// checkpoint.
func (l *Log) SetNextLSN(next uint64) error {
	var old []segment
	beyond := false
	err := l.adminLead("SetNextLSN", func() bool {
		if next <= l.next {
			return false
		}
		if next > MaxLSN {
			beyond = true // a segment there would not be the log's
			return false
		}
		old = slices.Clone(l.segs)
		l.next, l.written, l.durable = next, next-1, next-1
		l.tailSize = SegmentHeaderSize
		return true
	}, func() error { return l.restartAt(next, old) })
	if err == nil && beyond {
		err = fmt.Errorf("wal: SetNextLSN(%d): above MaxLSN %d: %w", next, uint64(MaxLSN), ErrInvalid)
	}
	return err
}

// adminLead runs an administrative change of the segments (SetNextLSN,
// StartSegment) as the leader, so that no write touches the segments
// meanwhile. It syncs, waits for the current leader, and refuses if an
// append is pending or the log failed; then prepare, called with l.mu held,
// updates the log's state and reports whether there is anything to do, and
// change, called without l.mu, does it. A failed change makes the log
// refuse further appends.
func (l *Log) adminLead(op string, prepare func() bool, change func() error) error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	if err := l.Sync(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.closing || l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	for l.leading {
		l.cond.Wait()
	}
	if len(l.pend) > 0 {
		l.mu.Unlock()
		return fmt.Errorf("wal: %s called concurrently with Append: %w", op, ErrInvalid)
	}
	if l.err != nil {
		l.mu.Unlock()
		return l.err
	}
	if !prepare() {
		l.mu.Unlock()
		return nil
	}
	l.leading = true
	l.mu.Unlock()

	err := func() error {
		// A panic of the caller's FS in change must not leave leading
		// set for ever: the log fails, as after a failed change, and
		// the panic goes on.
		defer func() {
			if p := recover(); p != nil {
				l.mu.Lock()
				if l.err == nil {
					l.err = fmt.Errorf("wal: %s: a panic (%v): the log refuses further appends", op, p)
					l.failed.Store(true)
				}
				l.leading = false
				l.cond.Broadcast()
				l.mu.Unlock()
				panic(p)
			}
		}()
		return change()
	}()

	l.mu.Lock()
	first := err != nil && l.err == nil
	if first {
		l.err = err
		l.failed.Store(true)
	}
	l.leading = false
	l.cond.Broadcast()
	l.mu.Unlock()
	if first {
		// Outside l.mu: the handler may call back into the log (see
		// logUnlocked).
		l.log.Error("wal: "+op+" failed; the log refuses further appends", "err", err)
	}
	return err
}

// restartAt replaces the segments old by one empty segment starting at
// next. Only the leader calls it.
func (l *Log) restartAt(next uint64, old []segment) error {
	if err := l.active.Close(); err != nil {
		l.log.Warn("wal: close segment", "err", err)
	}
	l.active = nil
	for _, s := range old {
		if err := l.removeOldest(s); err != nil {
			return err
		}
	}
	f, err := l.createSegment(next)
	if err != nil {
		return err
	}
	l.active = f
	l.postponed = 0
	l.reserved, l.allocated, l.noAlloc = false, 0, false
	l.mu.Lock()
	l.activeInherited = false
	l.activeDirty = false
	l.segs = append(l.segs, segment{first: next, name: SegmentName(next), size: SegmentHeaderSize})
	l.mu.Unlock()
	return nil
}

// StartSegment makes the next record start a new segment, so that a
// following TruncateBefore can delete the current one once its records are
// obsolete: the store calls it at a checkpoint, so that reopening never
// re-reads records the checkpoint made obsolete. It syncs first, and does
// nothing if the active segment holds no record. It must not run
// concurrently with Append.
func (l *Log) StartSegment() error {
	var next uint64
	return l.adminLead("StartSegment", func() bool {
		if !holdsRecord(l.tailSize) {
			return false // the active segment holds no record
		}
		if l.next > MaxLSN {
			return false // the log is full: no record can go in a new segment
		}
		next = l.next
		l.tailSize = SegmentHeaderSize
		return true
	}, func() error { return l.rotate(next) })
}
