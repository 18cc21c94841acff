package wal

import (
	"fmt"
	"io"
)

// RewriteInherited makes the records with an LSN above after that the log
// found at Open durable for certain, by writing them again: it copies each
// segment that holds one to a new file, syncs it, renames it over the
// segment and syncs the directory. It must not run concurrently with
// Append. It does nothing if no such record exists (after a clean Close,
// the store's, none does). If it fails, the log refuses further appends.
//
// Open's fdatasync of the last segment is not enough for records written
// by a process whose own fdatasync of them failed: on Linux the kernel
// marks the pages it could not write back clean, so they read back from
// the page cache, a later fdatasync has nothing to write and succeeds, and
// the bytes never reach the disk (see MemFS). A store that replayed such a
// record into its filters, synced them and then lost the power would find
// the filters holding a change its WAL no longer has: the half of a batch
// whose words no earlier record covers, or a cuckoo fingerprint moved out
// of a bucket and not into the other. Copying dirties fresh pages, which
// the sync then writes or fails on. It reads each segment once and writes
// it once: a recovery that replays records since the last checkpoint
// pays for up to SegmentSize per segment holding them.
//
// It never writes over a segment: a write a failing disk cannot complete
// may damage what it overwrites (MemFS takes such bytes as lost), and the
// segment holds acknowledged records. So it needs free space for the
// copy: on a full disk it fails with ENOSPC, the store's recovering Open
// with it, until space is freed (a read-only Open still reads the store).
func (l *Log) RewriteInherited(after uint64) error {
	var targets []int
	return l.adminLead("RewriteInherited", func() bool {
		for i, s := range l.segs {
			last := l.next - 1 // the last LSN in s
			if i+1 < len(l.segs) {
				last = l.segs[i+1].first - 1
			}
			// Records from openNext on were appended, and synced, here.
			if holdsRecord(s.size) && s.first < l.openNext && min(last, l.openNext-1) > after {
				targets = append(targets, i)
			}
		}
		return len(targets) > 0
	}, func() error { return l.rewriteSegments(targets) })
}

// rewriteSegments copies the segments at the indexes given (see
// RewriteInherited); the last one, if among them, becomes the active file.
func (l *Log) rewriteSegments(idx []int) error {
	buf := make([]byte, 1<<20)
	for _, i := range idx {
		l.mu.Lock()
		s := l.segs[i]
		isLast := i == len(l.segs)-1
		l.mu.Unlock()
		f, err := l.copySegment(s, buf)
		if err != nil {
			return err
		}
		if !isLast {
			if err := f.Close(); err != nil {
				l.log.Warn("wal: close segment", "err", err)
			}
			continue
		}
		// The copy, open for appending, replaces the active file; the
		// space the old one reserved past its records is gone with it.
		if err := l.active.Close(); err != nil {
			l.log.Warn("wal: close segment", "err", err)
		}
		l.active = f
		l.reserved, l.allocated, l.noAlloc = false, 0, false
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("wal: rewrite segments: sync dir: %w", err)
	}
	l.mu.Lock()
	l.stats.DirSyncs++
	l.mu.Unlock()
	l.log.Info("wal: rewrote the segments holding records to replay", "segments", len(idx))
	return nil
}

// copySegment writes the s.size bytes of segment s to a new file, syncs it
// and renames it over s; it returns the new file, open for appending.
func (l *Log) copySegment(s segment, buf []byte) (File, error) {
	src, err := l.fs.Open(l.path(s.name))
	if err != nil {
		return nil, fmt.Errorf("wal: rewrite segment %s: %w", s.name, err)
	}
	defer src.Close()
	tmp := l.path(s.name + tmpSuffix)
	f, err := l.fs.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("wal: rewrite segment %s: %w", s.name, err)
	}
	fail := func(err error) (File, error) {
		f.Close()
		l.fs.Remove(tmp)
		return nil, fmt.Errorf("wal: rewrite segment %s: %w", s.name, err)
	}
	for off := int64(0); off < s.size; {
		n := int(min(int64(len(buf)), s.size-off))
		if m, err := src.ReadAt(buf[:n], off); m < n {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("%w: the segment is shorter than the %d bytes of records Open found in it", ErrCorrupt, s.size)
			}
			return fail(err)
		}
		if _, err := f.Write(buf[:n]); err != nil {
			return fail(err)
		}
		off += int64(n)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	l.mu.Lock()
	l.stats.Syncs++
	l.mu.Unlock()
	if err := l.fs.Rename(tmp, l.path(s.name)); err != nil {
		return fail(err)
	}
	noteRenamed(f, l.path(s.name))
	return f, nil
}
