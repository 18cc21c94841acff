package main

import (
	"fmt"
	"io"
	"os"

	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
)

// A filter file's header page: its fields for display, their differences
// from the catalog's expectation, and its reserved bytes.

// headerField is one field of the header page, for display and diffs.
type headerField struct {
	off   int
	name  string
	value string
}

// headerLabels names and formats the fields mmapbits.HeaderFields lists;
// their offsets come from that table, the encoder's own.
var headerLabels = map[string]struct {
	name  string
	value func(h mmapbits.Header) string
}{
	"Magic":           {"magic", func(mmapbits.Header) string { return fmt.Sprintf("%q", mmapbits.Magic) }},
	"Version":         {"version", func(h mmapbits.Header) string { return fmt.Sprint(h.Version) }},
	"Kind":            {"kind", func(h mmapbits.Header) string { return fmt.Sprintf("%d (%s)", uint32(h.Kind), h.Kind) }},
	"DataPages":       {"data pages", func(h mmapbits.Header) string { return fmt.Sprint(h.DataPages) }},
	"FilterID":        {"filter id", func(h mmapbits.Header) string { return fmt.Sprint(h.FilterID) }},
	"Layer":           {"layer", func(h mmapbits.Header) string { return fmt.Sprint(h.Layer) }},
	"K":               {"k", func(h mmapbits.Header) string { return fmt.Sprint(h.K) }},
	"Salt":            {"salt", func(h mmapbits.Header) string { return fmt.Sprintf("%#016x", h.Salt) }},
	"Size":            {"size", func(h mmapbits.Header) string { return fmt.Sprint(h.Size) }},
	"BucketSize":      {"bucket size", func(h mmapbits.Header) string { return fmt.Sprint(h.BucketSize) }},
	"FingerprintBits": {"fingerprint bits", func(h mmapbits.Header) string { return fmt.Sprint(h.FingerprintBits) }},
	"Capacity":        {"capacity", func(h mmapbits.Header) string { return fmt.Sprint(h.Capacity) }},
	"ErrorRate":       {"error rate", func(h mmapbits.Header) string { return fmt.Sprint(h.ErrorRate) }},
	"StoreID":         {"store id", func(h mmapbits.Header) string { return fmt.Sprintf("%#016x", h.StoreID) }},
	"Derivation":      {"derivation", func(h mmapbits.Header) string { return fmt.Sprintf("%d (%s)", h.Derivation, derivationName(h)) }},
	"CRC":             {"crc-32c", func(mmapbits.Header) string { return "ok" }}, // h was decoded
}

// headerFields lists the fields of a decoded header at the offsets of its
// format version.
func headerFields(h mmapbits.Header) []headerField {
	var out []headerField
	for _, f := range mmapbits.HeaderFields(h.Version) {
		hf := headerField{off: f.Offset, name: f.Name, value: "?"}
		if l, ok := headerLabels[f.Name]; ok {
			hf.name, hf.value = l.name, l.value(h)
		}
		out = append(out, hf)
	}
	return out
}

// headerDiff lists the fields where a file's header differs from what the
// catalog expects, at the file's offsets. As the store does, it matches a
// file of any version this build reads field by field in that version's
// layout, and a version 1 file (which predates store identities), or any
// file of a store without an identity, without store id. A file before
// version 4 has no derivation field and is on the mix derivation: a
// catalog layer that says otherwise is reported at the version field.
func headerDiff(file, want mmapbits.Header) []headerField {
	want.Version = file.Version
	if file.Version == 1 || want.StoreID == 0 {
		want.StoreID = file.StoreID
	}
	var out []headerField
	got, exp := headerFields(file), headerFields(want)
	derivation := false
	for i := range got {
		derivation = derivation || got[i].name == headerLabels["Derivation"].name
		if i < len(exp) && got[i].value != exp[i].value {
			out = append(out, headerField{got[i].off, got[i].name, fmt.Sprintf("file has %s, catalog expects %s", got[i].value, exp[i].value)})
		}
	}
	if !derivation && file.Derivation != want.Derivation {
		d := headerLabels["Derivation"]
		out = append(out, headerField{int(fieldOffset("Version")), d.name,
			fmt.Sprintf("file (format version %d, no derivation field) has %s, catalog expects %s", file.Version, d.value(file), d.value(want))})
	}
	return out
}

// readHeaderPage reads a filter file's header page (less if the file is
// shorter) with a plain read.
func readHeaderPage(path string) ([]byte, error) {
	f, err := regfile.Open(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, mmapbits.HeaderSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:n], nil
}

// reservedByte reports the first nonzero byte of header page b that no
// field of its format version covers. The move-sequence word at
// mmapbits.SeqOffset and the checkpoint stamp at mmapbits.StampOffset
// are live state, legitimately nonzero, and skipped. A
// header that does not decode is left to the decoder's own report.
func reservedByte(b []byte, rel string) (finding, bool) {
	h, _, err := mmapbits.DecodeHeader(b)
	if err != nil {
		return finding{}, false
	}
	used := make([]bool, len(b))
	for _, f := range mmapbits.HeaderFields(h.Version) {
		for i := f.Offset; i < f.Offset+f.Size; i++ {
			used[i] = true
		}
	}
	for _, off := range []int{mmapbits.SeqOffset, mmapbits.StampOffset} {
		for i := off; i < off+8; i++ {
			used[i] = true
		}
	}
	for i, c := range b {
		if c != 0 && !used[i] {
			return problem(rel, int64(i), "reserved header byte is %#02x, must be zero", c), true
		}
	}
	return finding{}, false
}

// readLayerHeader opens a layer file through a read-only view, which
// checks its header (magic, version, CRC-32C) and its size, and returns
// the header. No data page is read.
func readLayerHeader(path string) (mmapbits.Header, error) {
	v, err := mmapbits.OS{}.OpenView(path)
	if err != nil {
		return mmapbits.Header{}, err
	}
	defer v.Close()
	return v.Header(), nil
}

// fieldOffset returns the byte offset mmapbits gives the header field
// name in the current format version (the numeric fields keep their
// offsets across versions), or -1.
func fieldOffset(name string) int64 {
	for _, f := range mmapbits.HeaderFields(mmapbits.FormatVersion) {
		if f.Name == name {
			return int64(f.Offset)
		}
	}
	return -1
}
