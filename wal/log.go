package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filterstore/filterstore/internal/safelog"
)

// SyncMode says when a record is durable enough to acknowledge. It is
// defined here, once, and package store exposes it under the same name as
// an alias (store.SyncMode = wal.SyncMode): the store's durability mode is
// nothing but the mode of its log, and wal cannot import store.
type SyncMode int

const (
	// SyncAlways makes WaitDurable wait until the record is fdatasynced
	// (shared with concurrent writers by group commit): an acknowledged
	// record survives power loss. The default.
	SyncAlways SyncMode = iota
	// SyncInterval makes WaitDurable wait only until the record has been
	// written to the OS (it survives a process crash); a background
	// goroutine fdatasyncs every Options.SyncEvery, so power loss loses at
	// most about the last interval. DurableLSN, WaitSynced and
	// Options.OnSync tell what has been fdatasynced.
	SyncInterval
)

// String returns "SyncAlways" or "SyncInterval".
func (m SyncMode) String() string {
	switch m {
	case SyncAlways:
		return "SyncAlways"
	case SyncInterval:
		return "SyncInterval"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// Limits of the options.
const (
	DefaultSegmentSize = 64 << 20
	DefaultSyncEvery   = 100 * time.Millisecond
	// MinSegmentSize is small so that tests can rotate often.
	MinSegmentSize = SegmentHeaderSize + RecordHeaderSize
	MaxSegmentSize = 1 << 40

	// maxPending bounds the bytes Append buffers before it writes them
	// itself, when no WaitDurable or background sync has.
	maxPending = 4 << 20
)

// Options configure a Log. The zero value is valid and means every default.
type Options struct {
	// FS is the file system. Default: OSFS{}.
	FS FS
	// SegmentSize is the size at which the log starts a new segment: a
	// batch that would take the last segment past it goes to a new one
	// (unless the segment holds no record yet, so a batch larger than
	// SegmentSize makes a segment of its own). Default: 64 MiB; range
	// [MinSegmentSize, MaxSegmentSize].
	SegmentSize int64
	// Sync is the durability mode. Default: SyncAlways.
	Sync SyncMode
	// SyncEvery is the period of the background fdatasync under
	// SyncInterval; ignored under SyncAlways. Default: 100ms; must be >= 0
	// (0 means the default) and at most an hour.
	SyncEvery time.Duration
	// OnSync, if not nil, is called after each fdatasync that advanced
	// DurableLSN, with the new value, in increasing order, one call at a
	// time, from the goroutine that performed the sync and with no lock
	// held. Appends go on meanwhile, but the next write or sync waits for
	// it to return, so it must be short and must not call WaitDurable,
	// WaitSynced, Sync, Replay, TruncateBefore, SetNextLSN or Close.
	// Default: nil.
	OnSync func(durableLSN uint64)
	// OnSegment, if not nil, is called with the first LSN of each segment
	// the log creates (on Open of an empty log, when a segment fills, at
	// StartSegment and SetNextLSN), once the segment's file and directory
	// entry are durable and before any record is written to it, from the
	// goroutine that creates it, with no lock held. An error fails that
	// creation like a failed write: the log refuses further appends. It
	// lets the owner record durably where the log continues, so that a
	// newest segment lost later is missed rather than taken for the end of
	// the log. It must not call the log's methods. Default: nil.
	OnSegment func(first uint64) error
	// Logger receives a record of each torn tail truncated by Open and of
	// each write or sync failure. Default: slog.Default(). Its handler may
	// call Stats and Err (a record is logged with the log's mutex
	// released); a panic in it is recovered and the record goes to
	// standard error instead, with the panic's value.
	Logger *slog.Logger
	// StoreID, if not 0, identifies the store that owns the log: it is
	// written into the header of every segment the log creates, and Open
	// rejects a version-2 segment carrying another non-zero ID with a
	// *CorruptError (a segment of another store's log that was copied or
	// moved here). Segments with ID 0 (version 1, or written without an
	// ID) are accepted. Default: 0, no identity.
	StoreID uint64
	// Check, if not nil, is called by Open for every valid record of the
	// log, in LSN order, before Open changes anything (leftover temporary
	// files, a torn tail). If it returns an error, Open fails with that
	// error (wrapped: errors.Is and errors.As see it) and leaves every file
	// as it found it. Open may fail for corruption found after some calls.
	// The payload is only valid during the call. Default: nil.
	Check func(lsn uint64, payload []byte) error
}

// withDefaults returns a copy of o with defaults filled in, or an error
// listing every invalid field.
func (o Options) withDefaults() (Options, error) {
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	// The log calls its Logger mid-round, some records with l.mu held: a
	// handler's panic is recovered there (package safelog).
	o.Logger = safelog.Wrap(o.Logger)
	var errs []error
	if o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize {
		errs = append(errs, fmt.Errorf("wal: Options.SegmentSize %d outside [%d, %d]: %w", o.SegmentSize, MinSegmentSize, int64(MaxSegmentSize), ErrInvalid))
	}
	if o.Sync != SyncAlways && o.Sync != SyncInterval {
		errs = append(errs, fmt.Errorf("wal: Options.Sync %v: want SyncAlways or SyncInterval: %w", o.Sync, ErrInvalid))
	}
	if o.SyncEvery < 0 || o.SyncEvery > time.Hour {
		errs = append(errs, fmt.Errorf("wal: Options.SyncEvery %v outside [0, 1h]: %w", o.SyncEvery, ErrInvalid))
	}
	return o, errors.Join(errs...)
}

// Log is a segmented write-ahead log. See the package documentation.
type Log struct {
	dir  string
	opts Options
	fs   FS
	log  *slog.Logger

	// adminMu keeps segment removal (TruncateBefore, SetNextLSN, write
	// lock) away from Replay (read lock).
	adminMu sync.RWMutex

	mu   sync.Mutex
	cond sync.Cond // on mu; broadcast when leading, written, durable, err or closed change

	closing bool        // Close has started: Append fails
	closed  bool        // Close has finished: everything fails
	err     error       // sticky write or sync failure
	failed  atomic.Bool // err is set: Err's check without mu

	next    uint64 // LSN of the next appended record; >= 1
	written uint64 // records <= written are in the OS; written <= next-1
	durable uint64 // records <= durable are fdatasynced; durable <= written

	pend      []byte // records (written, next-1], encoded, in order
	pendCuts  []cut  // where in pend new segments start, in order
	spare     []byte // the leader's previous buffer, for reuse
	spareCuts []cut
	tailSize  int64 // size the last segment will have once pend is written, from the last cut on (rotate)

	// leading is true while one goroutine (the leader) writes or syncs.
	// Only the leader changes active; it and a side writer (sideWrite)
	// write to it, the side writer only while syncing, the leader's final
	// fdatasync of a round. activeDirty is read and written with mu held.
	leading      bool
	syncing      bool
	sideWriting  bool
	syncWaiters  int // goroutines in awaitLocked waiting for a sync
	writeWaiters int // goroutines in awaitLocked waiting for a write

	// Group forming (see gather): appends counts the Append calls whose
	// records are in pend; expect is how many the next sync should carry
	// (those the last sync released plus those that waited behind it);
	// syncTook is how long the last fdatasync took.
	appends     int
	expect      int
	syncTook    time.Duration
	active      File // the last segment, open for appending
	activeDirty bool // active has bytes written since its last Sync began
	// The space reserved ahead of the active segment's writes (reserve):
	// allocated is the size Allocate last made it, reserved says the file
	// may be longer than its data (until sealActive trims it), and
	// noAlloc that Allocate failed on it, so it is not tried again.
	allocated int64
	reserved  bool
	noAlloc   bool
	// inherited says the last segment holds records an earlier process
	// wrote: the next Append starts a new segment (recover).
	inherited bool
	// activeInherited says the active segment is the one Open found and
	// no record of this log went into it (Append clears it when the
	// segment held none, and its records go there): a segment holding an
	// earlier process's records takes no more, so a rotation away from
	// it cannot be postponed (rotate). Guarded by mu.
	activeInherited bool
	// postponed counts the rotations in a row that rotate postponed, for
	// its log lines.
	postponed int
	// openNext is next as Open left it: the records below it were found
	// at Open (RewriteInherited).
	openNext uint64

	segs  []segment // live segments, oldest first; the last one is active
	stats Stats

	stop   chan struct{} // closed by Close to stop the background syncer
	bgDone chan struct{}
}

// segment describes one live segment file.
type segment struct {
	first uint64 // LSN in its name and header
	name  string // base name
	size  int64  // bytes written, header included
}

// holdsRecord reports whether a segment of size bytes (header included)
// holds a record, whichever header version it has: a header takes at most
// SegmentHeaderSize bytes, and a version-1 header plus the smallest record
// take more than that (the constant below fails to compile otherwise).
func holdsRecord(size int64) bool { return size > SegmentHeaderSize }

const _ = uint(SegmentHeaderSizeV1 + RecordHeaderSize - SegmentHeaderSize - 1)

// cut marks that the records of pend from off on go to a new segment whose
// first LSN is first.
type cut struct {
	off   int
	first uint64
}

// Stats are cumulative counters of a Log since Open.
type Stats struct {
	Records  uint64 // records appended
	Bytes    uint64 // record bytes written to segment files
	Writes   uint64 // Write calls on segment files (one per group commit and segment)
	Syncs    uint64 // fdatasyncs of segment files
	DirSyncs uint64 // directory syncs (segment creation and removal)
	Gathers  uint64 // syncs whose leader waited for writers to form a group
	// SideWrites counts the writes made while the leader of a round waited
	// in its fdatasync (SyncInterval), for callers that needed their
	// records written only; Writes counts them too.
	SideWrites uint64
	// PostponedRotations counts the new segments the log could not make
	// for want of room or file descriptors, going on in the active
	// segment instead (package doc, "Durability").
	PostponedRotations uint64
	Segments           int // live segments now
}

// Open opens the log in dir, creating dir and an empty log starting at LSN 1
// if there is none. It validates every segment header and every record's
// CRC and LSN (see Scan) and runs Options.Check on every record; only then
// does it change anything: it removes leftover temporary segment files,
// truncates a torn tail of the last segment (logging it) and syncs. It fails
// with a *CorruptError (matching ErrCorrupt) on anything else that does not
// check out (see the package documentation), leaving the files untouched.
// Invalid options give an error wrapping ErrInvalid that lists every
// problem.
func Open(dir string, opts Options) (*Log, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: o, fs: o.FS, log: o.Logger}
	l.cond.L = &l.mu
	if err := l.recover(); err != nil {
		return nil, err
	}
	if o.Sync == SyncInterval {
		l.stop = make(chan struct{})
		l.bgDone = make(chan struct{})
		go l.syncLoop()
	}
	return l, nil
}

// recover validates the directory, then repairs it (leftover temporary
// files, a torn tail) and opens the last segment for appending.
func (l *Log) recover() error {
	// First read everything, changing nothing.
	var check func(Position, []byte) error
	if c := l.opts.Check; c != nil {
		check = func(pos Position, payload []byte) error {
			if err := c(pos.LSN, payload); err != nil {
				return fmt.Errorf("wal: open %s: Options.Check rejected record LSN %d (segment %s offset %d): %w", l.dir, pos.LSN, pos.Segment, pos.Offset, err)
			}
			return nil
		}
	}
	res, err := Scan(l.dir, ScanOptions{FS: l.fs, StoreID: l.opts.StoreID}, check)
	if err != nil {
		return err // a *CorruptError, Check's error or an I/O error, each saying where
	}

	// The log checks out: repair it.
	if err := l.fs.MkdirAll(l.dir); err != nil {
		return fmt.Errorf("wal: open %s: %w", l.dir, err)
	}
	for _, name := range res.Tmp {
		// A segment whose creation, or a copy of one whose rewrite
		// (RewriteInherited), a crash interrupted: its rename never
		// happened, so the log does not need it.
		if err := l.fs.Remove(l.path(name)); err != nil {
			return fmt.Errorf("wal: open: remove %s, left by a segment creation or rewrite a crash interrupted: %w (a directory or anything else the log did not make there: move it out of %s)", name, err, l.dir)
		}
	}
	// Always: a segment may have been renamed into place by a process that
	// died, or whose directory sync failed, before its entry was durable.
	// Records appended to it from now on would be lost with the entry.
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("wal: open: sync %s: %w", l.dir, err)
	}
	for _, info := range res.Segments {
		l.segs = append(l.segs, segment{first: info.FirstLSN, name: info.Name, size: info.Size})
	}
	next := res.Next
	if len(l.segs) == 0 {
		next = 1
		f, err := l.createSegment(next)
		if err != nil {
			return err
		}
		l.active = f
		l.segs = []segment{{first: next, name: SegmentName(next), size: SegmentHeaderSize}}
	} else {
		s := &l.segs[len(l.segs)-1]
		f, err := l.fs.OpenAppend(l.path(s.name))
		if err != nil {
			return fmt.Errorf("wal: open: %w", err)
		}
		if tail := res.Segments[len(res.Segments)-1].Tail; tail != nil {
			msg, level := "wal: truncating torn tail of last segment", slog.LevelWarn
			if tail.Zero {
				// Most often the space a writer that did not close the
				// log reserved past its last record (Allocator): no
				// record was torn, unless a crash kept none of its bytes.
				msg, level = "wal: truncating zeroed tail of last segment (reserved space, or bytes never written)", slog.LevelInfo
			}
			l.log.Log(context.Background(), level, msg,
				"segment", s.name, "offset", tail.Offset, "reason", tail.Reason,
				"dropped_bytes", s.size-tail.Offset)
			if err := f.Truncate(tail.Offset); err != nil {
				f.Close()
				return fmt.Errorf("wal: open: truncate %s to %d: %w", s.name, tail.Offset, err)
			}
			s.size = tail.Offset
		}
		// The records may sit in the page cache only, written by a process
		// that crashed before syncing: make them durable before claiming so.
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("wal: open: sync %s: %w", s.name, err)
		}
		l.active = f
		// The first record this log appends starts a segment of its
		// own. A page of zeros in the last segment may end the log
		// (zeroHole) because no record written after it by the same
		// process was acknowledged: a failed sync fails the log. Across
		// processes that does not hold: one whose sync failed leaves
		// records that read back here but never reach the disk (see
		// Durability), and a record this log acknowledged after them
		// must not be taken for unsynced. In a segment that another
		// follows, such a hole is corruption, and Open refuses the log.
		l.inherited = true
		l.activeInherited = true
	}
	l.next = next
	l.openNext = next
	l.written = next - 1
	l.durable = next - 1
	l.tailSize = l.segs[len(l.segs)-1].size
	l.stats.Segments = len(l.segs)
	return nil
}

// createSegment durably creates the segment whose first LSN is first: it
// writes the header to a temporary file, syncs it, renames it into place
// and syncs the directory (opened first, where syncing it takes a
// descriptor: dirOpener). It returns the file open for appending.
func (l *Log) createSegment(first uint64) (File, error) {
	name := SegmentName(first)
	tmp := l.path(name + tmpSuffix)
	syncDir := func() error { return l.fs.SyncDir(l.dir) }
	if o, ok := l.fs.(dirOpener); ok {
		d, err := o.openDir(l.dir)
		if err != nil {
			return nil, &notMadeError{fmt.Errorf("wal: create segment %s: open the directory: %w", name, err)}
		}
		defer d.Close()
		syncDir = d.Sync
	}
	f, err := l.fs.Create(tmp)
	if err != nil {
		return nil, &notMadeError{fmt.Errorf("wal: create segment %s: %w", name, err)}
	}
	fail := func(err error) (File, error) {
		f.Close()
		l.fs.Remove(tmp)
		return nil, &notMadeError{fmt.Errorf("wal: create segment %s: %w", name, err)}
	}
	if _, err := f.Write(AppendSegmentHeader(nil, first, l.opts.StoreID)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := l.fs.Rename(tmp, l.path(name)); err != nil {
		return fail(err)
	}
	noteRenamed(f, l.path(name))
	if err := syncDir(); err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: create segment %s: sync dir: %w", name, err)
	}
	l.mu.Lock()
	l.stats.Syncs++
	l.stats.DirSyncs++
	l.mu.Unlock()
	if cb := l.opts.OnSegment; cb != nil {
		if err := cb(first); err != nil {
			f.Close()
			return nil, fmt.Errorf("wal: create segment %s: Options.OnSegment: %w", name, err)
		}
	}
	return f, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// Append assigns the payloads consecutive LSNs, all at once, buffers the
// records and returns the LSN of the last one. The records become durable
// through WaitDurable, Sync, the background syncer of SyncInterval, or
// Close. With no payload it returns LastLSN(). A payload longer than
// MaxRecordSize fails the whole call with ErrInvalid. Append does not keep
// the payloads.
func (l *Log) Append(payloads ...[]byte) (lastLSN uint64, err error) {
	var total int64
	for i, p := range payloads {
		if len(p) > MaxRecordSize {
			return 0, fmt.Errorf("wal: Append: payload %d is %d bytes, above MaxRecordSize %d: %w", i, len(p), MaxRecordSize, ErrInvalid)
		}
		total += RecordHeaderSize + int64(len(p))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing || l.closed {
		return 0, ErrClosed
	}
	if l.err != nil {
		return 0, l.err
	}
	if len(payloads) == 0 {
		return l.next - 1, nil
	}
	if uint64(len(payloads)) > MaxLSN+1-l.next {
		return 0, fmt.Errorf("wal: Append: %d records after LSN %d would pass MaxLSN %d: %w", len(payloads), l.next-1, uint64(MaxLSN), ErrInvalid)
	}
	if holdsRecord(l.tailSize) && (l.inherited || l.tailSize+total > l.opts.SegmentSize) {
		l.pendCuts = append(l.pendCuts, cut{off: len(l.pend), first: l.next})
		l.tailSize = SegmentHeaderSize
	} else if l.inherited {
		// The segment Open found holds no record: these go into it, as
		// into one this log made.
		l.activeInherited = false
	}
	l.inherited = false
	for _, p := range payloads {
		l.pend = AppendRecord(l.pend, l.next, p)
		l.next++
	}
	l.appends++
	l.tailSize += total
	l.stats.Records += uint64(len(payloads))
	lastLSN = l.next - 1
	// Back-pressure: nobody waits for these records yet; write them.
	for len(l.pend) >= maxPending && l.err == nil && !l.closed {
		if l.leading {
			if l.canSideWrite() {
				l.sideWrite()
				continue
			}
			// A write waiter: woken when the leader's sync begins, to
			// write these records then (sideWrite).
			l.writeWaiters++
			l.cond.Wait()
			l.writeWaiters--
			continue
		}
		l.lead(false)
	}
	return lastLSN, nil
}

// WaitDurable blocks until the record lsn (and every earlier one) is
// durable: fdatasynced under SyncAlways, written to the OS under
// SyncInterval. Concurrent callers share writes and syncs. It fails with
// ErrInvalid if lsn was not appended, and returns the log's sticky error
// if a write or sync failed: after that nothing more becomes durable.
// Under SyncInterval a record already written to the OS has met its
// promise: WaitDurable, like WaitWritten, returns nil for it even if the
// fdatasync of the round that wrote it fails afterwards (the error is
// sticky from then on, for later calls and Err).
func (l *Log) WaitDurable(lsn uint64) error {
	return l.await("WaitDurable", lsn, l.opts.Sync == SyncAlways)
}

// WaitWritten blocks until the record lsn (and every earlier one) is
// written to the operating system, in either mode, without a sync of its
// own: a reader of the segment files, such as another process's read-only
// open, then finds it. Concurrent callers share writes. A record written
// before Close (which writes every record) needs no more: WaitWritten
// returns nil for it after Close too. Otherwise it fails as WaitDurable
// does.
func (l *Log) WaitWritten(lsn uint64) error {
	l.mu.Lock()
	written := lsn < l.next && l.written >= lsn
	l.mu.Unlock()
	if written {
		return nil // even if the log closed meanwhile
	}
	return l.await("WaitWritten", lsn, false)
}

// Sync makes every record appended so far fdatasynced, in either mode.
func (l *Log) Sync() error {
	l.mu.Lock()
	lsn := l.next - 1
	err := l.err
	open := !l.closing && !l.closed
	l.mu.Unlock()
	if err != nil && open {
		// Sticky (see Err), also when every record written was synced
		// before the failure: a failed segment change leaves none to
		// wait for.
		return err
	}
	return l.await("Sync", lsn, true)
}

// WaitSynced blocks until the record lsn is fdatasynced. Under SyncAlways
// it is WaitDurable; under SyncInterval it waits for the background sync
// (or a Sync call) without forcing one.
func (l *Log) WaitSynced(lsn uint64) error {
	if l.opts.Sync == SyncAlways {
		return l.await("WaitSynced", lsn, true)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWait("WaitSynced", lsn); err != nil {
		return err
	}
	for l.durable < lsn {
		if l.err != nil {
			return l.err
		}
		if l.closed {
			return ErrClosed
		}
		l.cond.Wait()
	}
	return nil
}

// FirstLSN returns the LSN of the oldest record in the log. For an empty log
// it is LastLSN()+1.
func (l *Log) FirstLSN() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) == 0 {
		return l.next
	}
	return l.segs[0].first
}

// LastLSN returns the LSN of the last record appended, durable or not; 0 if
// the log never held a record.
func (l *Log) LastLSN() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// DurableLSN returns the LSN up to which records are fdatasynced.
func (l *Log) DurableLSN() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// Size returns the bytes of the live segment files, headers included, not
// counting records appended but not yet written.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Segments = len(l.segs)
	return s
}

// Err returns the sticky error of a failed write, sync or segment change,
// nil if none. Once it is set the log refuses appends and nothing more
// becomes durable: WaitDurable (for a record not written or, under
// SyncAlways, not synced before it), Sync and Append return it. Retrying would
// be wrong: after a failed fdatasync Linux may have marked the unwritten
// pages clean, so the records written since the last successful sync can
// be lost in a power failure although they still read back, also to a new
// Open (see the package documentation).
func (l *Log) Err() error {
	if !l.failed.Load() {
		return nil // without mu: stores call Err on every answer
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Close makes every appended record durable (fdatasync, in either mode),
// stops the background syncer, trims the reserved space after the last
// record (a truncate and an fdatasync) and closes the last segment. Once
// the log has failed (Err), Close still closes the segment, trims nothing
// and returns the sticky error. Every
// method called afterwards that can fail returns ErrClosed, Close (and
// CloseUntrimmed) included.
func (l *Log) Close() error { return l.close(true) }

// CloseUntrimmed is Close without the trim: it leaves the last segment's
// size as it is (the reserved zeros after its last record, which the next
// Open reads as the log's torn tail and cuts off, as after a crash). A
// failed store closes its WAL so, since it changes nothing on disk
// after its failure; it still makes the appended records durable first,
// unless the log itself has failed.
func (l *Log) CloseUntrimmed() error { return l.close(false) }

func (l *Log) close(trim bool) error {
	l.mu.Lock()
	if l.closing || l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closing = true
	l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.bgDone
	}
	// A failed trim is logged once l.mu is released (deferred before the
	// unlock, so run after it): the handler may call back into the log
	// (see logUnlocked).
	var trimErr error
	var trimSeg string
	defer func() {
		if trimErr != nil {
			l.log.Warn("wal: close: trim reserved space", "segment", trimSeg, "err", trimErr)
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.awaitLocked(l.next-1, true)
	for l.leading {
		l.cond.Wait()
	}
	if err == nil {
		// A failure that left no appended record unsynced (a failed
		// segment change) still fails the Close: the log is not whole.
		err = l.err
	}
	l.closed = true
	l.cond.Broadcast()
	if trim && l.active != nil && l.reserved && err == nil {
		// Leave no reserved space behind: the next Open would take it
		// for a torn tail. The records are durable already, so a
		// failure here loses nothing: that Open drops the space.
		s := l.segs[len(l.segs)-1]
		terr := l.active.Truncate(s.size)
		if terr == nil {
			terr = l.active.Sync()
		}
		trimErr, trimSeg = terr, s.name
	}
	if l.active != nil {
		if cerr := l.active.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("wal: close: %w", cerr)
		}
		l.active = nil
	}
	return err
}
