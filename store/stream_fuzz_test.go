package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// FuzzImport: Import of any input either creates the filter or fails
// with ErrCorrupt, leaving no file; it never panics. An input it accepts
// exports again to the same filter: the same description (an older
// catalog value version comes back at the current one) and the same
// chunks; to the same bytes, up to the end marker, where the input's
// description is of the current version.
func FuzzImport(f *testing.F) {
	src, err := Open(f.TempDir(), WithSeams(Options{CheckpointEvery: -1}, mmapbits.NewSim(), wal.NewMemFS()))
	if err != nil {
		f.Fatal(err)
	}
	defer src.Close()
	b, err := src.CreateBloom("b", BloomConfig{Capacity: 10, ErrorRate: 0.1})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := b.AddMany([][]byte{[]byte("a"), []byte("b"), []byte("c")}); err != nil {
		f.Fatal(err)
	}
	bm, err := src.CreateBitmap("m", 200)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := bm.SetMany([]uint64{1, 64, 199}); err != nil {
		f.Fatal(err)
	}
	c, err := src.CreateCuckoo("c", CuckooConfig{Capacity: 8, BucketSize: 2, FingerprintBits: 8})
	if err != nil {
		f.Fatal(err)
	}
	if err := c.Add([]byte("x")); err != nil {
		f.Fatal(err)
	}
	for _, h := range []io.WriterTo{b, bm, c} {
		var buf bytes.Buffer
		if _, err := h.WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
		f.Add(olderDescription(buf.Bytes()))
	}
	f.Add([]byte(exportMagic))

	sim := mmapbits.NewSim()
	dst, err := Open(f.TempDir(), WithSeams(Options{CheckpointEvery: -1}, sim, wal.NewMemFS()))
	if err != nil {
		f.Fatal(err)
	}
	defer dst.Close()
	files := sim.Paths()
	f.Fuzz(func(t *testing.T, in []byte) {
		err := dst.Import("x", bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Import: %v, want ErrCorrupt", err)
			}
			if got := sim.Paths(); !reflect.DeepEqual(got, files) {
				t.Fatalf("a failed import left files: %v", got)
			}
			return
		}
		// Dropped however the checks below end: a file left behind would
		// fail every later input, and the fuzzer would minimize those.
		defer func() {
			if err := dst.Drop("x"); err != nil {
				t.Error(err)
			}
			if got := sim.Paths(); !reflect.DeepEqual(got, files) {
				t.Errorf("Drop of the imported filter left files: %v", got)
			}
		}()
		dst.mu.Lock()
		h := dst.filters["x"].(io.WriterTo)
		dst.mu.Unlock()
		var buf bytes.Buffer
		if _, err := h.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		out := buf.Bytes()
		if in[16] == format.MetaVersion {
			if !bytes.HasPrefix(in, out) {
				t.Fatal("the re-export differs from the accepted input")
			}
			return
		}
		mi, bodyIn := splitStream(t, in)
		mo, bodyOut := splitStream(t, out)
		if !reflect.DeepEqual(mi, mo) {
			t.Fatalf("the re-export's description %+v, the input's (version %d) %+v", mo, in[16], mi)
		}
		if !bytes.HasPrefix(bodyIn, bodyOut[:len(bodyOut)-4]) {
			t.Fatal("the re-export's chunks differ from the accepted input's")
		}
	})
}

// splitStream returns an export stream's description and what follows
// it: the chunks and the end marker.
func splitStream(t *testing.T, stream []byte) (*format.FilterMeta, []byte) {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(stream[12:]))
	m, err := format.DecodeFilterMeta(stream[16:16+n], 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, stream[16+n:]
}
