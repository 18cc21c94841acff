package kv

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/filterstore/filterstore/store"
)

// commitExternal is ModeExternal's commit: c's key and c's filter
// changes, encoded as one external record, go into one pebble batch,
// committed with pebble.Sync (the only durability wait); the filters apply
// the record after that. Called with c.key's lock held, so that the
// records of one key are encoded (seq) in the order pebble commits them.
//
//	Encode (seq N)  ->  pebble batch {key, filterlog/N} durable  ->  ApplyExternal
//
// A crash between the commit and the apply, or a power loss that takes
// the apply from the filter store's own WAL, is repaired by the next
// Open, which replays the filter log above the store's ExternalDurable.
func (s *Service) commitExternal(c *change) error {
	op := "put"
	if c.del {
		op = "delete"
	}
	if !c.addSeen && !c.addLive && !c.deleteLive {
		return s.writePebble(c)
	}
	bt := s.fs.NewBatch()
	if c.addSeen {
		bt.BloomAddHash(s.seen, c.hash)
	}
	if c.addLive {
		bt.CuckooAddHash(s.live, c.hash)
	}
	if c.deleteLive {
		bt.CuckooDeleteHash(s.live, c.hash)
	}
	rec, err := bt.Encode()
	if err != nil {
		return fmt.Errorf("kv: %s: filters: %w", op, err)
	}
	seq, err := store.ExternalSeq(rec)
	if err != nil {
		return errors.Join(fmt.Errorf("kv: %s: filters: %w", op, err), s.fs.AbortExternal(rec))
	}

	b := s.db.NewBatch()
	if c.del {
		err = b.Delete(c.key, nil)
	} else {
		err = b.Set(c.key, c.value, nil)
	}
	if err == nil {
		err = b.Set(logKey(seq), rec, nil)
	}
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The batch may or may not be durable. A put's record is
		// applied all the same (at worst its key is a false
		// positive); a delete's is aborted, which leaves the key's
		// cuckoo copy (a false positive again) even if pebble kept
		// the delete, since a later seq's apply moves the store past
		// it. Aborting a put's would let a durable key read absent.
		err = fmt.Errorf("kv: %s: pebble: %w", op, err)
		if c.del {
			return errors.Join(err, s.fs.AbortExternal(rec))
		}
		return errors.Join(err, s.apply(rec, c))
	}
	if err := s.between(); err != nil {
		return err
	}
	if err := s.apply(rec, c); err != nil {
		return fmt.Errorf("kv: %s: the change is durable in pebble, but %w", op, err)
	}
	if s.trimEvery > 0 && seq%s.trimEvery == 0 {
		// Best effort: a trim that fails leaves records the next
		// trim, or the replay of the next Open, deals with.
		_ = s.trimFilterLog()
	}
	return nil
}

// apply applies an external record c's commit made durable in pebble. If
// the filter store refuses it (failed or closed), the filters may lack a
// key pebble holds until the next Open replays the record, so the Service
// stops trusting them: every later Get reads pebble.
func (s *Service) apply(rec []byte, c *change) error {
	applyExternal := s.fs.ApplyExternal
	if s.applyFault != nil {
		applyExternal = s.applyFault
	}
	res, err := applyExternal(rec)
	if err != nil {
		s.untrusted.Store(true)
		return fmt.Errorf("filters: %w", err)
	}
	if c.deleteLive && (len(res) == 0 || !res[0]) {
		// Refused as ambiguous, or the filter cannot take changes:
		// the copy stays, a false positive.
		s.kept.Add(1)
	}
	return nil
}
