package main

import (
	"errors"

	"github.com/filterstore/filterstore/store"
)

// phaseSums checks every data page against the checksum its last
// checkpoint stored, through the library's Check (read-only store: pages a
// WAL record after the checkpoint changed are excused). A mismatch is a
// problem naming the file and the page's offset, unless a writer is
// running (the store's SESSION marker, locked), or ran since verify
// opened the store: then the page may hold a change not checkpointed
// yet, and it is a note. A Bloom page of a store whose writer died is
// counted as changed (see store.Store.Check).
func (v *verifier) phaseSums() error {
	if v.cat == nil {
		return nil
	}
	s, err := openStore(v.dir)
	if err != nil {
		return nil // phaseOpen reports it
	}
	defer s.Close()
	// Problems are in rep; broken filters are phaseOpen's.
	var rep *store.CheckReport
	if v.target != nil {
		rep, _ = s.CheckFilter(v.target.Name)
	} else {
		rep, _ = s.Check()
	}
	if rep == nil {
		return nil
	}
	v.out.SumsChecked = true
	v.out.PagesVerified, v.out.PagesChanged = rep.Pages, rep.Changed
	for _, p := range rep.Problems {
		var pe *store.PageError
		if !errors.As(p, &pe) || v.target != nil && pe.Filter != v.target.Name {
			continue
		}
		v.fnd.addFinding("checksum", problem(pe.File, pe.Offset,
			"data page %d of filter %q layer %d does not match its checksum (stored %08x, computed %08x): the data changed since the checkpoint wrote it",
			pe.Page, pe.Filter, pe.Layer, pe.Stored, pe.Computed))
	}
	if rep.Unsettled > 0 {
		v.fnd.addFinding("checksum", note("", -1,
			"%s differ from their checksums, but a writer has the store open (SESSION), or ran while verify read it: they may hold changes not yet checkpointed; verify again after a clean close",
			plural(int(rep.Unsettled), "data page", "data pages")))
	}
	if rep.NoSums > 0 {
		v.fnd.addFinding("checksum", note("", -1, "data of %s not verified: format versions 1 and 2 keep no data checksums",
			plural(rep.NoSums, "layer file", "layer files")))
	}
	return nil
}
