package wal

import (
	"errors"
	"fmt"
	"slices"
)

// errStopScan stops a scan early from inside its callback.
var errStopScan = errors.New("wal: stop scan")

// Replay calls fn for every record with from <= lsn <= LastLSN(), in LSN
// order, as of the call: records appended concurrently may or may not be
// visited. Records below FirstLSN() no longer exist and are silently
// skipped; compare FirstLSN with from to detect that. Replay first writes
// (without syncing) any records still buffered, so it sees everything
// appended. The payload is only valid during the call to fn. An error from
// fn stops the replay and is returned as is; a record that fails its checks
// gives a *CorruptError. Replay may run on a freshly opened log before any
// append, and concurrently with appends; fn must not call TruncateBefore or
// SetNextLSN, which wait for Replay to finish.
func (l *Log) Replay(from uint64, fn func(lsn uint64, payload []byte) error) error {
	if fn == nil {
		return fmt.Errorf("wal: Replay: nil fn: %w", ErrInvalid)
	}
	l.adminMu.RLock()
	defer l.adminMu.RUnlock()
	l.mu.Lock()
	if l.closing || l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	last := l.next - 1
	if err := l.awaitLocked(last, false); err != nil {
		l.mu.Unlock()
		return err
	}
	segs := slices.Clone(l.segs)
	l.mu.Unlock()

	// The segments cannot go away meanwhile (adminMu), and every byte up to
	// each one's size is written: read exactly those, with Open's checks.
	sc := &scanner{fs: l.fs, dir: l.dir, storeID: l.opts.StoreID}
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].first <= from {
			sc.expect = 0 // every record of s is below from
			continue
		}
		if s.first > last {
			break
		}
		_, err := sc.segment(s.name, s.first, s.size, tailWritten, func(_ int64, lsn uint64, payload []byte) error {
			if lsn > last {
				return errStopScan
			}
			if lsn < from {
				return nil
			}
			return fn(lsn, payload)
		})
		if err == errStopScan {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}
