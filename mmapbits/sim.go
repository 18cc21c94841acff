package mmapbits

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

// Sim is a Mapper whose files live in memory, each with a memory image (what
// the mapping shows) and a disk image (what survived the last Sync). It is
// the seam of the store's power-loss tests: Crash keeps, for every page whose
// images differ, either one at random, as a kernel that may have written any
// dirty page back would. Create and Remove are durable at once, as the OS
// implementation makes them. Sim is safe for concurrent use.
type Sim struct {
	mu    sync.Mutex
	files map[string]*simFile
}

type simFile struct {
	h       Header
	disk    []uint64
	mem     []uint64
	regions []*simRegion // open regions over mem, closed by Crash
}

var _ Mapper = (*Sim)(nil)

// NewSim returns an empty simulated file system.
func NewSim() *Sim { return &Sim{files: make(map[string]*simFile)} }

// Create implements Mapper.
func (s *Sim) Create(path string, h Header) (Region, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	h.Version = FormatVersion
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.files[path]; ok {
		return nil, fmt.Errorf("mmapbits: create %s: %w", path, fs.ErrExist)
	}
	n := h.DataWords()
	f := &simFile{h: h, disk: make([]uint64, n), mem: make([]uint64, n)}
	s.files[path] = f
	return s.open(f, path), nil
}

// Open implements Mapper.
func (s *Sim) Open(path string) (Region, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[path]
	if !ok {
		return nil, fmt.Errorf("mmapbits: open %s: %w", path, fs.ErrNotExist)
	}
	return s.open(f, path), nil
}

// OpenView implements Mapper.
func (s *Sim) OpenView(path string) (View, error) { return s.Open(path) }

// OpenSnapshot implements Mapper: the region holds a private copy of the
// memory image.
func (s *Sim) OpenSnapshot(path string) (Region, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[path]
	if !ok {
		return nil, fmt.Errorf("mmapbits: open %s: %w", path, fs.ErrNotExist)
	}
	words := make([]uint64, len(f.mem))
	for i := range words {
		words[i] = atomic.LoadUint64(&f.mem[i])
	}
	return &simRegion{sim: s, f: &simFile{h: f.h, mem: words, disk: words}, path: path, words: words, private: true}, nil
}

func (s *Sim) open(f *simFile, path string) *simRegion {
	r := &simRegion{sim: s, f: f, path: path, words: f.mem}
	f.regions = append(f.regions, r)
	return r
}

// Remove implements Mapper.
func (s *Sim) Remove(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, path)
	return nil
}

// List implements Mapper.
func (s *Sim) List(dir string) ([]string, error) {
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
	out := make([]string, 0, len(s.files))
	for p := range s.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// CrashStats reports what one Crash did.
type CrashStats struct {
	DirtyPages int // pages whose memory and disk images differed
	KeptPages  int // of those, pages whose memory image survived
}

// Crash simulates a power loss. Every open region is closed (its Words slice
// keeps the old memory, which no longer reaches any file). For every dirty
// page of every file, rng picks whether the written-back memory image or the
// old disk image survives. Afterwards memory equals disk: the state a
// process finds when it reopens the files. The caller must stop every writer
// first; the result is deterministic for a given rng.
func (s *Sim) Crash(rng *rand.Rand) CrashStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st CrashStats
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
	}
	sort.Strings(paths) // map order must not leak into rng use
	for _, p := range paths {
		f := s.files[p]
		for _, r := range f.regions {
			r.closed.Store(true)
		}
		f.regions = nil
		for pg := 0; pg < len(f.mem); pg += WordsPerPage {
			mem, disk := f.mem[pg:pg+WordsPerPage], f.disk[pg:pg+WordsPerPage]
			if !pageDiffers(mem, disk) {
				continue
			}
			st.DirtyPages++
			if rng.IntN(2) == 0 {
				st.KeptPages++
				for i := range disk {
					disk[i] = atomic.LoadUint64(&mem[i])
				}
			}
		}
		f.mem = append([]uint64(nil), f.disk...)
	}
	return st
}

func pageDiffers(mem, disk []uint64) bool {
	for i := range mem {
		if atomic.LoadUint64(&mem[i]) != disk[i] {
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
	words []uint64 // the memory image at open; Crash gives the file a new one
	// private marks a snapshot, detached from the file.
	private bool
	closed  atomic.Bool
}

func (r *simRegion) Header() Header   { return r.f.h }
func (r *simRegion) NumWords() uint64 { return uint64(len(r.words)) }
func (r *simRegion) Words() []uint64  { return r.words }

func (r *simRegion) Word(i uint64) (uint64, bool) {
	if r.closed.Load() || i >= uint64(len(r.words)) {
		return 0, false
	}
	return atomic.LoadUint64(&r.words[i]), true
}

func (r *simRegion) Sync() error {
	r.sim.mu.Lock()
	defer r.sim.mu.Unlock()
	if r.closed.Load() {
		return fmt.Errorf("mmapbits: sync %s: %w", r.path, ErrClosed)
	}
	if r.private {
		return fmt.Errorf("mmapbits: sync %s: snapshot: %w", r.path, ErrReadOnly)
	}
	for i := range r.words {
		r.f.disk[i] = atomic.LoadUint64(&r.words[i])
	}
	return nil
}

func (r *simRegion) Close() error {
	if r.closed.Swap(true) {
		return fmt.Errorf("mmapbits: close %s: %w", r.path, ErrClosed)
	}
	return nil
}
