package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
)

// The catalog-vs-files phases of verify: every layer file the catalog
// lists exists and is checked (header page, then data layout, with the
// pending WAL records applied), and the files it does not list are noted.

func (v *verifier) phaseLayerFiles() error {
	v.scans = make([]*layerScan, len(v.jobs))
	v.stamps = make([]uint64, len(v.jobs))
	for ji, j := range v.jobs {
		// Before phaseReread's second WAL read: a writer that raises it
		// (a change whose record became durable after phaseWAL's read)
		// changed the WAL, so the store is not quiescent and the stamp
		// goes unchecked (checkStampPastWAL).
		if b, err := readHeaderPage(j.l.Path); err == nil && len(b) >= mmapbits.StampOffset+8 {
			v.stamps[ji] = binary.LittleEndian.Uint64(b[mmapbits.StampOffset:])
		}
		var ov *overlay
		if pl := v.pend.of(j.f.ID).layers[j.i]; pl != nil {
			ov = pl.ov
		}
		want := j.l.Header
		s, gone, n := verifyLayerFile(j.l.Path, j.rel, &want, ov, v.prog, v.fnd)
		if gone {
			v.missing = append(v.missing, j)
			continue
		}
		v.out.LayerFiles++
		v.out.DataBytes += n
		if s != nil && !s.readErr {
			v.scans[ji] = s
		}
	}
	return nil
}

// rootMarkers are files of the store's directory that verify notes when
// it finds them, with what they mean.
var rootMarkers = []struct{ name, says string }{
	{format.ResyncName, "an msync of a filter file or a catalog commit failed: the next writer Open drops the catalog's and the filter files' pages from memory (it fails while another process maps them: close read-only stores and inspect commands on this store first), replays the WAL over what the disk holds, rewrites every page of every filter file it can open (not a broken filter's) before it trusts them, then removes this marker; if a layer file was missing then, the marker stays, listing those files alone, for the Open that finds them again"},
	{format.CatalogTmpName, "a catalog being created when its process stopped: nothing reads it, and only the creation of a new store here removes it; it can be deleted"},
}

// phaseUnlisted notes the root markers, and temporary and orphan files in
// the filters directory; without a catalog, it checks each layer file on
// its own.
func (v *verifier) phaseUnlisted() error {
	// The files a writer's Open writes in place (regfile.OpenOwn): one
	// that is not a regular file with one name makes that Open refuse the
	// store.
	refused := map[string]bool{}
	for _, name := range []string{format.LockName, format.SessionName, format.ResyncName} {
		if err := regfile.CheckOwn(filepath.Join(v.dir, name)); err != nil {
			refused[name] = true
			v.fnd.addFinding("marker", problem(name, -1, "a writer's Open refuses the store for it: %s", scrubPath(err.Error(), v.dir)))
		}
	}
	for _, m := range rootMarkers {
		if _, err := os.Lstat(filepath.Join(v.dir, m.name)); err == nil && !refused[m.name] {
			v.fnd.addFinding("marker", note(m.name, -1, "%s", m.says))
		}
	}
	dir := filtersDir(v.dir)
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if unreadable(err) || outOfResources(err) {
			return fmt.Errorf("filters directory: %w", err)
		}
		// Not a directory, a symlink loop: the store's layout is
		// damaged, as a missing layer file is, and every filter's
		// files are reported missing below.
		v.fnd.addFinding("filters", problem(relPath(v.dir, dir), -1, "the filters directory cannot be listed: %s", scrubPath(err.Error(), v.dir)))
		ents = nil
	}
	if v.cat != nil {
		// Layer-0 files of this store from the next id on, named by no
		// filter: their ids run on without a gap up to runEnd.
		fresh := make(map[uint64]bool)
		for _, ent := range ents {
			id, layer, ok := parseLayerName(ent.Name())
			if ok && ent.Type().IsRegular() && layer == 0 && id >= v.cat.NextID && v.byID[id] == nil &&
				v.provenOurs(filepath.Join(dir, ent.Name()), id, layer) {
				fresh[id] = true
			}
		}
		for v.runEnd = v.cat.NextID; fresh[v.runEnd]; v.runEnd++ {
		}
	}
	for _, ent := range ents {
		n := ent.Name()
		rel := relPath(v.dir, filepath.Join(dir, n))
		base, tmp := strings.CutSuffix(n, ".tmp")
		id, layer, ok := parseLayerName(base)
		switch {
		case !ok:
			if tmp {
				v.fnd.addFinding("tmp", note(rel, -1, "temporary file not named as a layer file: the next writer Open leaves it alone"))
			}
		case v.cat == nil && tmp:
			v.fnd.addFinding("tmp", note(rel, -1, "temporary file: a layer file being created, or a leftover"))
		case v.cat == nil:
			_, _, bytes := verifyLayerFile(filepath.Join(dir, n), rel, nil, nil, v.prog, v.fnd)
			v.out.LayerFiles++
			v.out.DataBytes += bytes
		case v.target != nil && id != v.target.ID:
		case !tmp && v.byID[id] != nil && layer < len(v.byID[id].Layers):
		case !ent.Type().IsRegular():
			// The store lists regular files only (mmapbits.OS.List).
			v.fnd.addFinding("orphan", note(rel, -1, "not a regular file, named as a layer file the catalog does not list: the next writer Open leaves it alone"))
		default:
			if f, ok := v.orphan(filepath.Join(dir, n), rel, id, layer, tmp); ok {
				v.fnd.addFinding("orphan", f)
			} else {
				v.unnamed = append(v.unnamed, unnamedFile{rel: rel, id: id, layer: layer, why: f})
			}
		}
	}
	return nil
}

// orphan is the finding for a file of the filters directory that the
// catalog does not list, named as layer layer of filter id (tmp: with the
// temporary suffix): what the next writer Open does with it, decided as
// the store decides (store/orphans.go). It removes a leftover of this
// store (a temporary file, a dropped filter's file, a layer or filter
// being created when it crashed, all zeros); it leaves alone a file whose
// header does not prove it this store's file of that name; and it refuses
// to open (ErrCorrupt) over a file of this store with data that the
// catalog should name, as when the catalog is older than the files. That
// last finding is a problem, returned with ok false: the second catalog
// read judges it (phaseReread), since a live writer may have made the
// file since the first read.
func (v *verifier) orphan(path, rel string, id uint64, layer int, tmp bool) (f finding, ok bool) {
	kind := "orphan file"
	if tmp {
		kind = "temporary file"
	}
	view, err := mmapbits.OS{}.OpenView(path)
	if tmp && errors.Is(err, mmapbits.ErrShortHeader) {
		return note(rel, -1, "temporary file shorter than a header (a create stopped before writing it): the next writer Open removes it"), true
	}
	if tmp && errors.Is(err, mmapbits.ErrZeroHeader) {
		return note(rel, -1, "temporary file whose header page is all zero (a create's header lost to a power loss): the next writer Open removes it"), true
	}
	if err != nil {
		return note(rel, -1, "%s the catalog does not list, whose header cannot be read (%s): the next writer Open leaves it alone", kind, scrubPath(err.Error(), v.dir)), true
	}
	defer view.Close()
	h := view.Header()
	switch {
	case h.StoreID == 0:
		return note(rel, -1, "%s the catalog does not list, from before store ids: the next writer Open leaves it alone", kind), true
	case h.StoreID != v.cat.StoreID:
		return note(rel, -1, "%s of another store (header store id %#x): the next writer Open leaves it alone", kind, h.StoreID), true
	case h.FilterID != id || int(h.Layer) != layer:
		return note(rel, -1, "%s whose header names filter %d layer %d, not its file name's: the next writer Open leaves it alone", kind, h.FilterID, h.Layer), true
	}
	rec := v.byID[id]
	switch {
	case tmp:
		return note(rel, -1, "temporary file: a layer file being created, or a leftover the next writer Open removes"), true
	case rec == nil && id < v.cat.NextID:
		return note(rel, -1, "orphan file: a dropped filter's file, or a filter's being created when its create failed; the next writer Open removes it"), true
	case rec == nil && id >= v.cat.NextID && id < v.runEnd && layer == 0, rec != nil && layer == len(rec.Layers):
		for i := range view.NumWords() {
			if w, ok := view.Word(i); !ok || w != 0 {
				return problem(rel, -1, "this store's file with data, of a filter or layer the catalog does not name (is the catalog older than the files?): the next writer Open fails with ErrCorrupt"), false
			}
		}
		return note(rel, -1, "orphan file, all zeros: a filter or layer being created when the store stopped, or whose create failed; the next writer Open removes it"), true
	}
	return problem(rel, -1, "this store's file, of a filter or layer the catalog (next id %d) does not name (is the catalog older than the files?): the next writer Open fails with ErrCorrupt", v.cat.NextID), false
}

// provenOurs reports whether the file at path has a readable header of
// this store's file of filter id, layer layer, as the store's Open proves
// a file its own before it removes it (store/orphans.go).
func (v *verifier) provenOurs(path string, id uint64, layer int) bool {
	view, err := mmapbits.OS{}.OpenView(path)
	if err != nil {
		return false
	}
	defer view.Close()
	h := view.Header()
	return h.StoreID != 0 && h.StoreID == v.cat.StoreID && h.FilterID == id && int(h.Layer) == layer
}

// verifyLayerFile checks one layer file: its header page (see
// checkLayerHeader), then the layout invariants of its data with ov
// applied (scanLayer). gone reports a file that does not exist.
func verifyLayerFile(path, rel string, want *mmapbits.Header, ov *overlay, prog *progress, fnd *findings) (s *layerScan, gone bool, dataBytes int64) {
	prog.setCurrent(rel)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, true, 0
	}
	v, err := mmapbits.OS{}.OpenView(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, true, 0
		}
		if b, err := readHeaderPage(path); err == nil {
			checkReserved(b, rel, fnd)
		}
		msg := strings.TrimPrefix(scrubPath(err.Error(), filepath.Dir(filepath.Dir(path))), rel+": ")
		if unreadable(err) {
			fnd.addUnreadable("open", problem(rel, offsetIn(err), "%s", msg))
		} else {
			fnd.addFinding("open", problem(rel, offsetIn(err), "%s", msg))
		}
		return nil, false, 0
	}
	defer v.Close()
	dataBytes = int64(v.NumWords()) * 8
	g, ok := checkLayerHeader(path, rel, v.Header(), want, fnd)
	if !ok {
		prog.add(dataBytes)
		return nil, false, dataBytes
	}
	return scanLayer(v, g, scanOpts{rel: rel, ov: ov, prog: prog, fs: fnd}), false, dataBytes
}

// checkLayerHeader checks a decoded header (magic, version, CRC-32C and
// size were checked by the view): reserved bytes are zero, the fields are
// the catalog's (want, if known), the geometry is valid and needs the data
// pages the header says. It returns the geometry, and false if it is
// invalid.
func checkLayerHeader(path, rel string, h mmapbits.Header, want *mmapbits.Header, fnd *findings) (geom, bool) {
	if b, err := readHeaderPage(path); err == nil {
		checkReserved(b, rel, fnd)
	}
	if want != nil && h.Version == 1 && want.StoreID != 0 {
		fnd.addFinding("v1", note(rel, -1, "format version 1 header: it predates store ids, so it cannot be checked against the catalog's"))
	}
	if want != nil {
		for _, d := range headerDiff(h, *want) {
			fnd.addFinding("header", problem(rel, int64(d.off), "header field %s: %s", d.name, d.value))
		}
	}
	g, err := geometryOf(h)
	if err != nil {
		fnd.addFinding("geometry", problem(rel, fieldOffset(geometryField(h)), "the header's geometry is invalid: %v", err))
		return g, false
	}
	if need := mmapbits.PagesFor(g.words); h.DataPages > need {
		fnd.addFinding("pages", note(rel, 16, "header says %d data pages, the geometry (%s) needs only %d", h.DataPages, g.sizeDesc(), need))
	}
	return g, true
}

// checkReserved adds a finding for the first nonzero reserved byte of
// header page b.
func checkReserved(b []byte, rel string, fnd *findings) {
	if f, bad := reservedByte(b, rel); bad {
		fnd.addFinding("reserved", f)
	}
}

// unnamedFile is a file of this store, with data, of a filter or layer
// that the first catalog read did not name.
type unnamedFile struct {
	rel   string
	id    uint64
	layer int
	why   finding // the problem, if the second read does not name it
}
