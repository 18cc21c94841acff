package store

import "testing"

// TestID: a store's ID is not 0, survives a reopen, is the same for a
// read-only open beside the writer, and differs between two stores.
func TestID(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	id := s.ID()
	if id == 0 {
		t.Fatal("ID is 0")
	}
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	if r.ID() != id {
		t.Errorf("read-only open: ID %016x, the writer's %016x", r.ID(), id)
	}
	must(t, r.Close())
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	if s.ID() != id {
		t.Errorf("after a reopen: ID %016x, was %016x", s.ID(), id)
	}
	must(t, s.Close())
	o := mustOpen(t, t.TempDir(), nil)
	defer o.Close()
	if o.ID() == id {
		t.Errorf("two stores share the ID %016x", id)
	}
}
