package kv

import (
	"errors"
	"testing"
)

func TestOpenRefusesMixedModes(t *testing.T) {
	plain := t.TempDir()
	s := open(t, plain, ModePebbleOnly)
	if err := s.Put(key(1), value(1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, mode := range filterModes {
		if _, err := Open(plain, mode, nil); !errors.Is(err, ErrModeMismatch) {
			t.Errorf("Open(%v) of a pebble-only directory: %v, want ErrModeMismatch", mode, err)
		}
	}

	filtered := t.TempDir()
	s = open(t, filtered, ModePerFilter)
	if err := s.Put(key(1), value(1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(filtered, ModePebbleOnly, nil); !errors.Is(err, ErrModeMismatch) {
		t.Errorf("Open(pebble-only) of a directory with filters: %v, want ErrModeMismatch", err)
	}
	// The filter modes share their filters.
	s = open(t, filtered, ModeBatch)
	if _, found, err := s.Get(key(1)); !found || err != nil {
		t.Errorf("Get in batch mode of a key put in per-filter mode: %v, %v", found, err)
	}
}

func TestOpenInvalid(t *testing.T) {
	_, err := Open(t.TempDir(), 0, &Options{ErrorRate: 1.5})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open with mode 0 and ErrorRate 1.5: %v, want ErrInvalid", err)
	}
	// Both problems at once.
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 2 {
		t.Errorf("Open reported %d problems, want 2: %v", n, err)
	}
	if _, err := ParseMode("raft"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseMode of an unknown name: %v", err)
	}
	for _, m := range Modes() {
		if got, err := ParseMode(m.String()); got != m || err != nil {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
}

func TestClosed(t *testing.T) {
	for _, mode := range Modes() {
		s := open(t, t.TempDir(), mode)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(key(1), value(1)); !errors.Is(err, ErrClosed) {
			t.Errorf("%v: Put after Close: %v", mode, err)
		}
		if err := s.Delete(key(1)); !errors.Is(err, ErrClosed) {
			t.Errorf("%v: Delete after Close: %v", mode, err)
		}
		if _, _, err := s.Get(key(1)); !errors.Is(err, ErrClosed) {
			t.Errorf("%v: Get after Close: %v", mode, err)
		}
		if !s.Seen(key(1)) {
			t.Errorf("%v: Seen after Close = false, want true (maybe)", mode)
		}
		if err := s.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("%v: second Close: %v", mode, err)
		}
	}
}
