package blackbox_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// WriteTo / Import round trip for every kind: same kind, config, layers,
// data and item counts; "It reads r up to the stream's end marker and no
// further"; a name in use is ErrExists; a cut stream is ErrCorrupt and leaves
// nothing; WriteTo returns the bytes written.
func TestExportImportRoundTrip(t *testing.T) {
	a, _ := newStore(t, nil)
	bdst, bdir := newStore(t, nil)
	b, _ := a.CreateBloom("b", store.BloomConfig{Capacity: 100, ErrorRate: 0.02})
	c, _ := a.CreateCuckoo("c", store.CuckooConfig{Capacity: 100, BucketSize: 2, FingerprintBits: 12})
	n, _ := a.CreateCounting("n", store.BloomConfig{Capacity: 500, NonScaling: true})
	m, _ := a.CreateBitmap("m", 1000)
	ks := keys("e", 400)
	addToEach(t, ks, b, c, n)
	_, err := m.SetMany([]uint64{0, 999, 500})
	must(t, err)
	type exp interface {
		WriteTo(io.Writer) (int64, error)
		Info() (store.Info, error)
	}
	imported := 0
	for name, f := range map[string]exp{"b": b, "c": c, "n": n, "m": m} {
		var buf bytes.Buffer
		nb, err := f.WriteTo(&buf)
		must(t, err)
		if nb != int64(buf.Len()) {
			t.Errorf("%s: WriteTo returned %d, wrote %d", name, nb, buf.Len())
		}
		stream := buf.Bytes()
		trailer := []byte("TRAILING-BYTES")
		r := bytes.NewReader(append(append([]byte{}, stream...), trailer...))
		must(t, bdst.Import(name, r))
		imported++
		rest, _ := io.ReadAll(r)
		if !bytes.Equal(rest, trailer) {
			t.Errorf("%s: Import read past the end marker: %d bytes left, want %d", name, len(rest), len(trailer))
		}
		src, _ := f.Info()
		dst := infoOf(t, bdst, name)
		src.Name, dst.Name = "", ""
		if src.Kind != dst.Kind || src.Items != dst.Items || src.Layers != dst.Layers || src.Capacity != dst.Capacity ||
			src.ErrorRate != dst.ErrorRate || src.NonScaling != dst.NonScaling || src.Expansion != dst.Expansion {
			t.Errorf("%s: imported Info %+v, source %+v", name, dst, src)
		}
		wantIs(t, name+": Import over existing name", bdst.Import(name, bytes.NewReader(stream)), store.ErrExists)
		// Cut stream.
		for _, cut := range []int{0, 10, len(stream) / 2, len(stream) - 1} {
			err := bdst.Import(name+"-cut", bytes.NewReader(stream[:cut]))
			if !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("%s: Import of a stream cut at %d/%d: %v, want ErrCorrupt", name, cut, len(stream), err)
			}
			if l, _ := bdst.List(); len(l) != imported {
				t.Errorf("%s: cut import left a filter: %d filters", name, len(l))
			}
		}
	}
	// Data came along.
	ib, _ := bdst.Bloom("b")
	ic, _ := bdst.Cuckoo("c")
	in, _ := bdst.Counting("n")
	im, _ := bdst.Bitmap("m")
	for _, k := range ks {
		if !ib.Has(k) || !ic.Has(k) || !in.Has(k) {
			t.Fatalf("imported filters miss %s", k)
		}
	}
	if !im.Get(999) || im.Get(1) || im.Count() != 3 {
		t.Error("imported bitmap wrong")
	}
	// Imported filters work and survive reopen.
	must(t, ic.Add([]byte("after-import")))
	must(t, bdst.Close())
	r := openStore(t, bdir, nil)
	defer r.Close()
	c2, _ := r.Cuckoo("c")
	if !c2.Has([]byte("after-import")) || c2.Items() != 401 {
		t.Errorf("after reopen: items %d", c2.Items())
	}
	// No stray files left by the failed imports: orphan check through Check.
	if _, err := r.Check(); err != nil {
		t.Errorf("Check after imports: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(bdir, "filters"))
	if len(ents) != 4+1 { // b has 2+ layers? count layers instead
		l, _ := r.List()
		layers := 0
		for _, i := range l {
			layers += i.Layers
		}
		if len(ents) != layers {
			t.Errorf("filters/ holds %d files, the filters have %d layers", len(ents), layers)
		}
	}
}

func infoOf(t *testing.T, s *store.Store, name string) store.Info {
	t.Helper()
	l, err := s.List()
	must(t, err)
	for _, i := range l {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no filter %q", name)
	return store.Info{}
}

// "a w that takes fewer bytes than it is given without an error fails
// WriteTo with io.ErrShortWrite".
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) {
	if len(p) > 1 {
		return len(p) - 1, nil
	}
	return len(p), nil
}

func TestWriteToShortWrite(t *testing.T) {
	s, _ := newStore(t, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	_, err := b.WriteTo(shortWriter{})
	wantIs(t, "WriteTo(short writer)", err, io.ErrShortWrite)
}

// Import of garbage: ErrCorrupt; empty reader: ErrCorrupt.
func TestImportGarbage(t *testing.T) {
	s, _ := newStore(t, nil)
	for _, in := range [][]byte{nil, []byte("hello"), bytes.Repeat([]byte{0}, 5000)} {
		err := s.Import("g", bytes.NewReader(in))
		wantIs(t, "Import(garbage)", err, store.ErrCorrupt)
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Errorf("garbage import left %d filters", len(l))
	}
}

// Backup: a copy Open accepts, holding every change acknowledged before;
// ErrExists if dir exists (or dir.tmp); ErrInvalid inside the store; the
// copy holds no BACKUP-INCOMPLETE; SyncInterval changes included.
func TestBackup(t *testing.T) {
	s, dir := newStore(t, &store.Options{Sync: store.SyncInterval})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	n, _ := s.CreateCounting("n", store.BloomConfig{})
	ks := keys("bk", 500)
	_, err := c.AddMany(ks)
	must(t, err)
	_, err = n.AddMany(ks)
	must(t, err)
	_, err = c.DeleteMany(ks[:100])
	must(t, err)
	root := t.TempDir()
	must(t, s.Backup(root+"/copy"))
	wantIs(t, "Backup to existing", s.Backup(root+"/copy"), store.ErrExists)
	must(t, os.Mkdir(root+"/x.tmp", 0o755))
	wantIs(t, "Backup with leftover .tmp", s.Backup(root+"/x"), store.ErrExists)
	wantIs(t, "Backup inside store", s.Backup(dir+"/sub"), store.ErrInvalid)
	wantIs(t, "Backup inside store wal", s.Backup(dir+"/wal/b"), store.ErrInvalid)
	if _, err := os.Stat(root + "/copy/BACKUP-INCOMPLETE"); err == nil {
		t.Error("finished copy holds BACKUP-INCOMPLETE")
	}
	if _, err := os.Stat(root + "/copy.tmp"); err == nil {
		t.Error("copy.tmp left behind")
	}
	// Inside via a symlink.
	must(t, os.Symlink(dir, root+"/link"))
	wantIs(t, "Backup through a symlink into the store", s.Backup(root+"/link/bk"), store.ErrInvalid)

	cp := openStore(t, root+"/copy", nil)
	defer cp.Close()
	if cp.ID() != s.ID() {
		t.Error("copy has another store id (doc: carries the store's identity)")
	}
	c2, _ := cp.Cuckoo("c")
	n2, _ := cp.Counting("n")
	for i, k := range ks {
		if i >= 100 && !c2.Has(k) {
			t.Fatalf("copy misses %s", k)
		}
		if !n2.Has(k) {
			t.Fatalf("copy counting misses %s", k)
		}
	}
	if c2.Items() != 400 {
		t.Errorf("copy cuckoo items %d, want 400", c2.Items())
	}
	if _, err := cp.Check(); err != nil {
		t.Errorf("Check of copy: %v", err)
	}
}

// A leftover dir.tmp renamed by hand is refused by Open with ErrCorrupt.
// Simulate: a directory holding BACKUP-INCOMPLETE beside a real store copy.
func TestOpenRefusesBackupIncomplete(t *testing.T) {
	s, _ := newStore(t, nil)
	_, _ = s.CreateBloom("b", store.BloomConfig{})
	root := t.TempDir()
	must(t, s.Backup(root+"/copy"))
	must(t, os.WriteFile(root+"/copy/BACKUP-INCOMPLETE", nil, 0o644))
	for _, ro := range []bool{false, true} {
		x, err := store.Open(root+"/copy", &store.Options{ReadOnly: ro})
		if err == nil {
			x.Close()
			t.Errorf("Open(ReadOnly=%v) of a dir with BACKUP-INCOMPLETE succeeded", ro)
			continue
		}
		wantIs(t, "Open of incomplete backup", err, store.ErrCorrupt)
	}
}
