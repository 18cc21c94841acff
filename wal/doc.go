// Package wal implements filterstore's segmented write-ahead log: framing
// with CRC-32C, group commit, iteration for recovery and truncation.
//
// The log is opaque: it stores byte payloads, each tagged with a log sequence
// number (LSN). LSNs start at 1 and increase by exactly 1 from one record to
// the next across the whole log, segment boundaries included. The store
// encodes its own record types inside the payloads.
//
// # Directory
//
// A log lives in one directory. Each segment is a file named after the LSN of
// its first record, formatted as %020d.log, so that the names sort in LSN
// order:
//
//	DIR/00000000000000000001.log
//	DIR/00000000000000004097.log    <- last segment: the one appended to
//
// A new segment is written as <name>.tmp, synced, renamed to <name> and the
// directory is synced, so a file named *.log always has a complete, durable
// header. Leftover *.tmp files are removed by Open, once it has validated
// the log.
//
// # Segment header
//
// Every segment starts with a header; the records follow it. This package
// writes version 2, 32 bytes. All integers are little-endian.
//
//	 0               8          12                 20                 28         32
//	+---------------+----------+------------------+------------------+----------+
//	| magic         | version  | first LSN        | store ID         | CRC-32C  |
//	| "FSWALSEG"    | u32 = 2  | u64              | u64              | u32      |
//	+---------------+----------+------------------+------------------+----------+
//
// The CRC is CRC-32C (Castagnoli) of bytes [0, 28). The first LSN must equal
// the number in the file name and the LSN of the segment's first record.
// The store ID is Options.StoreID of the log that created the segment, 0 if
// none; a log opened with a non-zero StoreID rejects a segment carrying
// another non-zero one, so that a segment copied in from another store's
// log is corruption rather than a source of foreign records.
//
// Version 1, written by earlier releases and still read (as store ID 0), is
// 24 bytes, with the CRC of bytes [0, 20):
//
//	 0               8          12                 20         24
//	+---------------+----------+------------------+----------+
//	| magic         | version  | first LSN        | CRC-32C  |
//	| "FSWALSEG"    | u32 = 1  | u64              | u32      |
//	+---------------+----------+------------------+----------+
//
// The version field says which layout follows, so a reader checks the
// magic, then the version, then the CRC. A log may mix versions: segments
// created before an upgrade keep version 1, new ones get version 2.
//
// # Record framing
//
// The header is followed by records, back to back, with no padding:
//
//	 0          4          8                  16
//	+----------+----------+------------------+-----------------------+
//	| length   | CRC-32C  | LSN              | payload               |
//	| u32      | u32      | u64              | length bytes          |
//	+----------+----------+------------------+-----------------------+
//
// length is the payload length, 0 <= length <= MaxRecordSize; a zero-length
// payload is a valid record. The CRC is CRC-32C over bytes [0, 4) (length)
// followed by bytes [8, 16+length) (LSN and payload); it is not masked.
// LSN 0 is never written, so a region of zero bytes never decodes as a
// record (it fails both the LSN and the CRC check). LSNs end at MaxLSN
// (2^64-2), so that the LSN after the last one still fits in 64 bits:
// a record or segment beyond it is not the log's.
//
// The magic, the version numbers, MaxRecordSize, every layout above and the
// choice of CRC are part of the on-disk format and must never change: a
// change would make existing logs unreadable. A new layout needs a new
// version number and a reader for every old one.
//
// # Reserved space
//
// Under SyncAlways the log writes the space of its last segment ahead of
// its records, with zeros, allocChunk (1 MiB) at a time, and syncs them
// (Allocator; PostgreSQL zero-fills its WAL segments for the same reason):
// a record is then written over zeros into blocks that are allocated and
// durable, so the fdatasync that follows has no file size or block
// allocation to commit, only the data. So the last segment may end in
// zeros past its last record:
//
//	| header | record | record | record | 0 0 0 0 0 0 0 0 0 0 0 0 0 ... |
//	                                    ^ the next record goes here
//
// A zero region never decodes as a record (see above), so a scan sees it
// as the last segment's tail (TornTail.Zero). Before a new segment
// follows it, the log trims a segment to its last record and syncs it, so
// a segment that is not the last never ends in zeros; Close trims the
// last one (CloseUntrimmed, for a caller that has failed, does not);
// Open truncates the zeros a writer that did not close left behind,
// logging them at Info rather than as a torn record. A live scan reads
// the bytes a writer is writing, not only those written when it opened
// the file: one that found an invalid record and then valid ones
// after it reads the bytes between again, and if they now hold the
// records that chain up to the valid one, a writer wrote them meanwhile
// and the scan's snapshot ends there (a writer writes in offset order, so
// a record still invalid once a later one is valid is corruption).
//
// # Torn tails and corruption
//
// A crash can leave the last segment ending in an incomplete record, or in
// bytes that fail their CRC. A Reader reports such a record as an error
// wrapping ErrTorn. Open treats a torn record at the tail of the last segment
// as the end of the log: it truncates the segment there, logs it, and goes
// on. The same holds for an invalid record followed by valid ones in the
// last segment when a page of zeros lies between them (zeroHole, or
// headerCutByPage for a record that starts less than a header before a
// page boundary): records written over reserved zeros whose sync a power
// loss cut short can reach the disk a page at a time, in any order, so a
// later page may be there and an earlier one not; no sync of either
// completed, so none of their records was acknowledged. A page of zeros
// is what such a loss leaves and damage does not, with one exception: a
// record that starts at most four bytes before a page boundary, whose
// length's bytes before it hold a single set bit (a length of 1, 16, 64
// or 0x101, say), reads after a flip of that bit as its first bytes lost
// with their page (headerCutByPage), and Open ends the log there,
// dropping that record and the acknowledged ones after it without a
// report. The store's stamps catch it where a filter file holds a change
// of a dropped record (see package store). The argument that no record
// past such a page was acknowledged holds within one process only (a
// failed sync fails the log), so the first record a newly opened log
// appends starts a new segment: records
// that a failed sync of an earlier process lost, though they read back at
// Open, are then in a segment that is not the last, and their zeros after
// a power loss are corruption, not the end of the log. A caller that will
// act on such records (the store replays those after its checkpoint)
// calls RewriteInherited first: it writes them again, through a synced
// copy of their segments, so that they are on disk for certain or the
// call fails. Anything else is corruption and Open fails
// with a *CorruptError (matching ErrCorrupt) that names the segment file
// and byte offset: an invalid record followed by a valid one with no page
// of zeros between them, an invalid record in a segment
// that is not the last (segments are synced before the next one is created,
// so they cannot be torn), a bad segment header, a segment of another
// store, a CRC-valid record with the wrong LSN, or an LSN gap between
// segments.
//
// To tell the two apart, a scan looks at every offset from the invalid
// record to the end of the segment, through a window of at most 32 MiB
// (16 MiB of offsets, and a record header and MaxRecordSize of overlap),
// and skips the holes of a sparse file, where no record can start: a
// segment extended to 64 GiB by truncate costs a few system calls. It
// does not reject a segment for its size: one batch larger than
// SegmentSize makes a segment of its own, and a reader does not know the
// writer's SegmentSize. A dense segment of garbage is read whole (about
// 0.5 s per GiB of zeros on the development VM).
//
// Open reads and checks the whole log, and runs Options.Check on every
// record, before it changes anything: a log it rejects is left exactly as
// it was found, for inspection. Scan applies the same checks without
// changing anything, for readers that are not the log's writer (the
// store's read-only open, cmd/inspect); Open and Replay use it too, so all
// of them agree on what is valid.
//
// # Durability
//
// Append assigns LSNs and buffers the records; WaitDurable blocks until they
// are as durable as Options.Sync promises. Concurrent callers share writes
// and fdatasyncs (group commit): while one sync is in flight, further
// appends accumulate, and the next sync covers them all. Under SyncAlways
// the leader of a sync first waits, briefly, for the writers the previous
// sync released to append their next records (commit.go, gather), so that
// N writers in a loop share each sync rather than alternating, half of
// them per sync, between the sync in flight and the next; it stops
// waiting once appends stop arriving, so a lone writer never waits. Under
// SyncInterval, where a record needs only its write, a caller that comes
// while the background fdatasync is in flight writes the records appended
// since, instead of waiting for it (commit.go, sideWrite): an engine's
// write path never waits for a sync. A File's Write and Sync may
// therefore run at the same time. On disk, atomicity
// is per record: after a crash, a batch passed to one Append may be present
// only in part (a prefix of it), so a change that must be all-or-nothing
// belongs in one payload.
//
// A failed write or fdatasync is sticky (Log.Err): the log refuses further
// appends and acknowledges nothing more, because after a failed fdatasync
// Linux may have dropped the unwritten pages while marking them clean, so
// retrying would report success for data that is not on disk (PostgreSQL's
// "fsyncgate"). Such records still read back until the machine loses
// power, also to a process that reopens the log; MemFS models this.
//
// A new segment that cannot be made for want of room (ENOSPC: no free
// block or inode; EDQUOT) or of file descriptors (EMFILE, ENFILE) is not
// such a failure, if its name never reached the directory (its *.tmp file
// could not be created, written, synced or renamed into place; with OSFS
// the directory, whose sync after the rename needs a descriptor, is
// opened first, so that a want of descriptors is met before): the log
// logs it, counts it (Stats.PostponedRotations) and goes on appending to
// the active segment, which grows past SegmentSize, trying a new segment
// again after each further SegmentSize of records and at each
// StartSegment. Records go on in LSN order either way; the longer segment
// is only deleted later (TruncateBefore never deletes the active segment),
// and a RewriteInherited after a crash copies all of it. The segment Open
// found holding records, which the log never appends to, is the
// exception: a rotation away from it fails the log as before. A write
// that finds the disk full still fails the log.
//
// Known limits: the tail rule assumes that a crash persists the unsynced
// bytes of the last segment as a prefix, or as whole 4 KiB pages (the page
// size of the file systems it runs on, or a multiple of it) in any order.
// One that tears a page into sectors, keeping a later sector of a record
// without an earlier one, makes Open report ErrCorrupt rather than guess.
// A device that returns zeros for a page it had acknowledged as synced, in
// the last segment, has the records from that page on dropped as never
// synced, without a report.
//
// # Use
//
//	l, err := wal.Open(dir, wal.Options{})   // validates, then truncates a torn tail
//	err = l.SetNextLSN(checkpoint + 1)       // LSNs never go below the checkpoint
//	err = l.Replay(checkpoint+1, apply)      // recovery
//	lsn, err := l.Append(p1, p2)             // consecutive LSNs
//	err = l.WaitDurable(lsn)                 // group commit
//	err = l.TruncateBefore(checkpoint + 1)   // after a checkpoint
//
//	res, err := wal.Scan(dir, wal.ScanOptions{From: lsn, Live: true}, visit) // read-only, beside a writer
//
// All methods of Log are safe for concurrent use. The file system is behind
// the FS interface: OSFS in production, MemFS (which can simulate a power
// loss, a process crash and failing operations) in tests.
package wal
