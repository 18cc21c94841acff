package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/filterstore/filterstore/internal/format"
)

// Checkpoint makes every change so far durable in the filter files, with
// the checksums of the pages changed since the last checkpoint, records
// the WAL position and item counts in the catalog, and deletes WAL
// segments no filter needs any more. Close and the background
// checkpointer call it. Its cost follows the pages changed, not the
// filters' size. On a failed store it records nothing and returns the
// failure.
func (s *Store) Checkpoint() error {
	if err := s.nilErr(); err != nil {
		return err
	}
	return s.checkpoint(ckptPlain)
}

// ckptMode is what a checkpoint does besides recording one.
type ckptMode int

const (
	// ckptPlain: Checkpoint, the background checkpointer, Backup,
	// recovery.
	ckptPlain ckptMode = iota
	// ckptFull (Close) also recomputes every checksum left unknown by a
	// writer that died (see sessionFile).
	ckptFull
	// ckptLoad ends a Load: it makes the Load's words durable and the
	// filter complete in the catalog, and leaves the WAL's segments as
	// they are. Starting a segment and deleting the old ones (two file
	// syncs and two directory syncs, about 3 ms of a 1000-key Load's 4.5
	// on the development VM) is left to the next checkpoint; the WAL
	// meanwhile holds records the catalog covers, which recovery skips.
	ckptLoad
)

// checkpoint is Checkpoint, in mode.
func (s *Store) checkpoint(mode ckptMode) error {
	if s.opts.ReadOnly {
		return fmt.Errorf("store: checkpoint: %w", ErrReadOnly)
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	return s.checkpointHeld(mode)
}

// checkpointHeld is checkpoint with ckptMu held.
func (s *Store) checkpointHeld(mode ckptMode) error {
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed.Load() {
		return fmt.Errorf("store: checkpoint: %w", ErrClosed)
	}
	return s.checkpointLocked(mode)
}

// checkpointLocked runs with the gate held exclusively: no mutation is in
// flight, every appended record has been applied or is in an overlay.
//
// Any failure fails the store before anything is recorded: a failed msync
// or fdatasync may have marked pages clean without writing them, so a
// later one that succeeds proves nothing, and recording the checkpoint (or
// deleting the WAL it makes obsolete) would lose those pages for good.
func (s *Store) checkpointLocked(mode ckptMode) error {
	full := mode == ckptFull
	if err := s.failed(); err != nil {
		return err
	}
	start := time.Now()
	if err := s.log.Sync(); err != nil {
		return s.fail(err)
	}
	lsn := s.log.LastLSN()
	s.mu.Lock()
	handles := make(map[string]handle, len(s.filters))
	for n, h := range s.filters {
		handles[n] = h
	}
	s.mu.Unlock()
	metas := make(map[string]*format.FilterMeta, len(handles))
	keep := lsn // the WAL from keep+1 on must stay
	synced, sums := 0, 0
	for name, h := range handles {
		b := h.base()
		if b.broken != nil {
			// Its files are not trusted or not there: its records stay
			// in the WAL until it is dropped (or its files come back and
			// a reopen replays them).
			keep = min(keep, b.meta.SyncedLSN)
			continue
		}
		b.mu.Lock()
		err := b.applyThrough(lsn)
		meta := b.snapshotMeta(lsn)
		// A Load in progress writes words without saying which (it marks
		// every page stale when its run ends, under the lock). Close's
		// checkpoint is the last before the store's files are at rest:
		// its batches written so far need their checksums now, since the
		// run ends after it (its later batches get ErrClosed).
		loading := full && b.loading != nil
		b.mu.Unlock()
		if err != nil {
			return s.fail(err)
		}
		if loading {
			for _, r := range b.regions {
				r.Touch(0, r.NumWords())
			}
		}
		if dirty := b.dirty.Swap(false); dirty || full {
			for i, r := range b.regions {
				// The writers are out (the gate): the checksums are of
				// the pages this Sync writes. A fault reading the pages
				// (a layer file truncated by another process, a disk
				// read error) fails the store instead of the process.
				var n int
				var uerr error
				if err := readMapped(b.path(i), r.Header(), r.Words(), func() { n, uerr = r.UpdateSums(full) }); err != nil {
					return s.fail(err)
				}
				if uerr != nil {
					return s.fail(uerr)
				}
				sums += n
				if !dirty && n == 0 {
					continue
				}
				// A layer whose pages changed (every writer Touches what
				// it writes) gets this checkpoint's stamp, written by the
				// Sync before the catalog records it: the file then
				// carries at least the catalog's stamp (see openFilter).
				// An unchanged one keeps its stamp, and so does its
				// catalog entry: no header page to write.
				if n > 0 || !r.Header().HasSums() {
					if err := accessMapped(b.path(i), r.Header(), r.Words(), "a write", func() { r.SetStamp(lsn) }); err != nil {
						return s.fail(err)
					}
					meta.Layers[i].Stamp = lsn
				}
				if err := r.Sync(); err != nil {
					b.dirty.Store(true)
					if merr := s.markResync(); merr != nil {
						// Neither marker is durable: the next Open
						// cannot know to rebuild the filter pages.
						s.opts.Logger.Error("cannot mark the store for a rebuild of its filter pages: neither the resync marker nor the session marker could be written", "err", merr)
					}
					return s.fail(err)
				}
			}
			synced++
		}
		metas[name] = meta
	}
	// The gate is held: every applied external record is in the WAL
	// through lsn, which the checkpoint covers.
	ext := s.ext.logged.Load()
	live := make(map[string]bool, len(handles))
	for name := range handles {
		live[name] = true
	}
	gone, err := s.cat.Checkpoint(lsn, ext, metas, live)
	if err != nil {
		return s.catalogFailed(err)
	}
	for _, name := range gone {
		// A create or an import that failed with ENOSPC after its commit
		// reached the catalog: the caller was told it failed, and its
		// entry's synced LSN is older than the WAL this checkpoint
		// keeps. Its files are orphans the next Open removes.
		s.opts.Logger.Warn("removed a catalog entry of a filter the store does not have (a create or import that reported a failure)", "filter", name)
	}
	s.checkpointedExternal(ext)
	// The catalog now holds these counts: later catalog writes of a
	// filter (a new layer) must carry them, not counts from before.
	for name, m := range metas {
		b := handles[name].base()
		b.mu.Lock()
		b.meta = m
		b.mu.Unlock()
	}
	s.checkpointLSN.Store(lsn)
	if mode == ckptLoad {
		s.opts.Logger.Debug("checkpoint", "lsn", lsn, "filters", len(metas), "synced", synced, "checksums", sums, "took", time.Since(start))
		return nil
	}
	// Start a new segment so that the active one, now wholly obsolete,
	// can go too: Open then reads nothing the checkpoint covers.
	if err := s.log.StartSegment(); err != nil {
		return s.fail(err)
	}
	if err := s.log.TruncateBefore(keep + 1); err != nil {
		return s.fail(err)
	}
	s.keptBytes.Store(s.log.Size())
	if keep < lsn {
		s.opts.Logger.Warn("broken filters keep the WAL from their last checkpoint; drop them to release it", "from_lsn", keep+1)
	}
	s.opts.Logger.Debug("checkpoint", "lsn", lsn, "filters", len(metas), "synced", synced, "checksums", sums, "took", time.Since(start))
	return nil
}

// background runs periodic and size-triggered checkpoints and, under
// SyncInterval, applies overlays after each WAL fdatasync.
func (s *Store) background() {
	defer s.bg.Done()
	var tick <-chan time.Time
	if s.opts.CheckpointEvery > 0 {
		t := time.NewTicker(s.opts.CheckpointEvery)
		defer t.Stop()
		tick = t.C
	}
	size := time.NewTicker(100 * time.Millisecond)
	defer size.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.synced:
			s.applySynced()
		case <-tick:
			s.backgroundCheckpoint()
		case <-size.C:
			if err := s.log.Err(); err != nil {
				// The background fdatasync of SyncInterval failed.
				s.fail(err)
			}
			// Bytes written since the last checkpoint, not the WAL's
			// size: with a broken filter keeping old segments, the size
			// stays above the threshold, and a checkpoint every tick
			// (each one a fdatasync, a catalog commit and a new segment)
			// would free nothing.
			if s.log.Size()-s.keptBytes.Load() >= s.opts.CheckpointBytes {
				s.backgroundCheckpoint()
			}
		}
	}
}

func (s *Store) backgroundCheckpoint() {
	if s.failed() != nil {
		return
	}
	// A checkpoint running already makes this one moot; a Backup holds
	// ckptMu until it ends and no checkpoint may record meanwhile (see
	// Backup). Waiting would stop applySynced too.
	if !s.ckptMu.TryLock() {
		return
	}
	defer s.ckptMu.Unlock()
	if err := s.checkpointHeld(ckptPlain); err != nil && !errors.Is(err, ErrClosed) {
		s.opts.Logger.Error("background checkpoint failed", "err", err)
	}
}

// applySynced moves every change the WAL has fdatasynced from the overlays
// to the maps (SyncInterval).
func (s *Store) applySynced() {
	// Shared, like a mutation: Drop and Close (exclusive) unmap files, and
	// no after-image may be stored into a mapping they replaced.
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed.Load() {
		return
	}
	lsn := s.log.DurableLSN()
	s.ext.synced(lsn)
	s.mu.Lock()
	hs := make([]handle, 0, len(s.filters))
	for _, h := range s.filters {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		b := h.base()
		if b.broken != nil || b.dropped.Load() {
			continue
		}
		b.mu.Lock()
		err := b.applyThrough(lsn)
		b.mu.Unlock()
		if err != nil {
			s.fail(err)
		}
	}
}
