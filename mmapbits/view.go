package mmapbits

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/exp/mmap"

	"github.com/filterstore/filterstore/internal/regfile"
)

// OpenView implements Mapper: the file is mapped read-only with
// golang.org/x/exp/mmap, which exposes only a ReaderAt, so words are read
// by copy. Changes a live writer makes through its own MAP_SHARED mapping
// are visible, since both share the page cache.
func (OS) OpenView(path string) (View, error) {
	if !hostLittleEndian() {
		return nil, errBigEndian
	}
	f, err := regfile.Open(path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("mmapbits: open: %w", err)
	}
	h, err := readHeader(f, path)
	f.Close()
	if err != nil {
		return nil, err
	}
	ra, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mmapbits: mmap %s: %w", path, err)
	}
	if int64(ra.Len()) != h.FileSize() { // the file changed between the two opens
		ra.Close()
		return nil, fmt.Errorf("%s: %w: mapped %d bytes, header says %d", path, ErrBadSize, ra.Len(), h.FileSize())
	}
	return &fileView{path: path, h: h, ra: ra}, nil
}

// fileView is a read-only mapping of a region file.
type fileView struct {
	path   string
	h      Header
	ra     *mmap.ReaderAt
	closed atomic.Bool
}

func (v *fileView) Header() Header   { return v.h }
func (v *fileView) NumWords() uint64 { return v.h.DataWords() }

func (v *fileView) Word(i uint64) (uint64, bool) {
	if v.closed.Load() || i >= v.h.DataWords() {
		return 0, false
	}
	var b [8]byte
	if _, err := v.ra.ReadAt(b[:], int64(HeaderSize+8*i)); err != nil {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}

// Stamp implements View; a closed view reads 0.
func (v *fileView) Stamp() uint64 {
	if v.closed.Load() {
		return 0
	}
	var b [8]byte
	if _, err := v.ra.ReadAt(b[:], StampOffset); err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

func (v *fileView) Close() error {
	if v.closed.Swap(true) {
		return fmt.Errorf("mmapbits: close %s: %w", v.path, ErrClosed)
	}
	return v.ra.Close()
}
