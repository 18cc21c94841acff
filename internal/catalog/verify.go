package catalog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	"github.com/filterstore/filterstore/internal/fserr"
)

// This file checks a catalog file's page structure before bbolt reads it.
//
// bbolt reads the file through a memory mapping and follows the page ids,
// element offsets and lengths it finds there without bounds checks. On a
// damaged file that is a read anywhere in the address space: past the
// mapping (a fault), or into the Go heap, where it returns some other
// object's bytes as a key or value (no fault at all; the race detector
// reports it as a data race, and its own instrumentation can crash the
// process on a wild pointer). A recovered fault is therefore no defence;
// verifyCatalog is: it reads the file with ordinary bounds-checked reads
// and rejects it unless every page and element bbolt can reach lies inside
// the file and inside its own page.
//
// The layout checked is bbolt's file format, version 2 (stable since
// boltdb): every page starts with a 16-byte header
//
//	id uint64 | flags uint16 | count uint16 | overflow uint32
//
// and spans (overflow+1) pages. Pages 0 and 1 are meta pages: after the
// header, magic 0xED0CDAED, version 2, page size, flags, the root bucket
// (root page id, sequence), the freelist page id, the page count (the high
// water mark), the txid and an FNV-64a checksum of the fields before it.
// bbolt reads the valid meta with the higher txid. A branch page holds
// count 16-byte elements (pos uint32, ksize uint32, child page id uint64);
// a leaf page holds count 16-byte elements (flags, pos, ksize, vsize, all
// uint32). An element's key starts pos bytes after the element itself and
// a leaf's value follows its key. A leaf element with flag 1 is a bucket:
// its value is the bucket's root page id and sequence, followed, when the
// root is 0 (an inline bucket), by the bucket's one leaf page. A freelist
// page holds count page ids (or, when count is 0xFFFF, the real count as
// the first uint64).

const (
	pageHeaderSize   = 16
	elementSize      = 16 // branch and leaf elements alike
	bucketHeaderSize = 16
	metaSize         = 64

	boltMagic   = 0xED0CDAED
	boltVersion = 2

	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01

	noFreelist = ^uint64(0)

	// maxTreeDepth bounds the nesting of pages and buckets: a healthy
	// catalog's tree is a few levels deep, and a deeper one is a loop the
	// visited set has not caught yet or a crafted file.
	maxTreeDepth = 64
	// maxCatalogSize bounds the file read into memory to be checked. A
	// catalog holds one short entry per filter; a gigabyte of them is not
	// a catalog this package wrote.
	maxCatalogSize = 1 << 30
)

// verifyCatalogPath checks the catalog file at path (see verifyCatalog).
func verifyCatalogPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("store: catalog %s: %w", path, err)
	}
	defer f.Close()
	return verifyCatalog(f, path)
}

// verifyCatalog reads the catalog file f and returns an error wrapping
// fserr.ErrCorrupt unless every page bbolt can reach from the meta page it
// would use, and every key, value, child page id and free page id on them,
// lies inside the file and inside its own page; pages are referenced once,
// free pages are not in use, branch pages are not empty (bbolt reads a
// branch page's first element even when it has none), and keys are not
// empty and sorted as bbolt's Tx.Check requires (bbolt asserts the first
// and finds buckets by the second). It picks the page
// size and the meta page the way bbolt's Open does.
func verifyCatalog(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("store: catalog %s: %w", path, err)
	}
	if st.Size() > maxCatalogSize {
		return fmt.Errorf("store: catalog %s: %w: %d bytes, larger than any catalog (%d)", path, fserr.ErrCorrupt, st.Size(), maxCatalogSize)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && err != io.EOF {
		return fmt.Errorf("store: catalog %s: %w", path, err)
	}
	if err := checkPages(data, os.Getpagesize()); err != nil {
		return fmt.Errorf("store: catalog %s: %w: %v", path, fserr.ErrCorrupt, err)
	}
	return nil
}

// boltMeta is the part of a bbolt meta page the check uses.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// readMeta decodes the meta page whose header starts at off, and reports
// whether it is valid as bbolt's Meta.Validate judges it.
func readMeta(data []byte, off int) (boltMeta, bool) {
	start := off + pageHeaderSize
	if off < 0 || start+metaSize > len(data) {
		return boltMeta{}, false
	}
	b := data[start : start+metaSize]
	h := fnv.New64a()
	h.Write(b[:56])
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != boltMagic || le.Uint32(b[4:]) != boltVersion || le.Uint64(b[56:]) != h.Sum64() {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]),
		pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}, true
}

// pageSizeOf returns the page size bbolt's Open would use for data: the
// first meta page's if it is valid, else the second's, found by trying
// every page size from 1 KiB, else the default.
func pageSizeOf(data []byte, dflt int) (int, error) {
	if len(data) >= 4096 {
		if m, ok := readMeta(data, 0); ok {
			return int(m.pageSize), nil
		}
	}
	for i := 0; i <= 14; i++ {
		pos := 1024 << i
		if pos >= len(data)-1024 {
			break
		}
		if m, ok := readMeta(data, pos); ok {
			return int(m.pageSize), nil
		}
	}
	if len(data) < 1024 {
		return 0, fmt.Errorf("the file is %d bytes, shorter than a meta page", len(data))
	}
	return dflt, nil
}

// checkPages is verifyCatalog's check of the file's bytes.
func checkPages(data []byte, dfltPageSize int) error {
	ps, err := pageSizeOf(data, dfltPageSize)
	if err != nil {
		return err
	}
	if ps < 1024 || ps > 16<<20 || ps&(ps-1) != 0 {
		return fmt.Errorf("page size %d is not a power of two from 1 KiB to 16 MiB", ps)
	}
	if len(data) < 2*ps {
		return fmt.Errorf("the file is %d bytes, shorter than its two meta pages of %d", len(data), ps)
	}
	m0, ok0 := readMeta(data, 0)
	m1, ok1 := readMeta(data, ps)
	var m boltMeta
	switch {
	case ok0 && ok1:
		m = m0
		if m1.txid > m0.txid {
			m = m1
		}
	case ok0:
		m = m0
	case ok1:
		m = m1
	default:
		return fmt.Errorf("neither meta page is valid")
	}
	if int(m.pageSize) != ps {
		return fmt.Errorf("the meta page in use says page size %d, the file's first meta page %d", m.pageSize, ps)
	}
	w := &pageWalker{data: data, ps: uint64(ps), pgid: m.pgid, used: map[uint64]bool{0: true, 1: true}}
	if m.root < 2 {
		return fmt.Errorf("the root bucket's page is %d, a meta page", m.root)
	}
	if err := w.page(m.root, 0, nil, nil); err != nil {
		return err
	}
	if m.freelist != noFreelist {
		return w.freelist(m.freelist)
	}
	return nil
}

// pageWalker walks the pages reachable from one meta page.
type pageWalker struct {
	data []byte
	ps   uint64          // page size
	pgid uint64          // the meta's page count: every page id is below it
	used map[uint64]bool // pages reached so far, overflow pages included
}

// span returns the bytes of page id, overflow pages included, after
// checking that they lie inside the file, below the page count, and were
// not reached before.
func (w *pageWalker) span(id uint64) ([]byte, uint16, uint16, error) {
	if id < 2 || id >= w.pgid {
		return nil, 0, 0, fmt.Errorf("page id %d is outside pages 2 to %d", id, w.pgid-1)
	}
	off := id * w.ps
	if off/w.ps != id || off+pageHeaderSize > uint64(len(w.data)) {
		return nil, 0, 0, fmt.Errorf("page %d starts past the end of the %d-byte file", id, len(w.data))
	}
	le := binary.LittleEndian
	h := w.data[off : off+pageHeaderSize]
	if got := le.Uint64(h); got != id {
		return nil, 0, 0, fmt.Errorf("page %d's header says it is page %d", id, got)
	}
	flags, count, overflow := le.Uint16(h[8:]), le.Uint16(h[10:]), uint64(le.Uint32(h[12:]))
	if id+overflow >= w.pgid {
		return nil, 0, 0, fmt.Errorf("page %d's %d overflow pages run past the page count %d", id, overflow, w.pgid)
	}
	end := (id + overflow + 1) * w.ps
	if end > uint64(len(w.data)) {
		return nil, 0, 0, fmt.Errorf("page %d and its %d overflow pages end at byte %d, past the end of the %d-byte file", id, overflow, end, len(w.data))
	}
	for p := id; p <= id+overflow; p++ {
		if w.used[p] {
			return nil, 0, 0, fmt.Errorf("page %d is reached twice", p)
		}
		w.used[p] = true
	}
	return w.data[off:end], flags, count, nil
}

// page checks the branch or leaf page id and everything below it; its keys
// must lie in [lo, hi).
func (w *pageWalker) page(id uint64, depth int, lo, hi []byte) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("page %d is nested %d deep", id, depth)
	}
	b, flags, count, err := w.span(id)
	if err != nil {
		return err
	}
	switch flags {
	case branchPageFlag:
		if count == 0 {
			return fmt.Errorf("branch page %d has no elements", id)
		}
		children, err := elements(b, count, false, lo, hi)
		if err != nil {
			return fmt.Errorf("branch page %d: %v", id, err)
		}
		for i, c := range children {
			next := hi
			if i+1 < len(children) {
				next = children[i+1].key
			}
			if err := w.page(c.child, depth+1, c.key, next); err != nil {
				return err
			}
		}
		return nil
	case leafPageFlag:
		if err := w.leaf(b, count, depth, lo, hi); err != nil {
			return fmt.Errorf("leaf page %d: %v", id, err)
		}
		return nil
	}
	return fmt.Errorf("page %d has flags %#x where a branch or leaf page belongs", id, flags)
}

// element is one checked element of a page: its value (leaves) or child
// page id (branches).
type element struct {
	flags uint32
	key   []byte
	value []byte
	child uint64
}

// elements checks the count elements of the page (or inline page) b: each
// one's key, and value, lies inside b, and the keys are not empty, rise
// strictly, and lie in [lo, hi) (a nil bound is none), the range the
// parent branch element gives the page.
func elements(b []byte, count uint16, leaf bool, lo, hi []byte) ([]element, error) {
	n := uint64(count)
	if pageHeaderSize+n*elementSize > uint64(len(b)) {
		return nil, fmt.Errorf("%d elements do not fit in its %d bytes", n, len(b))
	}
	le := binary.LittleEndian
	out := make([]element, n)
	for i := uint64(0); i < n; i++ {
		at := pageHeaderSize + i*elementSize
		e := b[at : at+elementSize]
		var pos, ksize, vsize uint64
		if leaf {
			out[i].flags = le.Uint32(e)
			pos, ksize, vsize = uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
		} else {
			pos, ksize, out[i].child = uint64(le.Uint32(e)), uint64(le.Uint32(e[4:])), le.Uint64(e[8:])
		}
		key := at + pos
		if end := key + ksize + vsize; end > uint64(len(b)) {
			return nil, fmt.Errorf("element %d's key and value end at byte %d, past its %d bytes", i, end, len(b))
		}
		k := b[key : key+ksize]
		switch {
		case ksize == 0:
			return nil, fmt.Errorf("element %d's key is empty", i)
		case i == 0 && lo != nil && bytes.Compare(k, lo) < 0:
			return nil, fmt.Errorf("element 0's key %q sorts before its parent's %q", k, lo)
		case i > 0 && bytes.Compare(out[i-1].key, k) >= 0:
			return nil, fmt.Errorf("element %d's key %q does not sort after the one before, %q", i, k, out[i-1].key)
		case hi != nil && bytes.Compare(k, hi) >= 0:
			return nil, fmt.Errorf("element %d's key %q does not sort before %q, where its parent's next element begins", i, k, hi)
		}
		out[i].key, out[i].value = k, b[key+ksize:key+ksize+vsize]
	}
	return out, nil
}

// leaf checks the leaf page (or inline page) b and the buckets on it.
func (w *pageWalker) leaf(b []byte, count uint16, depth int, lo, hi []byte) error {
	elems, err := elements(b, count, true, lo, hi)
	if err != nil {
		return err
	}
	for i, e := range elems {
		if e.flags&bucketLeafFlag == 0 {
			continue
		}
		if err := w.bucket(e.value, depth+1); err != nil {
			return fmt.Errorf("bucket of element %d: %v", i, err)
		}
	}
	return nil
}

// bucket checks a bucket value: its root page's tree, or its inline page.
func (w *pageWalker) bucket(v []byte, depth int) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("buckets nested %d deep", depth)
	}
	if len(v) < bucketHeaderSize {
		return fmt.Errorf("its value is %d bytes, shorter than a bucket header", len(v))
	}
	if root := binary.LittleEndian.Uint64(v); root != 0 {
		return w.page(root, depth, nil, nil)
	}
	inline := v[bucketHeaderSize:]
	if len(inline) < pageHeaderSize {
		return fmt.Errorf("its inline page is %d bytes, shorter than a page header", len(inline))
	}
	le := binary.LittleEndian
	if flags := le.Uint16(inline[8:]); flags != leafPageFlag {
		return fmt.Errorf("its inline page has flags %#x, not a leaf's", flags)
	}
	return w.leaf(inline, le.Uint16(inline[10:]), depth, nil, nil)
}

// freelist checks the freelist page id: its ids lie inside the page, and
// each is a page below the page count that no tree uses, listed once.
func (w *pageWalker) freelist(id uint64) error {
	b, flags, count, err := w.span(id)
	if err != nil {
		return fmt.Errorf("freelist: %v", err)
	}
	if flags != freelistPageFlag {
		return fmt.Errorf("freelist page %d has flags %#x", id, flags)
	}
	le := binary.LittleEndian
	start, n := uint64(pageHeaderSize), uint64(count)
	if count == 0xFFFF {
		if len(b) < pageHeaderSize+8 {
			return fmt.Errorf("freelist page %d is too short for its count", id)
		}
		n = le.Uint64(b[pageHeaderSize:])
		start += 8
	}
	room := (uint64(len(b)) - start) / 8
	if n > room {
		return fmt.Errorf("freelist page %d lists %d ids, room for %d", id, n, room)
	}
	// bbolt's array freelist keeps a listed id once per listing and hands
	// it out as often: a page listed twice is allocated to two nodes of
	// one commit, and a branch written over its own child fails bbolt's
	// assertion (a panic) or, between leaves, loses one of them.
	listed := make(map[uint64]bool, n)
	for i := uint64(0); i < n; i++ {
		free := le.Uint64(b[start+8*i:])
		if free < 2 || free >= w.pgid {
			return fmt.Errorf("freelist page %d lists page %d, outside pages 2 to %d", id, free, w.pgid-1)
		}
		if w.used[free] {
			return fmt.Errorf("freelist page %d lists page %d, which is in use", id, free)
		}
		if listed[free] {
			return fmt.Errorf("freelist page %d lists page %d twice", id, free)
		}
		listed[free] = true
	}
	return nil
}
