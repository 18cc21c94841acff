package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/filterstore/filterstore/store"
)

// The filter log of ModeExternal lives in pebble itself: the external
// record (store.Batch.Encode) of seq N is the value of the key
// filterLogPrefix + N (8 bytes, big-endian, so keys sort by seq), written
// in the same pebble batch as the put or delete it belongs to.
//
//	"\xff\xfffilterlog/" | seq (u64, big-endian)  ->  external record
//
// User keys may not begin with filterLogPrefix (ErrInvalid).
var filterLogPrefix = []byte("\xff\xfffilterlog/")

// logKey returns the filter log's key of seq.
func logKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), filterLogPrefix...), seq)
}

// logEnd is the first key after every filter log key.
func logEnd() []byte {
	end := bytes.Clone(filterLogPrefix)
	end[len(end)-1]++
	return end
}

// reserved reports whether key lies in the filter log's key space.
func reserved(key []byte) bool { return bytes.HasPrefix(key, filterLogPrefix) }

// defaultTrimEvery is how many external records the write path logs
// between two trims of the filter log.
const defaultTrimEvery = 4096

// pendingFilterLog reports whether pebble holds a filter log record the
// filter store may lack: one above its ExternalDurable.
func (s *Service) pendingFilterLog() (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(s.fs.ExternalDurable() + 1), UpperBound: logEnd()})
	if err != nil {
		return false, fmt.Errorf("kv: filter log: %w", err)
	}
	found := it.First()
	return found, errors.Join(it.Error(), it.Close())
}

// replayFilterLog applies to the filter store, in seq order, every record
// of the filter log above its ExternalDurable: the records of batches that
// pebble committed but the filters did not keep (a crash before
// ApplyExternal, or a power loss that took the tail of the store's own
// WAL). Records the store has applied already change nothing. It returns
// how many records it applied; if any, it checkpoints the store, which
// makes them durable there, and trims the log.
func (s *Service) replayFilterLog() (int, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(s.fs.ExternalDurable() + 1), UpperBound: logEnd()})
	if err != nil {
		return 0, fmt.Errorf("kv: filter log: %w", err)
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if _, err := s.fs.ApplyExternal(it.Value()); err != nil {
			return n, errors.Join(fmt.Errorf("kv: filter log: replay of %x: %w", it.Key(), err), it.Close())
		}
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return n, fmt.Errorf("kv: filter log: %w", err)
	}
	if n > 0 {
		if err := s.fs.Checkpoint(); err != nil {
			return n, fmt.Errorf("kv: filter log: after replay: %w", err)
		}
	}
	return n, s.trimFilterLog()
}

// trimFilterLog deletes the filter log's records that the filter store
// holds durably (at or below its ExternalDurable), and records the trim in
// the binding (binding.go) in the same batch. The batch need not be
// synced: a record that comes back is replayed as a no-op, and a binding
// that comes back with it names an earlier trim.
func (s *Service) trimFilterLog() error {
	// One trim at a time: two could commit their bindings out of order,
	// leaving one that names an earlier trim than the log's.
	s.trimMu.Lock()
	defer s.trimMu.Unlock()
	d := s.fs.ExternalDurable()
	if d == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	err := b.DeleteRange(logKey(1), logKey(d+1), nil)
	if err == nil {
		err = s.setBinding(b, d)
	}
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	if err != nil {
		return fmt.Errorf("kv: filter log: trim: %w", err)
	}
	return nil
}

// catchUp brings the filters of a Service opened in ModePerFilter or
// ModeBatch up to the filter log that an earlier ModeExternal run left:
// it reopens the filter store under SyncInterval (external records are
// applied without a sync of the store's own), replays, and reopens it as
// it was, whose Close checkpoints what was replayed.
func (s *Service) catchUp(o Options) error {
	pending, err := s.pendingFilterLog()
	if err != nil || !pending {
		return err
	}
	if err := s.fs.Close(); err != nil {
		return fmt.Errorf("kv: close filters: %w", err)
	}
	s.fs = nil
	if err := s.openStore(store.SyncInterval); err == nil {
		err = s.attach(o, false)
	}
	if err != nil {
		return err
	}
	s.replayed, err = s.replayFilterLog()
	if cerr := s.fs.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("kv: close filters: %w", cerr))
	}
	s.fs = nil
	if err != nil {
		return err
	}
	if err := s.openStore(store.SyncAlways); err != nil {
		return err
	}
	return s.attach(o, false)
}
