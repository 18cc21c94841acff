package mmapbits

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Sim is a Mapper whose files live in memory, each with a memory image (the
// page cache: what every mapping shows), a disk image (what reached the
// disk) and a move-sequence word. It is the seam of the store's failure
// tests, and models Linux:
//
//   - A page is dirty when its memory image differs from its disk image,
//     or when a word of it was declared written by Region.Touch since it
//     was last written back.
//   - Sync writes every dirty page of the file to the disk image.
//   - A Sync that fails (SetInjector) writes nothing and, as Linux does
//     after a failed msync or fsync ("fsyncgate"), marks every dirty page
//     of the file clean: the page is lost. It keeps its memory image, so
//     lookups still see it, but neither a later successful Sync nor Crash
//     writes it, until it is written again: Sim sees that as its memory
//     image changing from what it held when it was lost, or as a Touch of
//     any of its words. A write that stores the values a lost page already
//     holds is invisible to Sim; callers that redo writes after a failed
//     Sync must Touch what they rewrote.
//   - With SetStickyLoss, a lost data or checksum page stays lost when it
//     is written again (as ext4 leaves a page of an unwritten extent whose
//     write-back failed: see Evicter), until Evict drops it: its memory
//     image then becomes its disk image. (The header page, written when
//     the file is created, is not in an unwritten extent: its stamp is
//     written by the next Sync that follows a SetStamp.)
//   - Crash is a power loss: every dirty page keeps either image, chosen by
//     the caller's rng, as a kernel that may have written any dirty page
//     back would; a lost page keeps its disk image.
//   - Kill is the death of the process while the OS runs on: nothing is
//     lost, and dirty and lost pages stay so.
//   - An injected Create failure creates nothing (as ENOSPC from Create
//     would); other injected failures change nothing.
//
// Create and Remove are durable at once, as the OS implementation makes
// them. The seq word survives Kill (it is in the page cache) and Crash.
// The checkpoint stamp (Region.SetStamp) is a word of the header page,
// with a page's fate: written by a Sync, lost by a failed one, kept or
// not by a Crash (a rng draw only when it is dirty).
// Writing through the Words of a region from OpenRead is a programmer's
// error that Sim does not catch (the OS faults). Sim is safe for concurrent
// use, and deterministic for a given rng.
type Sim struct {
	mu     sync.Mutex
	files  map[string]*simFile
	inject func(op Op, path string) error
	sticky bool // SetStickyLoss
	// removed holds the removed files that regions still map (as Linux
	// keeps a removed file's mapping): Crash and Kill close those regions
	// too.
	removed []*simFile
}

var _ Evicter = (*Sim)(nil)

// SetStickyLoss makes pages lost by a failed Sync stay lost however they
// are written again, until Evict drops them (see Sim). Off by default.
func (s *Sim) SetStickyLoss(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sticky = on
}

// Evict implements Evicter: the file's dirty pages (a stored stamp too)
// are written back and,
// where no region maps the file, its lost pages take their disk images (a
// lost header page its disk stamp). A file some region maps is synced
// only, and Evict returns an error wrapping ErrBusy. An injected failure
// (OpEvict) is the sync an eviction starts with failing: the file's dirty
// pages are lost, as a failed Sync loses them, and nothing is dropped.
func (s *Sim) Evict(path string) error {
	if err := s.injected(OpEvict, path); err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if f, ok := s.files[path]; ok {
			f.loseDirty()
			if f.stampMem != f.stampDisk {
				f.stampLost = true
			}
		}
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[path]
	if !ok {
		return fmt.Errorf("mmapbits: evict %s: %w", path, fs.ErrNotExist)
	}
	f.writeBack()
	if !f.stampLost {
		f.stampDisk = f.stampMem
	}
	if len(f.regions) > 0 {
		return fmt.Errorf("mmapbits: evict %s: %d regions map it: %w", path, len(f.regions), ErrBusy)
	}
	for pg := range f.lost {
		copyPage(f.page(f.mem, pg), f.page(f.disk, pg))
	}
	clear(f.lost)
	if f.stampLost {
		f.stampMem, f.stampLost = f.stampDisk, false
	}
	return nil
}

// simFile is one simulated file. Every field is guarded by Sim.mu; the
// words of mem are also written by users, atomically, through Words.
type simFile struct {
	h      Header
	sticky *bool    // the Sim's SetStickyLoss
	seq    *uint64  // the move-sequence word; Kill and Crash replace it, same value
	disk   []uint64 // the disk image
	mem    []uint64 // the memory image; Kill and Crash replace it
	// touched marks pages declared written (Touch, or a lost page
	// rewritten) since their last write-back or loss.
	touched []bool
	// lost holds, for each page lost by a failed Sync and not written
	// since, its memory image when it was lost.
	lost    map[int][]uint64
	regions []*simRegion // open regions over mem, closed by Crash and Kill
	// The checkpoint stamp (Region.SetStamp), a word of the header page:
	// its memory and disk images, and whether a failed Sync lost the
	// memory image (it stays unwritten until SetStamp stores again).
	stampMem, stampDisk uint64
	stampLost           bool
}

// Op is a Mapper operation, as SetInjector's function sees it.
type Op int

// The operations of a Mapper.
const (
	OpCreate Op = iota + 1 // Create
	OpOpen                 // Open, OpenRead, OpenView
	OpSync                 // Region.Sync
	OpRemove               // Remove
	OpList                 // List; the path is the directory
	OpEvict                // Evict (Evicter)
)

// String returns the operation's lower-case name.
func (o Op) String() string {
	switch o {
	case OpCreate:
		return "create"
	case OpOpen:
		return "open"
	case OpSync:
		return "sync"
	case OpRemove:
		return "remove"
	case OpList:
		return "list"
	case OpEvict:
		return "evict"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

var _ Mapper = (*Sim)(nil)

// NewSim returns an empty simulated file system.
func NewSim() *Sim { return &Sim{files: make(map[string]*simFile)} }

// SetInjector makes every later operation call fn first (nil removes it); a
// non-nil error makes the operation fail with it (wrapped, errors.Is works)
// instead of running. fn is called without Sim's lock held, so it may call
// Sim's methods, for example Kill, to die at that point; it must be safe for
// concurrent use if the operations are.
func (s *Sim) SetInjector(fn func(op Op, path string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inject = fn
}

// injected runs the injector, if any, for op on path.
func (s *Sim) injected(op Op, path string) error {
	s.mu.Lock()
	fn := s.inject
	s.mu.Unlock()
	if fn == nil {
		return nil
	}
	if err := fn(op, path); err != nil {
		return fmt.Errorf("mmapbits: %v %s: injected failure: %w", op, path, err)
	}
	return nil
}

// Create implements Mapper.
func (s *Sim) Create(path string, h Header) (Region, error) {
	if err := s.injected(OpCreate, path); err != nil {
		return nil, err
	}
	if err := h.Validate(); err != nil {
		return nil, err
	}
	h.Version = FormatVersion
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.files[path]; ok {
		return nil, fmt.Errorf("mmapbits: create %s: %w", path, fs.ErrExist)
	}
	pages := h.DataPages + h.SumPages() // the checksum pages are pages like the others
	n := pages * WordsPerPage
	f := &simFile{h: h, sticky: &s.sticky, seq: new(uint64), disk: make([]uint64, n), mem: make([]uint64, n),
		touched: make([]bool, pages), lost: make(map[int][]uint64)}
	s.files[path] = f
	return s.open(f, path, false), nil
}

// Open implements Mapper.
func (s *Sim) Open(path string) (Region, error) { return s.openPath(path, false) }

// OpenView implements Mapper with a read-only region (see OpenRead).
func (s *Sim) OpenView(path string) (View, error) { return s.openPath(path, true) }

// OpenRead implements Mapper: the region shows the file's live memory image
// and seq word; Sync fails with ErrReadOnly and Touch does nothing.
func (s *Sim) OpenRead(path string) (Region, error) { return s.openPath(path, true) }

func (s *Sim) openPath(path string, readOnly bool) (Region, error) {
	if err := s.injected(OpOpen, path); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[path]
	if !ok {
		return nil, fmt.Errorf("mmapbits: open %s: %w", path, fs.ErrNotExist)
	}
	return s.open(f, path, readOnly), nil
}

// open returns a region over f's current memory image. s.mu is held.
func (s *Sim) open(f *simFile, path string, readOnly bool) *simRegion {
	dw := f.h.DataWords()
	r := &simRegion{sim: s, f: f, path: path, words: f.mem[:dw:dw], seq: f.seq, readOnly: readOnly}
	if f.h.SumPages() > 0 {
		r.sums = newPageSums(r.words, unsafe.Slice((*uint32)(unsafe.Pointer(&f.mem[dw])), (len(f.mem)-int(dw))*2))
	}
	f.regions = append(f.regions, r)
	return r
}

// Remove implements Mapper.
func (s *Sim) Remove(path string) error {
	if err := s.injected(OpRemove, path); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[path]; ok && len(f.regions) > 0 {
		s.removed = append(s.removed, f)
	}
	delete(s.files, path)
	return nil
}

// detachRemoved closes the regions of removed files. s.mu is held.
func (s *Sim) detachRemoved() {
	for _, f := range s.removed {
		f.detach()
	}
	s.removed = nil
}

// List implements Mapper.
func (s *Sim) List(dir string) ([]string, error) {
	if err := s.injected(OpList, dir); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range s.Paths() {
		if filepath.Dir(p) == filepath.Clean(dir) {
			out = append(out, filepath.Base(p))
		}
	}
	return out, nil
}

// Paths returns the names of the files that exist, sorted.
func (s *Sim) Paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedPaths()
}

// sortedPaths returns the paths of s.files in order: map order must not
// leak into rng use. s.mu is held.
func (s *Sim) sortedPaths() []string {
	out := make([]string, 0, len(s.files))
	for p := range s.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// CrashStats reports what one Crash did.
type CrashStats struct {
	DirtyPages int // pages that were dirty (see Sim)
	KeptPages  int // of those, pages whose memory image survived
	LostPages  int // pages lost by a failed Sync: their memory image did not survive
}

// Crash simulates a power loss. Every open region is closed, a removed
// file's too (its Words slice
// keeps the old memory, which no longer reaches any file). For every dirty
// page of every file, rng picks whether the written-back memory image or the
// old disk image survives; a page lost by a failed Sync keeps its disk
// image. Afterwards memory equals disk, and no page is dirty or lost: the
// state a process finds when it reopens the files. The seq words keep their
// values. The caller must stop every writer first; the result is
// deterministic for a given rng.
func (s *Sim) Crash(rng *rand.Rand) CrashStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detachRemoved()
	var st CrashStats
	for _, p := range s.sortedPaths() {
		f := s.files[p]
		f.detach()
		for pg := range f.touched {
			dirty, lost := f.pageState(pg)
			switch {
			case lost:
				st.LostPages++
			case dirty:
				st.DirtyPages++
				if rng.IntN(2) == 0 {
					st.KeptPages++
					copyPage(f.page(f.disk, pg), f.page(f.mem, pg))
				}
			}
		}
		// The header page, dirty only through the stamp: a rng draw only
		// then, so that runs of stores that never stamp draw as before.
		if f.stampMem != f.stampDisk {
			if f.stampLost {
				st.LostPages++
			} else {
				st.DirtyPages++
				if rng.IntN(2) == 0 {
					st.KeptPages++
					f.stampDisk = f.stampMem
				}
			}
		}
		f.stampMem, f.stampLost = f.stampDisk, false
		f.mem = append([]uint64(nil), f.disk...)
		clear(f.touched)
		clear(f.lost)
	}
	return st
}

// Kill simulates the death of the process using s while the OS keeps
// running: every open region is closed and detached (writes through its
// Words no longer reach any file, nor changes of its Seq word); each file
// keeps its memory image as it is now (the page cache), its disk image, its
// seq word's value, and which pages are dirty or were lost by a failed
// Sync. Regions opened afterwards see that memory image. A later Crash may
// still drop the dirty pages.
func (s *Sim) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detachRemoved()
	for _, p := range s.sortedPaths() {
		f := s.files[p]
		f.detach()
		mem := make([]uint64, len(f.mem))
		copyPage(mem, f.mem)
		f.mem = mem
	}
}

// detach closes every open region of f and gives f a new seq word holding
// the old one's value, so that regions opened before no longer reach it.
// s.mu is held.
func (f *simFile) detach() {
	for _, r := range f.regions {
		r.closed.Store(true)
	}
	f.regions = nil
	seq := atomic.LoadUint64(f.seq)
	f.seq = &seq
}

// page returns page pg of an image of f.
func (f *simFile) page(img []uint64, pg int) []uint64 {
	return img[pg*WordsPerPage : (pg+1)*WordsPerPage]
}

// pageState reports whether page pg of f is dirty (a Sync must write it)
// or lost (a failed Sync dropped it and it has not been written since). A
// lost page whose memory image has changed since becomes dirty here. s.mu
// is held.
func (f *simFile) pageState(pg int) (dirty, lost bool) {
	mem := f.page(f.mem, pg)
	if img, ok := f.lost[pg]; ok {
		if *f.sticky || !pageDiffers(mem, img) {
			return false, true
		}
		delete(f.lost, pg)
		f.touched[pg] = true
	}
	return f.touched[pg] || pageDiffers(mem, f.page(f.disk, pg)), false
}

// writeBack copies every dirty page of f to its disk image (a successful
// Sync). s.mu is held.
func (f *simFile) writeBack() {
	for pg := range f.touched {
		if dirty, _ := f.pageState(pg); dirty {
			copyPage(f.page(f.disk, pg), f.page(f.mem, pg))
			f.touched[pg] = false
		}
	}
}

// loseDirty marks every dirty page of f lost without writing it (a failed
// Sync). s.mu is held.
func (f *simFile) loseDirty() {
	for pg := range f.touched {
		if dirty, _ := f.pageState(pg); dirty {
			img := make([]uint64, WordsPerPage)
			copyPage(img, f.page(f.mem, pg))
			f.lost[pg] = img
			f.touched[pg] = false
		}
	}
}

// copyPage copies src, which users may be writing, into dst.
func copyPage(dst, src []uint64) {
	for i := range dst {
		dst[i] = atomic.LoadUint64(&src[i])
	}
}

// pageDiffers reports whether mem, which users may be writing, differs from
// img.
func pageDiffers(mem, img []uint64) bool {
	for i := range mem {
		if atomic.LoadUint64(&mem[i]) != img[i] {
			return true
		}
	}
	return false
}

// simRegion is an open mapping of a simFile.
type simRegion struct {
	sim   *Sim
	f     *simFile
	path  string
	words []uint64 // the memory image at open; Crash and Kill give the file a new one
	seq   *uint64  // the seq word at open; Crash and Kill give the file a new one
	// readOnly marks a region from OpenRead or OpenView.
	readOnly bool
	closed   atomic.Bool
	sums     *pageSums // over the file's checksum pages; nil before version 3
}

func (r *simRegion) Header() Header   { return r.f.h }
func (r *simRegion) NumWords() uint64 { return uint64(len(r.words)) }
func (r *simRegion) Words() []uint64  { return r.words }
func (r *simRegion) Seq() *uint64     { return r.seq }

// Stamp implements View: the file's stamp as the page cache holds it.
func (r *simRegion) Stamp() uint64 {
	r.sim.mu.Lock()
	defer r.sim.mu.Unlock()
	return r.f.stampMem
}

// SetStamp implements Region: the header page is dirty, and no longer
// lost, until the next Sync writes it. A closed or read-only region
// ignores it.
func (r *simRegion) SetStamp(v uint64) {
	if r.readOnly {
		return
	}
	r.sim.mu.Lock()
	defer r.sim.mu.Unlock()
	if !r.closed.Load() {
		r.f.stampMem, r.f.stampLost = v, false
	}
}

func (r *simRegion) Word(i uint64) (uint64, bool) {
	if r.closed.Load() || i >= uint64(len(r.words)) {
		return 0, false
	}
	return atomic.LoadUint64(&r.words[i]), true
}

// Touch marks the pages holding words [from, to) dirty, and no longer lost,
// and their checksums stale. Words past NumWords are ignored; so is a
// closed or read-only region.
func (r *simRegion) Touch(from, to uint64) {
	to = min(to, uint64(len(r.words)))
	if r.readOnly || from >= to {
		return
	}
	r.sums.touch(from, to)
	r.sim.mu.Lock()
	defer r.sim.mu.Unlock()
	if r.closed.Load() {
		return
	}
	for pg := int(from / WordsPerPage); pg <= int((to-1)/WordsPerPage); pg++ {
		if _, lost := r.f.lost[pg]; lost && r.sim.sticky {
			continue
		}
		delete(r.f.lost, pg)
		r.f.touched[pg] = true
	}
}

// Sync writes the file's dirty pages to its disk image; an injected failure
// loses them instead (see Sim).
func (r *simRegion) Sync() error {
	if err := r.sim.injected(OpSync, r.path); err != nil {
		r.sim.mu.Lock()
		defer r.sim.mu.Unlock()
		if !r.closed.Load() && !r.readOnly {
			r.f.loseDirty()
			if r.f.stampMem != r.f.stampDisk {
				r.f.stampLost = true
			}
		}
		return err
	}
	r.sim.mu.Lock()
	defer r.sim.mu.Unlock()
	if r.closed.Load() {
		return fmt.Errorf("mmapbits: sync %s: %w", r.path, ErrClosed)
	}
	if r.readOnly {
		return fmt.Errorf("mmapbits: sync %s: opened read-only: %w", r.path, ErrReadOnly)
	}
	r.f.writeBack()
	if !r.f.stampLost {
		r.f.stampDisk = r.f.stampMem
	}
	return nil
}

// UpdateSums implements Region.
func (r *simRegion) UpdateSums(full bool) (int, error) {
	if r.closed.Load() {
		return 0, fmt.Errorf("mmapbits: checksums of %s: %w", r.path, ErrClosed)
	}
	if r.readOnly {
		return 0, fmt.Errorf("mmapbits: checksums of %s: opened read-only: %w", r.path, ErrReadOnly)
	}
	// A checksum stored again is a write of its page, as a store through
	// a mapping is on Linux even where the value is the one there: Sim
	// would otherwise keep a checksum page a failed Sync lost as lost
	// (see Sim) when an update stores the same checksums into it.
	var pages []int
	n := r.sums.update(full, func(p uint64) {
		pg := int(r.f.h.DataPages + p*4/PageSize)
		if len(pages) == 0 || pages[len(pages)-1] != pg {
			pages = append(pages, pg)
		}
	})
	r.sim.mu.Lock()
	defer r.sim.mu.Unlock()
	if !r.closed.Load() {
		for _, pg := range pages {
			if _, lost := r.f.lost[pg]; lost && r.sim.sticky {
				continue // stays lost (SetStickyLoss), as Touch leaves it
			}
			delete(r.f.lost, pg)
			r.f.touched[pg] = true
		}
	}
	return n, nil
}

// InvalidateSums implements Region.
func (r *simRegion) InvalidateSums() { r.sums.invalidate() }

// CheckPage implements Region.
func (r *simRegion) CheckPage(p uint64) PageCheck {
	if r.closed.Load() {
		return PageCheck{}
	}
	return r.sums.check(p)
}

func (r *simRegion) Close() error {
	r.sim.mu.Lock()
	defer r.sim.mu.Unlock()
	if r.closed.Swap(true) {
		return fmt.Errorf("mmapbits: close %s: %w", r.path, ErrClosed)
	}
	if i := slices.Index(r.f.regions, r); i >= 0 {
		r.f.regions = slices.Delete(r.f.regions, i, i+1)
	}
	return nil
}
