package kv

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/filterstore/filterstore/store"
)

// Get returns key's value and whether pebble holds key. In a filter mode
// a key that either filter calls absent is answered "not found" without
// reading pebble (counted in Stats.Skipped). The value is a copy the
// caller owns.
func (s *Service) Get(key []byte) (value []byte, found bool, err error) {
	if err := s.enter(); err != nil {
		return nil, false, err
	}
	defer s.mu.RUnlock()
	if reserved(key) {
		return nil, false, fmt.Errorf("kv: get: %w: key %q is in the filter log's key space", ErrInvalid, key)
	}
	if s.mode.filtered() && !s.untrusted.Load() {
		h := store.Hash(key)
		// The Bloom filter first: one cache line, and a key never put
		// stops there.
		if !s.seen.HasHash(h) || !s.live.HasHash(h) {
			s.skipped.Add(1)
			return nil, false, nil
		}
	}
	return s.read(key, true)
}

// Seen reports whether key may ever have been put, deleted since or not:
// false is certain, since the seen filter was last built. A rebuild at
// Open (see the README) builds it from the keys pebble holds, so it
// forgets keys deleted before it. ModePebbleOnly keeps no filter and
// answers true ("maybe"), as does a closed Service.
func (s *Service) Seen(key []byte) bool {
	if s.enter() != nil {
		return true
	}
	defer s.mu.RUnlock()
	return !s.mode.filtered() || s.untrusted.Load() || s.seen.Has(key)
}

// read reads key from pebble, and its value if withValue (a copy).
func (s *Service) read(key []byte, withValue bool) (value []byte, found bool, err error) {
	s.pebbleReads.Add(1)
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("kv: get: %w", err)
	}
	if withValue {
		value = bytes.Clone(v)
		if value == nil {
			value = []byte{}
		}
	}
	if err := closer.Close(); err != nil {
		return nil, false, fmt.Errorf("kv: get: %w", err)
	}
	return value, true, nil
}
