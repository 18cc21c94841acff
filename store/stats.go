package store

import "github.com/filterstore/filterstore/wal"

// Stats are a store's cumulative counters since Open, for metrics and
// benchmarks: how many WAL records its changes took, and how many
// fdatasyncs made them durable.
type Stats struct {
	// WAL is the write-ahead log's counters: records appended (one per
	// change, AddMany chunk or Batch), bytes and Write calls, fdatasyncs
	// of its segments (Syncs: one per group commit under SyncAlways, one
	// per interval under SyncInterval, plus those of checkpoints, segment
	// rotation and the space a segment reserves ahead of its writes) and
	// the live segments. Zero in a read-only store.
	WAL wal.Stats
	// CheckpointLSN is the LSN through which the last checkpoint made the
	// filter files durable; recovery replays the WAL above it.
	CheckpointLSN uint64
	// WALSize is the bytes the WAL's segments hold now. A checkpoint
	// brings it down to the active segment's, unless a broken filter
	// keeps the WAL from its own last checkpoint (store doc): then it
	// grows until that filter is dropped. Zero in a read-only store.
	WALSize int64
}

// Stats returns the store's counters. It may be called at any time, also
// after Close (it then returns the counters as Close left them); a nil
// Store's are zero.
func (s *Store) Stats() Stats {
	if s == nil {
		return Stats{}
	}
	st := Stats{CheckpointLSN: s.checkpointLSN.Load()}
	if s.log != nil {
		st.WAL = s.log.Stats()
		st.WALSize = s.log.Size()
	}
	return st
}

// ID returns the store's identity: the random id, never 0, that Open
// reads from the catalog and checks against every filter file and WAL
// segment (a store from before ids has one from its first Open by a
// writer; a read-only open of such a store returns 0). An engine that
// keeps its own record of which filter store its writes went through (see
// examples/pebble) compares it at every Open: a store directory replaced
// by a new or another store's has another id. A nil or zero Store's is 0.
func (s *Store) ID() uint64 {
	if s == nil {
		return 0
	}
	return s.id
}
