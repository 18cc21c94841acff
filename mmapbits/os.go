package mmapbits

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/filterstore/filterstore/internal/dirsync"
	"github.com/filterstore/filterstore/internal/regfile"
)

// OS is the Mapper over real files: read-write and read-only regions are
// mapped with unix.MmapPtr (MAP_SHARED), reusing the address ranges of
// closed regions (see placeholders), read-only views with
// golang.org/x/exp/mmap.
// Regions of 2 MiB or more are mapped for transparent huge pages (see
// mapShared) unless SmallPages is set.
type OS struct {
	// SmallPages maps every region with the default 4 KiB pages: no
	// alignment and no MADV_HUGEPAGE.
	SmallPages bool
}

var _ Mapper = OS{}

// Create implements Mapper. The file is written through a temporary name and
// renamed into place after its header is synced, so a crash never leaves a
// file at path with a half-written header. Every block is allocated before
// the file is mapped: a sparse file would let a write through the mapping
// on a full disk kill the process with SIGBUS. (A copy-on-write file system
// may still need space to write an allocated block; filterstore does not
// support those for its data.) The temporary name is path+".tmp", made
// afresh over any left there: two Creates of one path at once are not
// supported (they share it, and either may end with the other's file;
// the store never makes one path twice, its filter ids being unique).
func (o OS) Create(path string, h Header) (Region, error) {
	if !hostLittleEndian() {
		return nil, errBigEndian
	}
	if err := h.Validate(); err != nil {
		return nil, err
	}
	h.Version = FormatVersion
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("mmapbits: create %s: %w", path, fs.ErrExist)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("mmapbits: create: %w", err)
	}
	renamed := false
	fail := func(err error) (Region, error) {
		f.Close()
		if renamed {
			os.Remove(path)
			syncDir(filepath.Dir(path)) // best effort: the error below is what matters
		} else {
			os.Remove(tmp)
		}
		return nil, fmt.Errorf("mmapbits: create %s: %w", path, err)
	}
	if _, err := f.WriteAt(h.Append(nil), 0); err != nil {
		return fail(err)
	}
	if err := allocate(f, h.FileSize()); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	renamed = true
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fail(err)
	}
	r, err := o.mapRW(f, path, h)
	if err != nil {
		return fail(err)
	}
	f.Close() // the mapping outlives the descriptor
	return r, nil
}

// allocate extends f to size bytes with every block allocated: fallocate,
// or, where the file system does not support it, zeros written after the
// header page. The error wraps the errno (ENOSPC on a full disk). A size
// beyond the file system's free space fails at once with ENOSPC, before
// it allocates anything: fallocate would take every free block before it
// failed, and until the file is removed every other writer on the file
// system (the store's WAL among them) would find the disk full.
func allocate(f *os.File, size int64) error {
	if free, ok := freeSpace(int(f.Fd())); ok && uint64(size) > free {
		return fmt.Errorf("allocate %d bytes: %d free on its file system: %w", size, free, unix.ENOSPC)
	}
	err := fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("allocate %d bytes: %w", size, err)
	}
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(HeaderSize); off < size; {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("allocate %d bytes by writing zeros: %w", size, err)
		}
		off += n
	}
	return nil
}

// Open implements Mapper.
func (o OS) Open(path string) (Region, error) {
	if !hostLittleEndian() {
		return nil, errBigEndian
	}
	f, err := regfile.Open(path, os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("mmapbits: open: %w", err)
	}
	defer f.Close()
	h, err := readHeader(f, path)
	if err != nil {
		return nil, err
	}
	return o.mapRW(f, path, h)
}

// OpenRead implements Mapper with a PROT_READ, MAP_SHARED mapping of a file
// opened read-only: a read-only store sees the writer's changes, and its
// move-sequence word, as they happen, and cannot write to the file.
func (o OS) OpenRead(path string) (Region, error) {
	if !hostLittleEndian() {
		return nil, errBigEndian
	}
	f, err := regfile.Open(path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("mmapbits: open: %w", err)
	}
	defer f.Close()
	h, err := readHeader(f, path)
	if err != nil {
		return nil, err
	}
	mem, err := mapShared(int(f.Fd()), int(h.FileSize()), unix.PROT_READ, o.SmallPages)
	if err != nil {
		return nil, fmt.Errorf("mmapbits: mmap %s: %w", path, err)
	}
	return newFileRegion(path, h, mem, true), nil
}

// Remove implements Mapper.
func (OS) Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mmapbits: remove: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// List implements Mapper.
func (OS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mmapbits: list: %w", err)
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// readHeader reads and checks the header page of f and the file's size.
func readHeader(f *os.File, path string) (Header, error) {
	st, err := f.Stat()
	if err != nil {
		return Header{}, fmt.Errorf("mmapbits: %s: %w", path, err)
	}
	buf := make([]byte, HeaderSize)
	n, err := f.ReadAt(buf, 0)
	if n < HeaderSize {
		if err == nil {
			err = ErrShortHeader
		}
		return Header{}, fmt.Errorf("mmapbits: %s: %w (file is %d bytes): %v", path, ErrShortHeader, st.Size(), err)
	}
	h, _, err := DecodeHeader(buf)
	if err != nil {
		return Header{}, fmt.Errorf("%s: %w", path, err)
	}
	if st.Size() != h.FileSize() {
		return Header{}, fmt.Errorf("%s: %w", path, &FieldError{ErrBadSize, fieldOffset("DataPages"),
			fmt.Sprintf("file is %d bytes, header says %d data page(s): a %d-byte file with its header and checksum pages", st.Size(), h.DataPages, h.FileSize())})
	}
	return h, nil
}

// syncDir fsyncs a directory (dirsync.Sync).
var syncDir = dirsync.Sync

// fileRegion is a MAP_SHARED mapping of a whole region file.
type fileRegion struct {
	path  string
	h     Header
	mem   []byte   // the whole mapping, header page included
	words []uint64 // data words, aliasing the data pages of mem
	seq   *uint64  // the move-sequence word, aliasing mem[SeqOffset:]
	stamp *uint64  // the checkpoint stamp, aliasing mem[StampOffset:]
	// readOnly marks a PROT_READ mapping (OpenRead).
	readOnly bool
	sums     *pageSums // nil before format version 3

	mu     sync.Mutex // serializes Sync and Close
	closed atomic.Bool
	// wbErr is the first I/O error a write-back request returned
	// (StartWriteback) since the last Sync, which returns it.
	wbErr atomic.Pointer[error]
}

func (o OS) mapRW(f *os.File, path string, h Header) (Region, error) {
	mem, err := mapShared(int(f.Fd()), int(h.FileSize()), unix.PROT_READ|unix.PROT_WRITE, o.SmallPages)
	if err != nil {
		return nil, fmt.Errorf("mmapbits: mmap %s: %w", path, err)
	}
	return newFileRegion(path, h, mem, false), nil
}

func newFileRegion(path string, h Header, mem []byte, readOnly bool) *fileRegion {
	// Lookups touch one page (Bloom) or two (cuckoo) at random: kernel
	// readahead would turn the first fault after a reopen into megabytes
	// of reads. Advice only; a failure changes nothing but speed.
	unix.Madvise(mem, unix.MADV_RANDOM)
	end := HeaderSize + h.DataPages*PageSize
	data := mem[HeaderSize:end]
	// The mapping is page-aligned, so the data is 8-byte aligned.
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&data[0])), len(data)/8)
	// So is the seq word (SeqOffset is a multiple of 8).
	seq := (*uint64)(unsafe.Pointer(&mem[SeqOffset]))
	stamp := (*uint64)(unsafe.Pointer(&mem[StampOffset]))
	return &fileRegion{path: path, h: h, mem: mem, words: words, seq: seq, stamp: stamp, readOnly: readOnly,
		sums: newPageSums(words, sumsOf(mem[end:]))}
}

func (r *fileRegion) Header() Header   { return r.h }
func (r *fileRegion) NumWords() uint64 { return uint64(len(r.words)) }
func (r *fileRegion) Words() []uint64  { return r.words }
func (r *fileRegion) Seq() *uint64     { return r.seq }

// Stamp implements View. After Close the placeholder pages read 0.
func (r *fileRegion) Stamp() uint64 { return atomic.LoadUint64(r.stamp) }

// SetStamp implements Region: a store through the mapping, which dirties
// the header page for the next msync. It holds r.mu, as Close does: a
// Close between a check of closed and the store would leave the store to
// the read-only placeholder pages, a fault.
func (r *fileRegion) SetStamp(v uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.readOnly && !r.closed.Load() {
		atomic.StoreUint64(r.stamp, v)
	}
}

// Touch marks the pages' checksums stale. (A write through a MAP_SHARED
// mapping dirties its page in the kernel, whatever the value written.)
func (r *fileRegion) Touch(from, to uint64) {
	if !r.readOnly {
		r.sums.touch(from, to)
	}
}

// UpdateSums implements Region. It holds r.mu, as SetStamp does, so that
// no Close replaces the mapping while it stores checksums.
func (r *fileRegion) UpdateSums(full bool) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return 0, fmt.Errorf("mmapbits: checksums of %s: %w", r.path, ErrClosed)
	}
	if r.readOnly {
		return 0, fmt.Errorf("mmapbits: checksums of %s: opened read-only: %w", r.path, ErrReadOnly)
	}
	return r.sums.update(full, nil), nil
}

// InvalidateSums implements Region.
func (r *fileRegion) InvalidateSums() { r.sums.invalidate() }

// CheckPage implements Region. A closed region reports no checksum.
func (r *fileRegion) CheckPage(p uint64) PageCheck {
	if r.closed.Load() {
		return PageCheck{}
	}
	return r.sums.check(p)
}

func (r *fileRegion) Word(i uint64) (uint64, bool) {
	if r.closed.Load() || i >= uint64(len(r.words)) {
		return 0, false
	}
	return atomic.LoadUint64(&r.words[i]), true
}

func (r *fileRegion) Sync() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return fmt.Errorf("mmapbits: sync %s: %w", r.path, ErrClosed)
	}
	if r.readOnly {
		return fmt.Errorf("mmapbits: sync %s: opened read-only: %w", r.path, ErrReadOnly)
	}
	if err := unix.Msync(r.mem, unix.MS_SYNC); err != nil {
		return errors.Join(fmt.Errorf("mmapbits: msync %s: %w", r.path, err), r.writebackErr())
	}
	return r.writebackErr()
}

func (r *fileRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Swap(true) {
		return fmt.Errorf("mmapbits: close %s: %w", r.path, ErrClosed)
	}
	// Replace the file mapping with anonymous zero pages at the same
	// address instead of unmapping it: a lookup racing with Close then
	// reads zeros, or the bytes of a file mapped over the range later,
	// instead of faulting. The file and its page cache are released; the
	// address range goes to the pool, for a later mapping to reuse (see
	// placeholders).
	addr, size := uintptr(unsafe.Pointer(&r.mem[0])), pageRound(uintptr(len(r.mem)))
	if err := placehold(addr, size); err != nil {
		return fmt.Errorf("mmapbits: unmap %s: %w", r.path, err)
	}
	placeholders.put(addr, size)
	return nil
}
