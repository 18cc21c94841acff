package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"
	"github.com/filterstore/filterstore/store"
)

// The binding: pebble records which filter store its writes went through,
// and through which seq the filter log was trimmed, under the filter log's
// key of seq 0, which no record uses (seqs start at 1):
//
//	"\xff\xfffilterlog/" | 0 (u64)  ->  store id (u64) | trimmed through (u64), big-endian
//
// Open compares it with the filter store it opened. A store of another id
// (the filters directory emptied, or replaced by another directory) lacks
// the keys pebble holds; so does one whose ExternalDurable is below the
// trim (an older copy of itself put back after the log records it would
// need were deleted). Either would answer "absent" for keys pebble holds,
// and no replay can bring them back: Open rebuilds both filters from
// pebble's keys instead (Stats.Rebuilt).
type binding struct {
	id, trimmed uint64
	found       bool
}

// bindingKey is the binding's pebble key.
func bindingKey() []byte { return logKey(0) }

// readBinding returns the binding pebble holds (found false if none: a
// new directory, or one from before bindings).
func (s *Service) readBinding() (binding, error) {
	v, closer, err := s.db.Get(bindingKey())
	if errors.Is(err, pebble.ErrNotFound) {
		return binding{}, nil
	}
	if err != nil {
		return binding{}, fmt.Errorf("kv: filter binding: %w", err)
	}
	defer closer.Close()
	if len(v) != 16 {
		return binding{}, fmt.Errorf("kv: %w: the filter binding (pebble key %x) holds %d bytes, want 16", ErrCorrupt, bindingKey(), len(v))
	}
	return binding{id: binary.BigEndian.Uint64(v), trimmed: binary.BigEndian.Uint64(v[8:]), found: true}, nil
}

// setBinding adds to b the binding of the open filter store, trimmed
// through seq trimmed.
func (s *Service) setBinding(b *pebble.Batch, trimmed uint64) error {
	v := binary.BigEndian.AppendUint64(nil, s.fs.ID())
	v = binary.BigEndian.AppendUint64(v, trimmed)
	return b.Set(bindingKey(), v, nil)
}

// bind checks the binding at Open, before any replay: it rebuilds the
// filters if the store it opened cannot be the one pebble's writes went
// through (see binding), and records the store's binding if pebble holds
// none yet.
func (s *Service) bind(o Options) error {
	bd, err := s.readBinding()
	if err != nil {
		return err
	}
	empty, err := s.emptyFilters()
	if err != nil {
		return err
	}
	switch {
	case empty:
		return s.rebuild(o, "the filters are empty, but pebble holds keys")
	case bd.found && bd.id != s.fs.ID():
		return s.rebuild(o, fmt.Sprintf("the filter store is %016x, pebble's writes went through %016x", s.fs.ID(), bd.id))
	case bd.found && s.fs.ExternalDurable() < bd.trimmed:
		return s.rebuild(o, fmt.Sprintf("the filter store holds the filter log through seq %d, but pebble deleted it through %d", s.fs.ExternalDurable(), bd.trimmed))
	case bd.found:
		return nil
	}
	// A new directory, or one from before bindings: nothing to compare.
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.setBinding(b, s.fs.ExternalDurable()); err != nil {
		return fmt.Errorf("kv: filter binding: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("kv: filter binding: %w", err)
	}
	return nil
}

// emptyFilters reports whether the cuckoo filter of live keys is empty
// while pebble holds a key: a filter store made anew (its directory
// emptied) beside a pebble that went on, which a directory from before
// bindings has no binding to tell.
func (s *Service) emptyFilters() (bool, error) {
	if in, err := s.live.Info(); err != nil || in.Items > 0 {
		return false, nil // (a filter that cannot tell is not taken for empty)
	}
	var n uint64
	for _, err := range s.pebbleKeys(&n) {
		if err != nil {
			return false, fmt.Errorf("kv: pebble: %w", err)
		}
		return true, nil
	}
	return false, nil
}

// rebuild drops both filters, makes them again and loads every key pebble
// holds into both, then deletes the filter log (its records belong to the
// filters it replaced) and records the store's binding. A crash in
// between leaves the old binding, so the next Open rebuilds again. After
// a rebuild the Bloom filter of keys ever put ("seen") holds the keys
// pebble held, not the ones deleted before.
func (s *Service) rebuild(o Options, why string) error {
	for _, name := range []string{seenName, liveName} {
		if err := s.fs.Drop(name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("kv: rebuild filters (%s): %w", why, err)
		}
	}
	seen, err := s.fs.CreateBloom(seenName, seenConfig(o))
	if err != nil {
		return fmt.Errorf("kv: rebuild filters (%s): %w", why, err)
	}
	live, err := s.fs.CreateCuckoo(liveName, liveConfig(o))
	if err != nil {
		return fmt.Errorf("kv: rebuild filters (%s): %w", why, err)
	}
	var n uint64
	for _, f := range []func(iter.Seq2[[]byte, error]) error{seen.Load, live.Load} {
		n = 0
		if err := f(s.pebbleKeys(&n)); err != nil {
			return fmt.Errorf("kv: rebuild filters (%s): %w", why, err)
		}
	}
	s.seen, s.live, s.rebuilt = seen, live, n
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(logKey(1), logEnd(), nil); err != nil {
		return fmt.Errorf("kv: rebuild filters: %w", err)
	}
	if err := s.setBinding(b, s.fs.ExternalDurable()); err != nil {
		return fmt.Errorf("kv: rebuild filters: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("kv: rebuild filters: %w", err)
	}
	return nil
}

// pebbleKeys yields every user key pebble holds (none of the filter
// log's), counting them in *n.
func (s *Service) pebbleKeys(n *uint64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		it, err := s.db.NewIter(nil)
		if err != nil {
			yield(nil, err)
			return
		}
		stopped := false
		for ok := it.First(); ok; ok = it.Next() {
			if reserved(it.Key()) && !it.SeekGE(logEnd()) {
				break // the filter log ends pebble's keys
			}
			*n++
			if !yield(it.Key(), nil) {
				stopped = true
				break
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil && !stopped {
			yield(nil, err)
		}
	}
}
