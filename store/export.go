package store

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/format"
)

// The export stream's constants; its format is in the package
// documentation (doc.go, "Export stream").
const (
	exportMagic   = "FSEXPORT"
	exportVersion = 2
	exportHdrLen  = 16
	// exportMaxMeta bounds the description's length: a FilterMeta of
	// MaxLayers layers is 4164 bytes (version 6; 3652 in version 5,
	// whose streams an older build bounded at 4096).
	exportMaxMeta = 8192
	// exportChunkWords is the most words a chunk holds (1 MiB).
	exportChunkWords = 1 << 17
)

// WriteTo writes the filter to w as an export stream (see Store.Import),
// like RedisBloom's BF.SCANDUMP, and returns the bytes written.
//
// The stream is one consistent image: WriteTo holds the filter's writer
// mutex (and the commit gate, shared) while it copies, so the words, the
// layers and the item counts are as of the filter's latest logged
// change, every change acknowledged before WriteTo began included; under
// SyncInterval, changes not yet applied to the files are read from the
// overlay as lookups read them. Before it returns it waits until that
// change is fdatasynced, so the stream holds nothing a crash could take
// back: under SyncInterval, whose acknowledgements rest on a write to the
// OS, it forces that fdatasync (one, and none if the background sync has
// done it).
// A Load of this filter running when it is called is waited for (its
// source must not call WriteTo of the filter it loads: see Load).
// Changes to this filter and checkpoints wait while it copies, and so do
// Info, Fill and Check of this filter and List and Check of the store
// (they read its layers and counts under the mutex WriteTo holds): w must
// not call them, nor change the filter, or it waits for itself. Once a
// checkpoint waits, so do the changes to every filter: a slow w delays
// them all; write to a buffer or a local file if w may block. Lookups
// never wait.
//
// So w must not call the store at all, bar lookups and Stats: Checkpoint,
// Backup, Drop, Rename and Close wait for WriteTo (they take the commit
// gate exclusively), and a change to any other filter, a create or an
// Import waits for a checkpoint that started meanwhile (the background
// checkpointer's, at any time), which waits for WriteTo: each hangs for
// ever. Nor may w wait on a goroutine that does: an io.Pipe whose other
// end an Import into the same store reads (to copy a filter without
// buffering it) hangs when a checkpoint starts before the Import has
// read the stream's header (Import records the new filter's id then,
// under the gate). Copy through a buffer or a file instead. On an error the bytes written must be discarded; a w that
// takes fewer bytes than it is given without an error fails WriteTo with
// io.ErrShortWrite. A closed, dropped, broken or incomplete filter, a
// failed store and a read-only store return the error a mutation would.
func (f *Bloom) WriteTo(w io.Writer) (int64, error) { return f.base().writeTo(w) }

// WriteTo writes the filter to w as an export stream; see Bloom.WriteTo.
func (f *Cuckoo) WriteTo(w io.Writer) (int64, error) { return f.base().writeTo(w) }

// WriteTo writes the filter to w as an export stream; see Bloom.WriteTo.
func (f *Counting) WriteTo(w io.Writer) (int64, error) { return f.base().writeTo(w) }

// WriteTo writes the bitmap to w as an export stream; see Bloom.WriteTo.
func (f *Bitmap) WriteTo(w io.Writer) (int64, error) { return f.base().writeTo(w) }

// countWriter counts the bytes written through it, and turns a short
// write that reports no error (which breaks io.Writer's contract) into
// io.ErrShortWrite, as io.Copy does: the stream would otherwise end short
// with WriteTo reporting success.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n < 0 || n > len(p) {
		// Also against io.Writer's contract; io.Copy calls it invalid.
		return 0, fmt.Errorf("the writer returned %d for a write of %d bytes", n, len(p))
	}
	c.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

func (b *filterBase) writeTo(w io.Writer) (int64, error) {
	if w == nil {
		return 0, fmt.Errorf("store: filter %q: export: %w: the writer is nil", b.name(), ErrInvalid)
	}
	if err := b.lock(); err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	// The writer is the caller's code: if it panics, the panic reaches the
	// caller with the filter's mutex and the commit gate released.
	lsn, err := func() (uint64, error) {
		defer b.end()
		defer b.mu.Unlock()
		err := b.exportLocked(cw)
		return b.lastLSN, err
	}()
	if err != nil {
		return cw.n, err
	}
	// The image may hold changes still on their way to the disk.
	if err := b.settleNoop(lsn); err != nil {
		return cw.n, err
	}
	if lsn > b.s.log.DurableLSN() { // SyncInterval: written, not synced
		if err := b.s.log.Sync(); err != nil {
			return cw.n, b.s.fail(err)
		}
	}
	return cw.n, nil
}

// exportLocked writes the stream. Called with b.mu and the gate held.
func (b *filterBase) exportLocked(w io.Writer) error {
	m := b.snapshotMeta(0)
	m.ID, m.State = 0, format.StateOK
	for i := range m.Layers {
		m.Layers[i].Stamp = 0 // of this store's checkpoints, not the stream's
	}
	hdr := appendExportHeader(nil, m)
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("store: export %q: %w", b.name(), err)
	}
	sum := crc.Checksum(hdr) // of the whole stream, for the end marker
	le := binary.LittleEndian
	var buf []byte
	pending := b.ov.vals
	for layer := range m.Layers {
		n := m.LayerWords(layer)
		words := b.regions[layer].Words()
		if uint64(len(words)) < n {
			return fmt.Errorf("store: export %q: layer %d has %d words, its geometry %d", b.name(), layer, len(words), n)
		}
		for off := uint64(0); off < n; off += exportChunkWords {
			c := words[off:min(n, off+exportChunkWords)]
			if need := 8 + 8*len(c); cap(buf) < need {
				buf = make([]byte, need)
			}
			p := buf[:8+8*len(c)]
			err := readMapped(b.path(layer), b.regions[layer].Header(), words, func() {
				for i, v := range c {
					if len(pending) > 0 {
						if pv, ok := pending[wkey{layer, off + uint64(i)}]; ok {
							v = pv.val
						}
					}
					le.PutUint64(p[8+8*i:], v)
				}
			})
			if err != nil {
				return fmt.Errorf("store: export %q: layer %d: %w", b.name(), layer, err)
			}
			le.PutUint32(p, uint32(8*len(c)))
			le.PutUint32(p[4:], crc.Checksum(p[8:]))
			sum = crc.Update(sum, p)
			if _, err := w.Write(p); err != nil {
				return fmt.Errorf("store: export %q: %w", b.name(), err)
			}
		}
	}
	var end [8]byte
	le.PutUint32(end[4:], sum)
	if _, err := w.Write(end[:]); err != nil {
		return fmt.Errorf("store: export %q: %w", b.name(), err)
	}
	return nil
}

// appendExportHeader appends the stream header describing m.
func appendExportHeader(b []byte, m *format.FilterMeta) []byte {
	b = append(b, exportMagic...)
	b = binary.LittleEndian.AppendUint32(b, exportVersion)
	meta := m.Append(nil)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(meta)))
	return append(b, meta...)
}
