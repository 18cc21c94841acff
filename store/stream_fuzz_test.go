package store

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// FuzzImport: Import of any input either creates the filter or fails
// with ErrCorrupt, leaving no file; it never panics. An input it accepts
// exports again to the same bytes (up to the end marker).
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
		dst.mu.Lock()
		h := dst.filters["x"].(io.WriterTo)
		dst.mu.Unlock()
		var buf bytes.Buffer
		if _, err := h.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(in, buf.Bytes()) {
			t.Fatal("the re-export differs from the accepted input")
		}
		if err := dst.Drop("x"); err != nil {
			t.Fatal(err)
		}
	})
}
