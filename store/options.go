package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/filterstore/filterstore/internal/safelog"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// SyncMode says when a mutation is acknowledged. It is wal.SyncMode: the
// store's durability mode is that of its write-ahead log, so the type is
// defined once, in wal (which store imports and which cannot import
// store), and Options.Sync goes to the log as it is.
type SyncMode = wal.SyncMode

const (
	// SyncAlways acknowledges a mutation after its WAL record is
	// fdatasynced (shared with concurrent writers by group commit): nothing
	// acknowledged is lost, even on power loss.
	SyncAlways = wal.SyncAlways
	// SyncInterval acknowledges a mutation once its WAL record reached the
	// operating system and fdatasyncs every SyncEvery: a process crash
	// loses nothing; a power loss (or a failed fdatasync of the WAL,
	// which fails the store) loses at most the changes since the last
	// good fdatasync. A caller that then deletes, from a counting or
	// cuckoo filter, a key whose add was among them deletes a key the
	// filter no longer holds, which may take out the counters or the
	// fingerprint of another key, one that was durable: after such a
	// loss, delete only keys known to be in the filter (an adversarial
	// FUSE crash test once found a durable counting key absent after
	// such a workload; this is the likely cause, not a proven one).
	SyncInterval = wal.SyncInterval
)

// Options configure Open. The zero value, and a nil *Options, mean the
// defaults given per field. Open copies the options, fills defaults, then
// validates every field and reports all problems at once.
type Options struct {
	// Sync is the durability mode. Default SyncAlways.
	Sync SyncMode
	// SyncEvery is the fsync interval under SyncInterval. Default 100ms;
	// unused under SyncAlways, but checked in either mode: must be
	// 1ms..1h.
	SyncEvery time.Duration
	// ReadOnly opens the store without taking the writer lock and without
	// writing anything, beside a live writer if there is one: its lookups
	// read the filter files as they are (the writer's later changes
	// included) and the WAL records written after the last checkpoint as
	// of Open, and never answer "absent" for an item acknowledged before
	// Open. Filters created after Open are not in it. An Open that the
	// writer's checkpoints or renames make start over ten times in a row
	// fails with an error wrapping ErrLocked: try again. Default false.
	ReadOnly bool
	// CheckpointBytes is how much the WAL grows past what the last
	// checkpoint left of it before the next checkpoint starts. Default 64
	// MiB; must be at least 64 KiB.
	CheckpointBytes int64
	// CheckpointEvery is the period of background checkpoints. Default 5
	// minutes; a negative value disables periodic checkpoints; a positive
	// one must be at least 1ms.
	CheckpointEvery time.Duration
	// SegmentSize is the size at which the WAL starts a new segment.
	// Default 64 MiB; must be at least 64 KiB.
	SegmentSize int64
	// Logger receives recovery and checkpoint events. Default: discard.
	//
	// Its handler runs on the calling goroutine of the store call that
	// logs, or on the store's background goroutine, and often with the
	// store's locks held: a failed WAL write is logged with the filter's
	// mutex and the commit gate held, a checkpoint's record with the gate
	// held exclusively. It may call Stats and ID; any other call of the
	// store or its handles (Close, Checkpoint, a change, List, Info) may
	// wait for the call that is logging, for ever. Hand records that
	// should make the engine act on the store (shut it down on an error)
	// to another goroutine. A panic in the handler is recovered where the
	// store logs (it would leave locks held or a change half done) and
	// the record goes to standard error instead, with the panic's value.
	Logger *slog.Logger
	// SmallPages maps filter files with 4 KiB pages only. By default a
	// filter file of 2 MiB or more is mapped at a 2 MiB-aligned address
	// with MADV_HUGEPAGE (Linux), so the kernel caches it in 2 MiB folios
	// where the file system allows (ext4 since Linux 6.16, XFS) and maps
	// each with one page-table entry: random lookups on a filter larger
	// than the TLB's reach then take far fewer TLB misses. What it costs:
	// after a cold start, the first lookup in each 2 MiB of a file reads
	// those 2 MiB from disk instead of 4 KiB, and a checkpoint writes
	// back every 2 MiB folio a change touched, whole. Set SmallPages for
	// a large filter that sees few, scattered writes between checkpoints,
	// or whose first lookups after a restart must each read little.
	SmallPages bool
	// GuardLookups makes single lookups (Has and HasHash of every kind,
	// a Bitmap's Get, a counting or cuckoo filter's Count and CountHash) read a
	// filter's mapping under a fault guard, as the batch lookups
	// (HasMany and its forms, GetMany) always do: a read that faults, on
	// a layer file that another process truncated or on a page the disk
	// cannot read, answers "maybe" (a Count: math.MaxUint64), makes the
	// filter answer every later lookup "maybe" without reading it, and
	// fails the store with an error naming the file, where without it the
	// fault (SIGBUS) kills the process. (Changes, and Open's replay,
	// guard their reads and writes of the mapping always: see the
	// package doc's fault model.) It costs each single lookup 17-27
	// ns on the development VM, 1.8-3.4x its time on filters of 2^20 keys
	// (BenchmarkLookupGuarded); a bare bloom.Filter.Has under the same
	// guard took 1.39-1.41x its time at 1e5 keys and 1.55-1.68x at 1e7
	// (medians of six interleaved rounds, a throwaway benchmark). For a
	// store on storage whose reads can fail under it (a network block
	// device, a file system shared with other writers). Default false.
	GuardLookups bool

	// Test seams: the filter-file mapper and the WAL file system. With
	// both simulated, power losses happen in them only: the real catalog
	// file and directories never lose a write, so simulated skips their
	// fsyncs (tests run thousands of sequences).
	mapper    mmapbits.Mapper
	walFS     wal.FS
	simulated bool
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.SyncEvery == 0 {
		c.SyncEvery = 100 * time.Millisecond
	}
	if c.CheckpointBytes == 0 {
		c.CheckpointBytes = 64 << 20
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = 5 * time.Minute
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = 64 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// The store logs mid-operation, often with its locks held: a
	// handler's panic is recovered there (package safelog).
	c.Logger = safelog.Wrap(c.Logger)
	if c.mapper == nil {
		c.mapper = mmapbits.OS{SmallPages: c.SmallPages}
	}
	if c.walFS == nil {
		c.walFS = wal.OSFS{}
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("store: %w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if c.Sync != SyncAlways && c.Sync != SyncInterval {
		bad("Options.Sync %d is not SyncAlways or SyncInterval", int(c.Sync))
	}
	if c.SyncEvery < time.Millisecond || c.SyncEvery > time.Hour {
		bad("Options.SyncEvery %v is outside 1ms..1h", c.SyncEvery)
	}
	if c.CheckpointEvery > 0 && c.CheckpointEvery < time.Millisecond {
		// A checkpoint syncs every changed file: a shorter period would
		// leave no time for anything else.
		bad("Options.CheckpointEvery %v is below 1ms (a negative value disables periodic checkpoints)", c.CheckpointEvery)
	}
	if c.CheckpointBytes < 64<<10 {
		bad("Options.CheckpointBytes %d is below 65536", c.CheckpointBytes)
	}
	if c.SegmentSize < 64<<10 || c.SegmentSize > wal.MaxSegmentSize {
		bad("Options.SegmentSize %d is outside 65536..%d", c.SegmentSize, int64(wal.MaxSegmentSize))
	}
	return c, errors.Join(errs...)
}
