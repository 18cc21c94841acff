package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
)

var fileCmd = &command{
	name:    "file",
	args:    "PATH.flt",
	short:   "decode a lone filter file's header and fill, without a catalog",
	minArgs: 1, maxArgs: 1,
	long: `Decode the header of one filter file (a layer of a store, found in
DIR/filters/<id>-<layer>.flt) without reading any catalog, and summarize
its data: the fill, the false-positive rate the bits imply (bloom and
counting: the mean over blocks of fill^k), an estimate of the items it
holds, and the layout invariants verify checks (data words beyond the
geometry are zero, cuckoo bucket bits above b*f are zero, bitmap bits
beyond the size are zero).

The file is mapped read-only; its header's magic, version and CRC and
the file size are checked first. A file that is not a filter file at all
(empty, text, another format such as a bbolt catalog, shorter than the
4096-byte header page, or no file at all: a directory, a FIFO, a device)
is reported in one line with exit status 2. A Bloom or counting header
whose error rate is outside (0, 1) is a problem. Bytes the header's format version does
not use must be zero, except the move-sequence word at byte 2048 of the
header page: live state a writer changes, shown as it is. A file that
fails any check is reported with its offset, and the exit status is 1.

Example:

  inspect file /tmp/fsdemo/filters/1-0.flt`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error { return runFile },
}

type fileOut struct {
	File          string      `json:"file"`
	FileBytes     int64       `json:"file_bytes"`
	Header        *headerJSON `json:"header"`
	MoveSeq       uint64      `json:"move_seq"`
	Stamp         uint64      `json:"checkpoint_stamp"`
	Geometry      string      `json:"geometry"`
	GeomWords     uint64      `json:"geometry_words"`
	DataWords     uint64      `json:"data_words"`
	Fill          string      `json:"fill_counts"`
	Set           uint64      `json:"set"`
	Total         uint64      `json:"total"`
	FillRatio     jfloat      `json:"fill_ratio"`
	FPRFromBits   *jfloat     `json:"fpr_from_bits,omitempty"`
	ItemsFromData jfloat      `json:"items_from_data"`
	CounterSum    *uint64     `json:"counter_sum,omitempty"`
	Saturated     *uint64     `json:"saturated_counters,omitempty"`
	Findings      []finding   `json:"findings"`
}

func runFile(e *env, args []string) error {
	path := args[0]
	name := filepath.Base(path)
	fnd := newFindings(10)
	page, err := readHeaderPage(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such file", path)
	} else if err != nil {
		if fi, serr := os.Stat(path); errors.Is(err, regfile.ErrNotRegular) && serr == nil {
			// Not corruption of a filter file: the argument names
			// something else (a directory, a device, a FIFO), as a text
			// file would.
			return fmt.Errorf("%s: not a filter file: it is %s", path, regfile.Describe(fi.Mode()))
		}
		return err
	}
	if why := notAFilter(page); why != "" {
		return fmt.Errorf("%s: not a filter file: %s", path, why)
	}
	checkReserved(page, name, fnd)
	v, err := mmapbits.OS{}.OpenView(path)
	if err != nil && e.json && errors.Is(err, mmapbits.ErrCorrupt) {
		// A header that fails its checks is a finding too, so that a
		// script reads it, with its offset, as it reads the others.
		off := int64(-1) // no field named: no offset
		if fe := (*mmapbits.FieldError)(nil); errors.As(err, &fe) {
			off = fe.Offset
		}
		fnd.addFinding("header", problem(name, off, "%v", err))
		all := fnd.all()
		if werr := writeJSON(e.stdout, fileOut{File: name, FillRatio: jfloat(math.NaN()), Findings: all}); werr != nil {
			return werr
		}
		return problemsError(fnd.count(sevProblem), "in "+name, all)
	}
	if err != nil {
		return err
	}
	defer v.Close()
	h := v.Header()
	out := fileOut{File: name, FileBytes: h.FileSize(), Header: toHeaderJSON(h), DataWords: v.NumWords(), FillRatio: jfloat(math.NaN())}
	if len(page) >= mmapbits.SeqOffset+8 {
		out.MoveSeq = binary.LittleEndian.Uint64(page[mmapbits.SeqOffset:])
	}
	if len(page) >= mmapbits.StampOffset+8 {
		out.Stamp = binary.LittleEndian.Uint64(page[mmapbits.StampOffset:])
	}
	if bad := h.Kind == mmapbits.KindBloom || h.Kind == mmapbits.KindCounting; bad && !(h.ErrorRate > 0 && h.ErrorRate < 1) {
		// A Bloom or counting layer is sized for a rate in (0, 1): the
		// store never writes another (NaN fails this test too).
		fnd.addFinding("header", problem(name, fieldOffset("ErrorRate"), "the header's error rate %g is outside (0, 1)", h.ErrorRate))
	}
	g, gerr := geometryOf(h)
	var s *layerScan
	if gerr != nil {
		fnd.addFinding("geometry", problem(name, fieldOffset(geometryField(h)), "the header's geometry is invalid: %v", gerr))
	} else {
		if need := mmapbits.PagesFor(g.words); h.DataPages > need {
			fnd.addFinding("pages", note(name, fieldOffset("DataPages"), "header says %d data pages, the geometry needs only %d", h.DataPages, need))
		}
		s = scanLayer(v, g, scanOpts{rel: name, fs: fnd})
		out.setScan(s)
	}
	all := fnd.all()
	out.Findings = all
	if out.Findings == nil {
		out.Findings = []finding{}
	}
	problems := fnd.count(sevProblem)
	if e.json {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		printFile(e.stdout, &out, h, s, gerr, problems)
		for _, f := range all {
			fmt.Fprintln(e.stdout, f)
		}
	}
	if problems > 0 {
		return problemsError(problems, "in "+name, all)
	}
	return nil
}

// setScan fills what the data scan found.
func (out *fileOut) setScan(s *layerScan) {
	g := s.g
	out.Geometry, out.GeomWords, out.Fill = g.sizeDesc(), g.words, g.fillName()
	out.Set, out.Total, out.FillRatio, out.ItemsFromData = s.set, g.total, jfloat(s.fill()), jfloat(s.estItems)
	if g.kind == mmapbits.KindBloom || g.kind == mmapbits.KindCounting {
		f := jfloat(s.fprBits)
		out.FPRFromBits = &f
	}
	if g.kind == mmapbits.KindCounting {
		out.CounterSum, out.Saturated = &s.sum, &s.saturated
	}
}

// printFile writes the header and the data summary (s nil: the geometry
// is invalid, gerr says why).
func printFile(w io.Writer, out *fileOut, h mmapbits.Header, s *layerScan, gerr error, problems int) {
	k := &kv{}
	if sp := h.SumPages(); sp > 0 {
		k.add("file", "%s (%d bytes: a 4096-byte header page, %s and %s)", out.File, out.FileBytes,
			plural(int(h.DataPages), "data page", "data pages"), plural(int(sp), "checksum page", "checksum pages"))
	} else {
		k.add("file", "%s (%d bytes: a 4096-byte header page and %s; format version %d keeps no data checksums)",
			out.File, out.FileBytes, plural(int(h.DataPages), "data page", "data pages"), h.Version)
	}
	k.add("header", "magic %q, version %d, CRC-32C ok", mmapbits.Magic, h.Version)
	k.add("kind", "%s", h.Kind)
	k.add("filter id", "%d", h.FilterID)
	k.add("layer", "%d", h.Layer)
	if h.Version >= 2 {
		k.add("store id", "%#016x", h.StoreID)
	} else {
		k.add("store id", "none (format version 1)")
	}
	k.add("move seq", "%d (byte %d: live state of cuckoo moves, outside the CRC)", out.MoveSeq, mmapbits.SeqOffset)
	k.add("stamp", "%d (byte %d: LSN of the last checkpoint that wrote the file or of a durable change applied since, outside the CRC; the catalog's must not be higher, nor this past the WAL's end)", out.Stamp, mmapbits.StampOffset)
	k.add("salt", "%#016x", h.Salt)
	if h.Kind != mmapbits.KindBitmap {
		k.add("derivation", "%s", derivationName(h))
	}
	if h.Kind != mmapbits.KindBitmap {
		k.add("capacity", "%d items", h.Capacity)
	}
	if h.ErrorRate != 0 || h.Kind == mmapbits.KindBloom || h.Kind == mmapbits.KindCounting {
		k.add("error rate", "%g", h.ErrorRate)
	}
	if s != nil {
		addFileFill(k, s, out.DataWords)
	} else {
		k.add("geometry", "invalid: %v", gerr)
	}
	if problems == 0 {
		k.add("invariants", "ok")
	} else {
		k.add("invariants", "%s (below)", plural(problems, "problem", "problems"))
	}
	k.write(w)
}

// addFileFill adds the geometry, fill and per-kind estimates.
func addFileFill(k *kv, s *layerScan, dataWords uint64) {
	g := s.g
	k.add("geometry", "%s (%d of %d data words)", g.sizeDesc(), g.words, dataWords)
	k.add("fill", "%d of %d %s (%s)", s.set, g.total, g.fillName(), fmtFill(s.fill()))
	switch g.kind {
	case mmapbits.KindBloom:
		k.add("FPR from bits", "%s (mean over blocks of (set/512)^k)", fmtRate(s.fprBits))
		k.add("items (est.)", "%.0f (from the set bits per block)", s.estItems)
	case mmapbits.KindCounting:
		k.add("FPR from bits", "%s (mean over blocks of (nonzero/128)^k)", fmtRate(s.fprBits))
		k.add("counters", "sum %d, %d saturated at 15", s.sum, s.saturated)
		if s.saturated == 0 {
			k.add("items", "%.0f (counter sum / k)", s.estItems)
		} else {
			k.add("items (est.)", "%.0f (from the nonzero counters per block; some saturated)", s.estItems)
		}
	case mmapbits.KindCuckoo:
		k.add("items", "%d (one per used slot)", s.set)
	case mmapbits.KindBitmap:
		k.add("set bits", "%d", s.set)
	}
}

// notAFilter says why header page b (the first 4096 bytes of a file, or
// all of a shorter one) is not that of a filter file at all, or "" if it
// starts with the magic and is whole. A damaged filter header (bad
// version or CRC) is left to the decoder: that is corruption, not usage.
func notAFilter(b []byte) string {
	const boltMagic = 0xED0CDAED // bbolt's meta page, after its 16-byte page header
	switch {
	case len(b) == 0:
		return "the file is empty"
	case len(b) >= len(mmapbits.Magic) && string(b[:len(mmapbits.Magic)]) == mmapbits.Magic:
		if len(b) < mmapbits.HeaderSize {
			return fmt.Sprintf("truncated: its header page has %d of %d bytes", len(b), mmapbits.HeaderSize)
		}
		return ""
	case len(b) >= 20 && binary.LittleEndian.Uint32(b[16:]) == boltMagic:
		return "it is a bbolt database (a store's catalog.db?), not a .flt file"
	case isText(b):
		return fmt.Sprintf("it is a text file (it starts with %s)", fmtKey(firstLine(b)))
	}
	return fmt.Sprintf("it does not start with the magic %q (it starts with %q)", mmapbits.Magic, b[:min(len(b), len(mmapbits.Magic))])
}

// isText reports whether b is printable UTF-8 text with line breaks and
// tabs.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
	}
	return true
}

// firstLine returns b's first line, at most 20 bytes of it.
func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	if len(line) > 20 {
		line = strings.ToValidUTF8(line[:20], "") + "..."
	}
	return line
}
