package main

import (
	"reflect"
)

// The second catalog read of verify: records and files that disagree with
// the first read may be a live writer's doing. Read the catalog and the
// WAL listing again; what the second read explains is not a problem.

// droppedRecords counts the records of one dropped filter.
type droppedRecords struct {
	n   int
	rel string
	off int64
}

func (v *verifier) phaseReread() error {
	if v.cat == nil {
		return nil
	}
	ref, err := readCatalogGuarded(v.dir)
	known := err == nil
	if known {
		v.quiescent = reflect.DeepEqual(v.cat, ref) && sameWAL(v.dir, v.res)
	} else {
		// Without a second read, records and files the first read did not
		// know cannot be told from a writer's work: note them only.
		ref = v.cat
		v.fnd.addFinding("reread", note("catalog.db", -1, "the catalog could not be read a second time (%s): records and files it did not list at first are not reported as problems",
			scrubPath(err.Error(), v.dir)))
	}
	refByID := filtersByID(ref)
	v.staleRecords(ref, refByID, known)
	for _, u := range v.unnamed {
		switch f := refByID[u.id]; {
		case f != nil && u.layer < len(f.Layers):
			// created or grown after the first read
		case !known || !v.quiescent:
			// A writer that creates a filter or a layer writes its file
			// before the catalog names it: while one is active, a file
			// the catalog does not name yet may be its work.
			u.why.Severity = sevNote
			u.why.Message += " (unless the active writer is creating it now)"
			v.fnd.addFinding("orphan", u.why)
		default:
			v.fnd.addFinding("orphan", u.why)
		}
	}
	for _, j := range v.missing {
		if f := refByID[j.f.ID]; f != nil && j.i < len(f.Layers) && known {
			v.fnd.addFinding("missing", problem(j.rel, -1, "the catalog lists this layer file of filter %s, but it does not exist", fmtKey(j.f.Name)))
		}
	}
	checkWALStart(v.dir, v.fnd, v.res, ref)
	return nil
}

// staleRecords judges the records that named filters or layers the first
// read did not hold, against ref, the second read (known: it succeeded).
func (v *verifier) staleRecords(ref *catalogSnapshot, refByID map[uint64]*filterRecord, known bool) {
	dropped := map[uint64]*droppedRecords{}
	for _, st := range v.stale {
		f := refByID[st.id]
		switch {
		case f != nil && st.layer < len(f.Layers) || !known:
			// created or grown after the first read, or unknowable
		case f != nil:
			v.fnd.addFinding("record", problem(st.rel, st.off, "record LSN %d names layer %d of filter %s, which has %d layers",
				st.lsn, st.layer, fmtKey(f.Name), len(f.Layers)))
		case st.id != 0 && st.id < ref.NextID:
			d := dropped[st.id]
			if d == nil {
				d = &droppedRecords{rel: st.rel, off: st.off}
				dropped[st.id] = d
			}
			d.n++
		default:
			v.fnd.addFinding("record", problem(st.rel, st.off, "record LSN %d names filter id %d, which the catalog never allocated (next id %d)",
				st.lsn, st.id, ref.NextID))
		}
	}
	for _, id := range sortedIDs(dropped) {
		d := dropped[id]
		what := plural(d.n, "WAL record names", "WAL records name")
		v.fnd.addFinding("dropped", note(d.rel, d.off, "%s filter id %d, which the catalog no longer holds (dropped): replay skips them", what, id))
	}
}
