package kv

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/filterstore/filterstore/store"
)

// change is one mutation of a key, with the filter changes it needs,
// decided under the key's lock.
type change struct {
	key   []byte
	value []byte // a put's value
	del   bool   // a delete, not a put
	hash  uint64 // store.Hash(key); filter modes only

	addSeen    bool // Bloom add to "seen"
	addLive    bool // cuckoo add to "live"
	deleteLive bool // cuckoo delete from "live"
}

// Put sets key to value. When it returns nil the value is durable in
// pebble and both filters say "maybe present" for key, and stay so after
// any crash until key is deleted.
//
// In a filter mode a key pebble holds already is overwritten in pebble
// alone (its filter entries are durable already); a new key is added to
// both filters first. If that fails, pebble is not written and the error
// is returned; if the pebble write fails after it, the key stays in the
// filters (a false positive).
func (s *Service) Put(key, value []byte) error {
	if reserved(key) {
		return fmt.Errorf("kv: put: %w: key %q is in the filter log's key space", ErrInvalid, key)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	c := change{key: key, value: value}
	if !s.mode.filtered() {
		return s.commit(&c)
	}
	c.hash = store.Hash(key)
	defer s.locks.lock(c.hash).Unlock()
	held, err := s.holds(&c)
	if err != nil {
		return fmt.Errorf("kv: put: %w", err)
	}
	c.addSeen, c.addLive = !held, !held
	return s.commit(&c)
}

// Delete removes key, durably when it returns nil; a key pebble does not
// hold is no error. In a filter mode the key leaves the cuckoo filter
// only after pebble's delete is durable; if that filter delete fails, or
// the filter refuses it (store.ErrAmbiguous, counted in Stats.Kept), the
// key stays "maybe present" in the filter: a false positive.
func (s *Service) Delete(key []byte) error {
	if reserved(key) {
		return fmt.Errorf("kv: delete: %w: key %q is in the filter log's key space", ErrInvalid, key)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	c := change{key: key, del: true}
	if !s.mode.filtered() {
		return s.commit(&c)
	}
	c.hash = store.Hash(key)
	defer s.locks.lock(c.hash).Unlock()
	held, err := s.holds(&c)
	if err != nil {
		return fmt.Errorf("kv: delete: %w", err)
	}
	if !held {
		return nil
	}
	// Filters the Service stopped trusting (ModeExternal: a refused
	// apply) may lack the key's copy: a cuckoo delete could then remove
	// another key's fingerprint, so the delete goes to pebble alone and
	// the copy, if any, stays (a false positive).
	c.deleteLive = !s.untrusted.Load()
	return s.commit(&c)
}

// holds reports whether pebble holds c.key, reading pebble only when the
// cuckoo filter says "maybe", or when the filters are not trusted (they
// may lack a key pebble holds). Called with the key's lock held.
func (s *Service) holds(c *change) (bool, error) {
	if !s.untrusted.Load() && !s.live.HasHash(c.hash) {
		return false, nil
	}
	_, found, err := s.read(c.key, false)
	return found, err
}

// commit makes c durable: in pebble, and in the filters in the order the
// package doc argues for (filters before a put's pebble write, after a
// delete's). It is the one place that says how each mode reaches the
// disk.
func (s *Service) commit(c *change) error {
	switch s.mode {
	case ModePebbleOnly:
		return s.writePebble(c)
	case ModePerFilter, ModeBatch:
		if c.del {
			return s.inOrder(s.writePebble, s.writeFilters, c)
		}
		if s.mode == ModeBatch {
			return s.commitGrouped(c)
		}
		return s.inOrder(s.writeFilters, s.writePebble, c)
	case ModeExternal:
		return s.commitExternal(c)
	}
	return fmt.Errorf("kv: %w: mode %d", ErrInvalid, int(s.mode))
}

// inOrder makes c durable by first, then (once first returned nil) by
// second, with s.crashPoint's chance to stop it in between.
func (s *Service) inOrder(first, second func(*change) error, c *change) error {
	if err := first(c); err != nil {
		return err
	}
	if err := s.between(); err != nil {
		return err
	}
	return second(c)
}

// between runs s.crashPoint, if set, between the two writes of a change.
func (s *Service) between() error {
	if s.crashPoint == nil {
		return nil
	}
	return s.crashPoint()
}

// writePebble writes c's key to pebble and waits until it is durable.
func (s *Service) writePebble(c *change) error {
	if c.del {
		if err := s.db.Delete(c.key, pebble.Sync); err != nil {
			return fmt.Errorf("kv: delete: pebble: %w", err)
		}
		return nil
	}
	if err := s.db.Set(c.key, c.value, pebble.Sync); err != nil {
		return fmt.Errorf("kv: put: pebble: %w", err)
	}
	return nil
}

// writeFilters makes c's filter changes durable: one call, and one
// durability wait, per filter in ModePerFilter; one Batch in ModeBatch.
func (s *Service) writeFilters(c *change) error {
	if !c.addSeen && !c.addLive && !c.deleteLive {
		return nil
	}
	if s.mode == ModeBatch {
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
		res, err := bt.Commit()
		if c.deleteLive {
			// The batch's only op.
			return s.deleted(err == nil && res[0], err)
		}
		if err != nil {
			return fmt.Errorf("kv: put: filters: %w", err)
		}
		return nil
	}
	if c.addSeen {
		if _, err := s.seen.AddHash(c.hash); err != nil {
			return fmt.Errorf("kv: put: filters: %w", err)
		}
	}
	if c.addLive {
		if err := s.live.AddHash(c.hash); err != nil {
			return fmt.Errorf("kv: put: filters: %w", err)
		}
	}
	if c.deleteLive {
		return s.deleted(s.live.DeleteHash(c.hash))
	}
	return nil
}

// deleted reports the outcome of the cuckoo delete of a key pebble held:
// a refusal for ambiguity keeps the key's copy (counted), and a filter
// with no copy to delete broke the invariant.
func (s *Service) deleted(ok bool, err error) error {
	switch {
	case errors.Is(err, store.ErrAmbiguous):
		s.kept.Add(1)
		return nil
	case err != nil:
		return fmt.Errorf("kv: delete: filters: %w", err)
	case !ok:
		return errors.New("kv: delete: the cuckoo filter held no copy of a key pebble held")
	}
	return nil
}
