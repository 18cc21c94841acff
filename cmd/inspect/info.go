package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
)

var infoCmd = &command{
	name:    "info",
	args:    "DIR NAME",
	short:   "everything known about one filter",
	minArgs: 2, maxArgs: 2,
	long: `Show everything known about the filter NAME of the store in DIR: its
parameters, item counts (at the checkpoint, and with the WAL records after
it), per-layer geometry, fill and estimated false-positive rate, the
checkpoint LSN, the WAL records pending for it, each layer file's path
(relative to DIR) and size, and the header fields as read from each file,
with any difference from what the catalog expects.

Example:

  inspect info /tmp/fsdemo demo`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error { return runInfo },
}

type headerJSON struct {
	Kind            string `json:"kind"`
	Version         uint32 `json:"version"`
	DataPages       uint64 `json:"data_pages"`
	FilterID        uint64 `json:"filter_id"`
	Layer           uint32 `json:"layer"`
	K               uint32 `json:"k"`
	Salt            uint64 `json:"salt"`
	Size            uint64 `json:"size"`
	BucketSize      uint32 `json:"bucket_size"`
	FingerprintBits uint32 `json:"fingerprint_bits"`
	Capacity        uint64 `json:"capacity"`
	ErrorRate       jfloat `json:"error_rate"` // null if NaN or infinite (a damaged header)
	StoreID         uint64 `json:"store_id"`
	Derivation      string `json:"derivation,omitempty"`
}

func toHeaderJSON(h mmapbits.Header) *headerJSON {
	out := &headerJSON{Kind: h.Kind.String(), Version: h.Version, DataPages: h.DataPages, FilterID: h.FilterID, Layer: h.Layer,
		K: h.K, Salt: h.Salt, Size: h.Size, BucketSize: h.BucketSize, FingerprintBits: h.FingerprintBits,
		Capacity: h.Capacity, ErrorRate: jfloat(h.ErrorRate), StoreID: h.StoreID}
	if h.Kind != mmapbits.KindBitmap {
		out.Derivation = derivationName(h)
	}
	return out
}

type infoLayer struct {
	Layer             int         `json:"layer"`
	File              string      `json:"file"`
	FileBytes         int64       `json:"file_bytes"`
	ExpectedBytes     int64       `json:"expected_bytes"`
	Capacity          uint64      `json:"capacity"`
	Items             uint64      `json:"items"`
	ItemsAtCheckpoint uint64      `json:"items_at_checkpoint"`
	PendingRecords    int         `json:"pending_wal_records"`
	ErrorRate         float64     `json:"error_rate"`
	Geometry          string      `json:"geometry"`
	FillRatio         jfloat      `json:"fill_ratio"`
	EstimatedFPR      jfloat      `json:"estimated_fpr"`
	Header            *headerJSON `json:"header,omitempty"`
	HeaderMatches     bool        `json:"header_matches_catalog"`
	HeaderDiff        []string    `json:"header_diff,omitempty"`
	HeaderError       string      `json:"header_error,omitempty"`
	header            mmapbits.Header
	haveHeader        bool
}

type pendingJSON struct {
	Records    int            `json:"records"`
	ByOp       map[string]int `json:"by_op"`
	WordWrites int            `json:"word_writes"`
	FirstLSN   uint64         `json:"first_lsn,omitempty"`
	LastLSN    uint64         `json:"last_lsn,omitempty"`
}

type infoOut struct {
	Name              string      `json:"name"`
	Kind              string      `json:"kind"`
	ID                uint64      `json:"id"`
	State             string      `json:"state"` // ok, incomplete, needs recovery, broken
	PendingRecords    int         `json:"pending_wal_records"`
	Reason            string      `json:"reason,omitempty"`
	Parameters        string      `json:"parameters"`
	Capacity          uint64      `json:"capacity"`
	ErrorRate         float64     `json:"error_rate"`
	Expansion         uint        `json:"expansion"`
	NonScaling        bool        `json:"non_scaling"`
	BucketSize        int         `json:"bucket_size,omitempty"`
	FingerprintBits   int         `json:"fingerprint_bits,omitempty"`
	MaxIterations     int         `json:"max_iterations,omitempty"`
	Bits              uint64      `json:"bits,omitempty"`
	Items             uint64      `json:"items"`
	ItemsAtCheckpoint uint64      `json:"items_at_checkpoint"`
	TotalCapacity     uint64      `json:"total_capacity"`
	SizeBytes         int64       `json:"size_bytes"`
	BitsPerItem       jfloat      `json:"bits_per_item"`
	FillRatio         jfloat      `json:"fill_ratio"`
	EstimatedFPR      jfloat      `json:"estimated_fpr"`
	CheckpointLSN     uint64      `json:"checkpoint_lsn"`
	Pending           pendingJSON `json:"pending"`
	Layers            []infoLayer `json:"layers"`
	Error             string      `json:"error,omitempty"`
}

func runInfo(e *env, args []string) error {
	dir, name := args[0], args[1]
	r, err := settled(dir, name, func(cat *catalogSnapshot) (*infoRun, error) { return readInfo(dir, name, cat) })
	if r == nil {
		return err
	}
	if e.json {
		if werr := writeJSON(e.stdout, r.out); werr != nil {
			return werr
		}
		return err
	}
	printInfo(e.stdout, &r.out, r.haveInfo, r.cat, r.f, r.pf, r.walErr)
	return err
}

// infoRun is what info read about one filter against one catalog read.
type infoRun struct {
	out      infoOut
	cat      *catalogSnapshot
	f        *filterRecord
	pf       *pendingFilter
	haveInfo bool // the store's numbers are known
	walErr   bool // the WAL could not be read
}

// readInfo reads what info shows of the filter name, as cat lists it,
// and returns it with the first problem met (nil result: the filter is
// not in cat).
func readInfo(dir, name string, cat *catalogSnapshot) (*infoRun, error) {
	f, err := findFilter(dir, cat, name)
	if err != nil {
		return nil, err
	}
	var errs firstError
	pend, perr := scanPending(dir, cat, false)
	if perr != nil {
		errs.keep(fmt.Errorf("reading the WAL: %w", perr))
		pend = &pendingSet{byID: map[uint64]*pendingFilter{}}
	}
	pf := pend.of(f.ID)
	in, fill, reason := filterInfo(dir, name, &errs)
	out := newInfoOut(f, pf, reason)
	if in != nil {
		out.Items, out.TotalCapacity, out.SizeBytes = in.Items, in.Capacity, in.SizeBytes
		out.BitsPerItem, out.EstimatedFPR = jfloat(in.BitsPerKey), jfloat(in.EstimatedFPR)
	}
	if fill != nil {
		out.FillRatio = jfloat(fill.Ratio)
	}
	for i := range f.Layers {
		out.Layers = append(out.Layers, infoLayerOf(dir, f, i, pf, in, fill, &out, &errs))
	}
	if errs.err != nil {
		out.Error = oneLine(errs.err.Error())
	}
	return &infoRun{out: out, cat: cat, f: f, pf: pf, haveInfo: in != nil, walErr: perr != nil}, errs.err
}

// firstError keeps the first error of several.
type firstError struct{ err error }

func (f *firstError) keep(err error) {
	if f.err == nil {
		f.err = err
	}
}

// filterInfo is the store's Info and Fill of name from a read-only open
// (nil if they cannot be had), and why the filter is broken ("" if it is
// not).
func filterInfo(dir, name string, errs *firstError) (*store.Info, *store.FillInfo, string) {
	s, err := openStore(dir)
	if err != nil {
		err = fmt.Errorf("the store cannot be opened: %w", relError(err, dir))
		errs.keep(err)
		return nil, nil, oneLine(err.Error())
	}
	defer s.Close()
	h, err := lookupHandle(s, name)
	if err != nil {
		errs.keep(err)
		return nil, nil, ""
	}
	i, err := h.info()
	if err != nil {
		errs.keep(relError(err, dir))
		if i.State == stateBroken {
			return nil, nil, oneLine(scrubPath(i.Reason, dir))
		}
		return nil, nil, ""
	}
	fill, err := h.fill()
	if err != nil {
		errs.keep(relError(err, dir))
		return &i, nil, ""
	}
	return &i, &fill, ""
}

// newInfoOut fills what the catalog and the pending WAL records say.
func newInfoOut(f *filterRecord, pf *pendingFilter, reason string) infoOut {
	out := infoOut{Name: f.Name, Kind: f.Kind.String(), ID: f.ID, Parameters: filterParams(f), Capacity: f.Capacity,
		ErrorRate: f.ErrorRate, Expansion: f.Expansion, NonScaling: f.NonScaling, BucketSize: f.BucketSize,
		FingerprintBits: f.FingerprintBits, MaxIterations: f.MaxIterations, Bits: f.Bits,
		CheckpointLSN: f.SyncedLSN, State: filterState(reason != "", f.Incomplete || pf.loadLSN != 0, pf.records), PendingRecords: pf.records,
		Reason: reason, BitsPerItem: jfloat(math.NaN()), FillRatio: jfloat(math.NaN()), EstimatedFPR: jfloat(math.NaN()),
		Pending: pendingJSON{Records: pf.records, ByOp: map[string]int{}, WordWrites: pf.writes, FirstLSN: pf.firstLSN, LastLSN: pf.lastLSN}}
	for op, n := range pf.byOp {
		out.Pending.ByOp[op.String()] = n
	}
	return out
}

// infoLayerOf describes layer i of f: the catalog's numbers, the store's
// (in and fill, if known) and the header as read from the file. It adds
// the layer to out's totals when in is nil.
func infoLayerOf(dir string, f *filterRecord, i int, pf *pendingFilter, in *store.Info, fill *store.FillInfo, out *infoOut, errs *firstError) infoLayer {
	l := f.Layers[i]
	out.ItemsAtCheckpoint += l.Items
	il := infoLayer{Layer: i, File: relPath(dir, l.Path), ExpectedBytes: l.Header.FileSize(), Capacity: l.Header.Capacity,
		ItemsAtCheckpoint: l.Items, ErrorRate: l.Header.ErrorRate, FillRatio: jfloat(math.NaN()), EstimatedFPR: jfloat(math.NaN())}
	if pl := pf.layers[i]; pl != nil {
		il.PendingRecords = pl.records
	}
	if g, err := geometryOf(l.Header); err == nil {
		il.Geometry = g.sizeDesc()
	}
	if in != nil && i < len(in.LayerInfo) {
		li := in.LayerInfo[i]
		il.Items, il.EstimatedFPR = li.Items, jfloat(li.EstimatedFPR)
	}
	if fill != nil && i < len(fill.Layers) {
		il.FillRatio = jfloat(fill.Layers[i].Ratio)
	}
	if in == nil {
		out.TotalCapacity += l.Header.Capacity
		out.SizeBytes += l.Header.FileSize()
	}
	if st, err := os.Stat(l.Path); err == nil {
		il.FileBytes = st.Size()
	}
	h, err := readLayerHeader(l.Path)
	if err != nil {
		il.HeaderError = oneLine(scrubPath(err.Error(), dir))
		if errors.Is(err, mmapbits.ErrCorrupt) {
			errs.keep(relError(err, dir))
		} else if unreadable(err) {
			errs.keep(fmt.Errorf("%s: the catalog lists it but it cannot be read: %w", il.File, relError(err, dir)))
		} else {
			errs.keep(fmt.Errorf("%s: %w: the catalog lists it but it cannot be opened: %s", il.File, store.ErrCorrupt, il.HeaderError))
		}
		return il
	}
	il.header, il.haveHeader = h, true
	il.Header = toHeaderJSON(h)
	for _, d := range headerDiff(h, l.Header) {
		il.HeaderDiff = append(il.HeaderDiff, fmt.Sprintf("%s (offset %d): %s", d.name, d.off, d.value))
	}
	il.HeaderMatches = len(il.HeaderDiff) == 0
	if !il.HeaderMatches {
		errs.keep(fmt.Errorf("%s: %w: header does not match the catalog: %s", il.File, store.ErrCorrupt, il.HeaderDiff[0]))
	}
	return il
}

// printInfo writes info's text: the summary, the layer table, and each
// layer's header fields. haveInfo says the store's numbers are known.
func printInfo(w io.Writer, out *infoOut, haveInfo bool, cat *catalogSnapshot, f *filterRecord, pf *pendingFilter, walErr bool) {
	k := &kv{}
	k.add("filter", "%s", fmtKey(out.Name))
	k.add("kind", "%s", out.Kind)
	k.add("id", "%d", out.ID)
	k.add("state", "%s", out.State)
	if out.Reason != "" {
		k.add("reason", "%s", out.Reason)
	}
	k.add("parameters", "%s", out.Parameters)
	if haveInfo {
		k.add("items", "%d (%d at the checkpoint, %+d from the WAL after it)", out.Items, out.ItemsAtCheckpoint, int64(out.Items)-int64(out.ItemsAtCheckpoint))
	} else {
		k.add("items", "%d at the checkpoint", out.ItemsAtCheckpoint)
	}
	k.add("capacity", "%d (all layers)", out.TotalCapacity)
	k.add("layers", "%d", len(out.Layers))
	k.add("size on disk", "%s (%d bytes)", fmtBytes(out.SizeBytes), out.SizeBytes)
	if haveInfo {
		bpi := "-"
		if out.Items > 0 {
			bpi = fmt.Sprintf("%.2f", float64(out.BitsPerItem))
		}
		k.add("bits/item", "%s", bpi)
		k.add("fill ratio", "%s (%s)", fmtFill(float64(out.FillRatio)), geom{kind: f.Kind}.fillName())
		k.add("estimated FPR", "%s", fmtRate(float64(out.EstimatedFPR)))
	}
	if f.SyncedLSN == cat.CheckpointLSN {
		k.add("checkpoint LSN", "%d", out.CheckpointLSN)
	} else {
		k.add("checkpoint LSN", "%d (the filter's files; the store's is %d)", out.CheckpointLSN, cat.CheckpointLSN)
	}
	switch {
	case pf.records > 0:
		k.add("pending WAL", "%s (%s, %d word writes), LSN %d..%d", plural(pf.records, "record", "records"), opsDesc(pf.byOp), pf.writes, pf.firstLSN, pf.lastLSN)
	case walErr:
		k.add("pending WAL", "unknown: the WAL cannot be read")
	default:
		k.add("pending WAL", "none")
	}
	k.write(w)
	fmt.Fprintln(w)
	printInfoLayers(w, out.Layers, haveInfo)
	for _, l := range out.Layers {
		fmt.Fprintln(w)
		printLayerHeader(w, l)
	}
}

// printInfoLayers writes the table of layers.
func printInfoLayers(w io.Writer, layers []infoLayer, haveInfo bool) {
	t := newTable(">LAYER", "FILE", ">SIZE", ">CAPACITY", ">ITEMS", ">AT CKPT", ">ERROR RATE", "GEOMETRY", ">FILL", ">EST.FPR")
	for _, l := range layers {
		rate := "-"
		if l.ErrorRate > 0 {
			rate = fmtRate(l.ErrorRate)
		}
		items := "-"
		if haveInfo {
			items = fmt.Sprint(l.Items)
		}
		t.add(fmt.Sprint(l.Layer), l.File, fmtBytes(l.FileBytes), fmt.Sprint(l.Capacity), items, fmt.Sprint(l.ItemsAtCheckpoint),
			rate, l.Geometry, fmtFill(float64(l.FillRatio)), fmtRate(float64(l.EstimatedFPR)))
	}
	t.write(w)
}

// printLayerHeader writes one layer file's header fields as read.
func printLayerHeader(w io.Writer, l infoLayer) {
	if !l.haveHeader {
		fmt.Fprintf(w, "header of %s: cannot be read: %s\n", l.File, l.HeaderError)
		return
	}
	verdict := "matches the catalog"
	if !l.HeaderMatches {
		verdict = "DIFFERS from the catalog"
	}
	fmt.Fprintf(w, "header of %s (%d bytes, as read from the file; %s)\n", l.File, l.FileBytes, verdict)
	ht := newTable(">OFFSET", "FIELD", "VALUE")
	ht.indent = "  "
	for _, hf := range headerFields(l.header) {
		ht.add(fmt.Sprint(hf.off), hf.name, hf.value)
	}
	ht.write(w)
	for _, d := range l.HeaderDiff {
		fmt.Fprintf(w, "  differs: %s\n", d)
	}
}
