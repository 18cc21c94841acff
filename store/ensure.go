package store

import (
	"errors"

	"github.com/filterstore/filterstore/mmapbits"
)

// EnsureBloom returns the Bloom filter called name, creating it with cfg if
// there is none (BF.INSERT's create-if-missing): safe to call on every
// start of a program.
//
// A filter that exists keeps the configuration it was created with: cfg is
// then ignored, not compared (Info reports the filter's own). A filter of
// another kind under that name is ErrWrongKind. Racing a Create, Drop or
// Rename of the name, it returns the filter that has the name when it
// succeeds.
func (s *Store) EnsureBloom(name string, cfg BloomConfig) (*Bloom, error) {
	h, err := s.ensure(name, mmapbits.KindBloom, func() (handle, error) { return s.CreateBloom(name, cfg) })
	if err != nil {
		return nil, err
	}
	return h.(*Bloom), nil
}

// EnsureCuckoo returns the cuckoo filter called name, creating it with cfg
// if there is none; see EnsureBloom.
func (s *Store) EnsureCuckoo(name string, cfg CuckooConfig) (*Cuckoo, error) {
	h, err := s.ensure(name, mmapbits.KindCuckoo, func() (handle, error) { return s.CreateCuckoo(name, cfg) })
	if err != nil {
		return nil, err
	}
	return h.(*Cuckoo), nil
}

// EnsureCounting returns the counting Bloom filter called name, creating
// it with cfg if there is none; see EnsureBloom.
func (s *Store) EnsureCounting(name string, cfg BloomConfig) (*Counting, error) {
	h, err := s.ensure(name, mmapbits.KindCounting, func() (handle, error) { return s.CreateCounting(name, cfg) })
	if err != nil {
		return nil, err
	}
	return h.(*Counting), nil
}

// EnsureBitmap returns the bitmap called name, creating it with bits bits
// if there is none; see EnsureBloom. An existing bitmap keeps its size.
func (s *Store) EnsureBitmap(name string, bits uint64) (*Bitmap, error) {
	h, err := s.ensure(name, mmapbits.KindBitmap, func() (handle, error) { return s.CreateBitmap(name, bits) })
	if err != nil {
		return nil, err
	}
	return h.(*Bitmap), nil
}

// ensure looks name up as kind, and creates it with create if it is not
// there. A create that finds the name taken (another caller created it
// meanwhile) looks it up again; a lookup that finds it gone (dropped
// meanwhile) creates again.
func (s *Store) ensure(name string, kind mmapbits.Kind, create func() (handle, error)) (handle, error) {
	for {
		h, err := s.lookup(name, kind)
		if !errors.Is(err, ErrNotFound) {
			return h, err
		}
		h, err = create()
		if !errors.Is(err, ErrExists) {
			return h, err
		}
	}
}
