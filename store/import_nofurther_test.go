package store

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// TestImportReadsNoFurther checks Import's "It reads r up to the stream's
// end marker and no further": export streams of the four kinds (Bloom
// and cuckoo with more than one layer), concatenated and followed by
// bytes that are no stream, import one after another from one reader,
// which is left holding exactly the trailing bytes. The reader is a
// plain one, and, to fault a reader that reads ahead, one that returns a
// byte per Read (iotest.OneByteReader) and one that returns half of what
// was asked (iotest.HalfReader). Each imported filter equals its source.
func TestImportReadsNoFurther(t *testing.T) {
	src := mustOpen(t, t.TempDir(), nil)
	defer src.Close()
	b, err := src.CreateBloom("b", BloomConfig{Capacity: 300})
	must(t, err)
	c, err := src.CreateCuckoo("c", CuckooConfig{Capacity: 300, Expansion: 2})
	must(t, err)
	n, err := src.CreateCounting("n", BloomConfig{Capacity: 300})
	must(t, err)
	m, err := src.CreateBitmap("m", 5000)
	must(t, err)
	var keys [][]byte
	var bits []uint64
	for i := range 700 {
		keys = append(keys, key(i))
		bits = append(bits, uint64(i*7))
	}
	must(t, second(b.AddMany(keys)))
	must(t, second(c.AddMany(keys)))
	must(t, second(n.AddMany(keys[:300])))
	must(t, second(m.SetMany(bits)))
	if lb, lc := mustInfo(t, b).Layers, mustInfo(t, c).Layers; lb < 2 || lc < 2 {
		t.Fatalf("the Bloom filter has %d layers, the cuckoo %d: want more than one each", lb, lc)
	}

	var all bytes.Buffer
	for _, h := range []io.WriterTo{b, c, n, m} {
		all.Write(exportOf(t, h))
	}
	trailer := []byte("TRAILING-BYTES-NOT-A-STREAM")
	all.Write(trailer)
	for _, tc := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"plain", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := mustOpen(t, t.TempDir(), nil)
			defer dst.Close()
			br := bytes.NewReader(all.Bytes())
			r := tc.wrap(br)
			for _, name := range []string{"b", "c", "n", "m"} {
				if err := dst.Import(name, r); err != nil {
					t.Fatalf("Import of %s from the concatenated streams: %v", name, err)
				}
			}
			if rest, _ := io.ReadAll(br); !bytes.Equal(rest, trailer) {
				t.Fatalf("after four imports the reader holds %d bytes, want the %d trailing ones", len(rest), len(trailer))
			}
			db, err := dst.Bloom("b")
			must(t, err)
			dc, err := dst.Cuckoo("c")
			must(t, err)
			dn, err := dst.Counting("n")
			must(t, err)
			dm, err := dst.Bitmap("m")
			must(t, err)
			sameInfo(t, mustInfo(t, b), mustInfo(t, db))
			sameInfo(t, mustInfo(t, c), mustInfo(t, dc))
			sameInfo(t, mustInfo(t, n), mustInfo(t, dn))
			sameInfo(t, mustInfo(t, m), mustInfo(t, dm))
			for i := range 700 {
				if !db.Has(key(i)) || !dc.Has(key(i)) || (i < 300 && !dn.Has(key(i))) || !dm.Get(uint64(i*7)) {
					t.Fatalf("key %d lost by the import", i)
				}
			}
		})
	}
}
