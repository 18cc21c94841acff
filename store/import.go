package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"reflect"

	"github.com/filterstore/filterstore/bitmap"
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// Import creates the filter name from an export stream that a WriteTo
// wrote (its format: the package documentation, "Export stream"), like RedisBloom's BF.LOADCHUNK:
// the same kind, configuration, layers, data and item counts. It reads
// r up to the stream's end marker and no further. A stream an older
// build wrote, whose description is an older catalog value version
// (format.DecodeFilterMeta reads versions 1 to 6), imports alike; the
// filter's own exports carry the current version.
//
// Everything is checked before the filter becomes visible: the magic and
// version, the description (its checksum, and every layer's geometry
// against what its configuration implies), every chunk's length and
// checksum, the end marker (whose checksum, in a version 2 stream, covers
// the whole stream, so chunks out of place are caught too). A stream that fails a check returns an error
// wrapping ErrCorrupt and leaves nothing behind: no catalog entry, no
// file. A name in use returns ErrExists.
//
// Space: each layer file is allocated at its full size, as the stream's
// description declares it, before the layer's data is read (a mapped
// file is never left sparse). A stream from an untrusted source can so
// take as much disk as its description asks, up to what is free (more
// fails with ENOSPC), until its data runs short and Import removes what
// it made; meanwhile the store's own writes may find the disk full.
// Import only streams that a WriteTo made.
//
// Crash safety: Import first records in the catalog that the filter's id
// is taken, then writes its layer files and makes them durable, and only
// then names the filter in the catalog, in one commit. A crash before
// that commit leaves files of an id below the catalog's next id that no
// filter has, which the next Open removes as proven orphans; after it,
// the filter is there whole.
func (s *Store) Import(name string, r io.Reader) error {
	if err := s.nilErr(); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("store: import %q: %w: the reader is nil", name, ErrInvalid)
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("store: import %q: %w", name, ErrReadOnly)
	}
	if s.closed.Load() {
		return fmt.Errorf("store: import %q: %w", name, ErrClosed)
	}
	m, hdr, err := readExportHeader(r)
	if err != nil {
		return fmt.Errorf("store: import %q: %w", name, err)
	}
	var regions []mmapbits.Region
	for skipped := 0; ; skipped++ {
		var id uint64
		if id, err = s.reserveID(name); err != nil {
			return err
		}
		m.ID = id
		err = func() error {
			// The reader is the caller's code: if it panics, the panic
			// reaches the caller with the import's files gone.
			defer func() {
				if p := recover(); p != nil {
					s.discardImport(m, regions)
					panic(p)
				}
			}()
			return s.importLayers(m, hdr, r, &regions)
		}()
		if len(regions) == 0 && errors.Is(err, fs.ErrExist) && skipped < maxSkippedIDs {
			// Something is where the first layer file goes (see
			// skipID); nothing of the stream's data was read yet. The
			// reserved id stays taken: the next one is tried.
			s.opts.Logger.Warn("a file the catalog names no filter for is where an imported filter's file goes: its id is skipped", "file", s.layerPath(id, 0), "filter", name)
			continue
		}
		break
	}
	if err != nil {
		s.discardImport(m, regions)
		return fmt.Errorf("store: import %q: %w", name, err)
	}
	if err := s.commitImport(name, m, regions); err != nil {
		return err
	}
	return nil
}

// reserveID records in the catalog that the next filter id is taken and
// returns it: files of that id are then orphans until a catalog entry
// names them.
func (s *Store) reserveID(name string) (uint64, error) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed.Load() {
		return 0, fmt.Errorf("store: import %q: %w", name, ErrClosed)
	}
	if err := s.failed(); err != nil {
		return 0, err
	}
	// createMu, not mu, through the catalog commit (see create).
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if err := s.failed(); err != nil { // again: see create
		return 0, err
	}
	s.mu.Lock()
	_, exists := s.filters[name]
	id := s.nextID
	s.mu.Unlock()
	if exists {
		return 0, fmt.Errorf("store: import %q: %w", name, ErrExists)
	}
	if err := s.cat.PutFilters(id+1, nil); err != nil {
		if isNoSpace(err) {
			// Whether it reached the disk or not, no file uses the id:
			// the next filter takes it. (Skipping it would leave a gap
			// before the file of a create that fails next, and Open
			// takes zero files past a gap for an older catalog's.)
			return 0, fmt.Errorf("store: import %q: %w", name, err)
		}
		return 0, s.catalogFailed(err)
	}
	s.mu.Lock()
	s.nextID++
	s.mu.Unlock()
	return id, nil
}

// importLayers creates the files of m's layers and fills them from r,
// checking every chunk and the end marker, then makes them durable. It
// appends each region it creates to *regions as it creates it, so that
// the caller has them on an error or a panic of r.
func (s *Store) importLayers(m *format.FilterMeta, hdr []byte, r io.Reader, regions *[]mmapbits.Region) error {
	le := binary.LittleEndian
	var frame [8]byte
	var buf []byte
	off := int64(len(hdr))
	sum := crc.Checksum(hdr) // of the stream so far (version 2's end marker)
	for layer := range m.Layers {
		reg, err := s.opts.mapper.Create(s.layerPath(m.ID, layer), m.Header(layer, s.id))
		if err != nil {
			return err
		}
		*regions = append(*regions, reg)
		n := m.LayerWords(layer)
		words := reg.Words()
		if uint64(len(words)) < n {
			return fmt.Errorf("layer %d has %d words, its geometry %d", layer, len(words), n)
		}
		for at := uint64(0); at < n; at += exportChunkWords {
			c := words[at:min(n, at+exportChunkWords)]
			if err := readFull(r, frame[:], off); err != nil {
				return err
			}
			if got, want := le.Uint32(frame[:]), uint32(8*len(c)); got != want {
				return fmt.Errorf("%w: stream offset %d: chunk of %d bytes, layer %d word %d needs %d",
					ErrCorrupt, off, got, layer, at, want)
			}
			if cap(buf) < 8*len(c) {
				buf = make([]byte, 8*len(c))
			}
			p := buf[:8*len(c)]
			if err := readFull(r, p, off+8); err != nil {
				return err
			}
			if got, want := crc.Checksum(p), le.Uint32(frame[4:]); got != want {
				return fmt.Errorf("%w: stream offset %d: chunk checksum %08x, computed %08x", ErrCorrupt, off, want, got)
			}
			sum = crc.Update(crc.Update(sum, frame[:]), p)
			for i := range c {
				c[i] = le.Uint64(p[8*i:])
			}
			off += 8 + int64(len(p))
		}
		if err := checkImportData(m, layer, words[:n]); err != nil {
			return err
		}
		reg.Touch(0, n)
	}
	if err := readFull(r, frame[:], off); err != nil {
		return err
	}
	if le.Uint32(hdr[8:]) == 1 {
		sum = crc.Checksum(hdr) // version 1: the header's alone
	}
	if le.Uint32(frame[:]) != 0 {
		return fmt.Errorf("%w: stream offset %d: no end marker", ErrCorrupt, off)
	}
	if got := le.Uint32(frame[4:]); got != sum {
		return fmt.Errorf("%w: stream offset %d: the end marker's checksum %08x is not the stream's, %08x: chunks out of place (swapped, repeated, or from another stream)", ErrCorrupt, off, got, sum)
	}
	for _, reg := range *regions {
		if _, err := reg.UpdateSums(false); err != nil {
			return err
		}
		if err := reg.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// checkImportData checks what the item counts say of a layer's words
// where that is cheap: a bitmap's count is its set bits, none beyond its
// size; a cuckoo layer holds at most its slots.
func checkImportData(m *format.FilterMeta, layer int, words []uint64) error {
	l := m.Layers[layer]
	switch m.Kind {
	case mmapbits.KindBitmap:
		var set uint64
		for _, w := range words {
			set += uint64(bits.OnesCount64(w))
		}
		if tail := m.Bits % 64; tail != 0 && words[len(words)-1]>>tail != 0 {
			return fmt.Errorf("%w: bitmap has bits set beyond its %d", ErrCorrupt, m.Bits)
		}
		if set != l.Items {
			return fmt.Errorf("%w: bitmap has %d bits set, its count says %d", ErrCorrupt, set, l.Items)
		}
	case mmapbits.KindCuckoo:
		if slots := l.Size * uint64(m.BucketSize); l.Items > slots {
			return fmt.Errorf("%w: cuckoo layer %d counts %d items in %d slots", ErrCorrupt, layer, l.Items, slots)
		}
	}
	return nil
}

// commitImport names the imported filter in the catalog and opens it.
func (s *Store) commitImport(name string, m *format.FilterMeta, regions []mmapbits.Region) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	fail := func(err error) error {
		s.discardImport(m, regions)
		return err
	}
	if s.closed.Load() {
		return fail(fmt.Errorf("store: import %q: %w", name, ErrClosed))
	}
	if err := s.failed(); err != nil {
		return fail(err)
	}
	// createMu, not mu, through the catalog commit (see create).
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if err := s.failed(); err != nil { // again: see create
		return fail(err)
	}
	s.mu.Lock()
	_, exists := s.filters[name]
	s.mu.Unlock()
	if exists {
		return fail(fmt.Errorf("store: import %q: %w", name, ErrExists))
	}
	// Nothing of the new filter is in the WAL yet.
	m.SyncedLSN = s.checkpointLSN.Load()
	b := newBase(s, name, m)
	b.regions = regions
	h, err := newHandle(b)
	if err != nil {
		return fail(fmt.Errorf("store: import %q: %w: %v", name, ErrCorrupt, err))
	}
	if err := s.cat.PutFilters(0, map[string]*format.FilterMeta{name: m}); err != nil {
		// The commit may have reached the disk: the files stay (the
		// next Open keeps them, or removes them as proven orphans).
		for _, r := range regions {
			r.Close()
		}
		if isNoSpace(err) {
			return fmt.Errorf("store: import %q: %w", name, err)
		}
		return s.catalogFailed(err)
	}
	s.mu.Lock()
	s.addFilter(name, h)
	s.mu.Unlock()
	return nil
}

// discardImport closes and removes the files of an import that failed
// before its catalog commit. A file it cannot remove is an orphan the
// next Open removes.
func (s *Store) discardImport(m *format.FilterMeta, regions []mmapbits.Region) {
	for i, r := range regions {
		r.Close()
		if err := s.opts.mapper.Remove(s.layerPath(m.ID, i)); err != nil {
			s.opts.Logger.Warn("cannot remove the file of a failed import", "file", s.layerPath(m.ID, i), "err", err)
		}
	}
}

// readFull reads len(p) bytes of the stream at offset off; an early end
// is corrupt.
func readFull(r io.Reader, p []byte, off int64) error {
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: stream ends at offset %d or before %d: truncated", ErrCorrupt, off, off+int64(len(p)))
		}
		return err
	}
	return nil
}

// readExportHeader reads and checks the stream header and returns the
// filter's description (id 0) and the header's bytes.
func readExportHeader(r io.Reader) (*format.FilterMeta, []byte, error) {
	hdr := make([]byte, exportHdrLen)
	if err := readFull(r, hdr, 0); err != nil {
		return nil, nil, err
	}
	if string(hdr[:8]) != exportMagic {
		return nil, nil, fmt.Errorf("%w: not an export stream (magic %q)", ErrCorrupt, hdr[:8])
	}
	le := binary.LittleEndian
	if v := le.Uint32(hdr[8:]); v < 1 || v > exportVersion {
		return nil, nil, fmt.Errorf("%w: stream offset 8: version %d, this build reads 1 to %d", ErrCorrupt, v, exportVersion)
	}
	n := le.Uint32(hdr[12:])
	if n == 0 || n > exportMaxMeta {
		return nil, nil, fmt.Errorf("%w: stream offset 12: description of %d bytes, want 1..%d", ErrCorrupt, n, exportMaxMeta)
	}
	hdr = append(hdr, make([]byte, n)...)
	if err := readFull(r, hdr[exportHdrLen:], exportHdrLen); err != nil {
		return nil, nil, err
	}
	m, err := format.DecodeFilterMeta(hdr[exportHdrLen:], 0)
	if err != nil {
		return nil, nil, fmt.Errorf("stream offset %d: %w", exportHdrLen, err)
	}
	if err := checkImportMeta(m); err != nil {
		return nil, nil, fmt.Errorf("stream offset %d: %w", exportHdrLen, err)
	}
	return m, hdr, nil
}

// checkImportMeta checks that m is a description WriteTo writes: id 0,
// state ok, and every layer's geometry the one its configuration implies
// (as Create and growth compute it).
func checkImportMeta(m *format.FilterMeta) error {
	if m.ID != 0 || m.SyncedLSN != 0 || m.State != format.StateOK {
		return fmt.Errorf("%w: description has id %d, synced LSN %d, state %d; an export has 0, 0, 0", ErrCorrupt, m.ID, m.SyncedLSN, m.State)
	}
	for i, l := range m.Layers {
		if l.Stamp != 0 {
			return fmt.Errorf("%w: description's layer %d has checkpoint stamp %d; an export has 0", ErrCorrupt, i, l.Stamp)
		}
	}
	want, err := canonicalMeta(m)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	got := *m
	got.Layers = append([]format.LayerMeta(nil), m.Layers...)
	for i := range got.Layers {
		got.Layers[i].Items = 0
	}
	// A Bloom or counting layer made by a build before the exact sizing
	// formula has the geometry bloom.PlanClassic gives: accepted too,
	// layer by layer (a scalable filter grown since has both kinds).
	classic := classicLayers(want)
	for i, l := range got.Layers {
		if i < len(classic) && l == classic[i] {
			want.Layers[i] = classic[i]
		}
	}
	if !reflect.DeepEqual(&got, want) {
		return fmt.Errorf("%w: description %+v does not match the geometry its configuration implies, %+v", ErrCorrupt, got, *want)
	}
	return nil
}

// classicLayers returns want's Bloom or counting layers as builds before
// the exact sizing formula planned them (bloom.PlanClassic): each layer's
// capacity and error rate, geometry re-planned; nil for other kinds, or
// where a plan fails.
func classicLayers(want *format.FilterMeta) []format.LayerMeta {
	plan := bloom.PlanClassic
	switch want.Kind {
	case mmapbits.KindBloom:
	case mmapbits.KindCounting:
		plan = bloom.PlanCountingClassic
	default:
		return nil
	}
	out := make([]format.LayerMeta, len(want.Layers))
	for i, l := range want.Layers {
		g, err := plan(l.Capacity, l.ErrorRate)
		if err != nil {
			return nil
		}
		out[i] = l
		out[i].Size, out[i].K, out[i].DataPages = g.Blocks, g.K, mmapbits.PagesFor(g.Words())
	}
	return out
}

// canonicalMeta returns the description (item counts 0) a filter of m's
// kind, configuration and number of layers has, with m's layers'
// derivations.
func canonicalMeta(m *format.FilterMeta) (*format.FilterMeta, error) {
	n := len(m.Layers)
	want := &format.FilterMeta{Kind: m.Kind, Layers: make([]format.LayerMeta, n)}
	var err error
	switch m.Kind {
	case mmapbits.KindBloom:
		bc := bloom.Config{Capacity: m.Capacity, ErrorRate: m.ErrorRate, Expansion: uint(m.Expansion), NonScaling: m.NonScaling}
		if m.NonScaling && n != 1 {
			return nil, fmt.Errorf("a non-scaling bloom filter with %d layers", n)
		}
		want.Capacity, want.ErrorRate, want.Expansion, want.NonScaling = m.Capacity, m.ErrorRate, m.Expansion, m.NonScaling
		for i := range want.Layers {
			if want.Layers[i], err = bloomLayer(bc, i); err != nil {
				return nil, err
			}
		}
	case mmapbits.KindCounting:
		if n != 1 {
			return nil, fmt.Errorf("a counting filter with %d layers", n)
		}
		g, err := bloom.PlanCounting(m.Capacity, m.ErrorRate)
		if err != nil {
			return nil, err
		}
		want.Capacity, want.ErrorRate, want.NonScaling = m.Capacity, m.ErrorRate, m.NonScaling
		want.Layers[0] = format.LayerMeta{Capacity: m.Capacity, ErrorRate: m.ErrorRate, Size: g.Blocks, K: g.K, Salt: g.Salt,
			DataPages: mmapbits.PagesFor(g.Words()), Derivation: uint32(g.Derivation)}
	case mmapbits.KindCuckoo:
		cc := cuckoo.Config{Capacity: m.Capacity, BucketSize: int(m.BucketSize), FingerprintBits: int(m.FingerprintBits),
			MaxIterations: storedMaxIterations(m.MaxIterations), Expansion: uint(m.Expansion)}
		if err := cc.Validate(); err != nil {
			return nil, err
		}
		if m.Expansion == 0 && n != 1 {
			return nil, fmt.Errorf("a cuckoo filter of expansion 0 with %d layers", n)
		}
		if m.NonScaling && m.Expansion != 0 {
			return nil, fmt.Errorf("a non-scaling cuckoo filter of expansion %d", m.Expansion)
		}
		want.Capacity, want.Expansion, want.NonScaling = m.Capacity, m.Expansion, m.NonScaling
		want.BucketSize, want.FingerprintBits, want.MaxIterations = m.BucketSize, m.FingerprintBits, m.MaxIterations
		for i := range want.Layers {
			if want.Layers[i], err = cuckooLayer(cc, i); err != nil {
				return nil, err
			}
		}
	case mmapbits.KindBitmap:
		if m.Bits == 0 || m.Bits > bitmap.MaxBits || n != 1 {
			return nil, fmt.Errorf("a bitmap of %d bits with %d layers", m.Bits, n)
		}
		want.Capacity, want.Bits, want.NonScaling = m.Bits, m.Bits, true
		want.Layers[0] = format.LayerMeta{Capacity: m.Bits, Size: m.Bits, DataPages: mmapbits.PagesFor(bitmap.Words(m.Bits))}
	default:
		return nil, fmt.Errorf("unknown kind %v", m.Kind)
	}
	if m.Kind == mmapbits.KindBloom || m.Kind == mmapbits.KindCounting || m.Kind == mmapbits.KindCuckoo {
		// A layer keeps the derivation its words follow: a filter made
		// before DeriveMul (or a stream written then) keeps DeriveMix,
		// which its catalog value's decoding checked is one a layer of
		// its kind can have.
		for i := range want.Layers {
			want.Layers[i].Derivation = m.Layers[i].Derivation
		}
	}
	return want, nil
}
