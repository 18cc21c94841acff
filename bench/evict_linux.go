package bench

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Evicting a clean file from the page cache
//
// posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) asks the kernel to drop the
// file's cached pages: clean pages that no process maps are removed from the
// page cache at once (dirty ones are written back first, asynchronously, and
// may stay). The next access reads the disk: a major fault through a
// mapping. It works only on pages nobody maps, so it runs after Close has
// unmapped the files.
//
// madvise(MADV_DONTNEED) on a shared file mapping does not evict: it drops
// only this process's page-table entries; the pages stay in the page cache
// and the next access is a minor fault. EvictCheck shows the difference
// on a real file.

// EvictDir drops the page cache of every regular file under dir with
// posix_fadvise(POSIX_FADV_DONTNEED).
func EvictDir(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		return evictFile(path)
	})
}

func evictFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// MajorFaults returns the process's major page faults so far
// (getrusage(RUSAGE_SELF).ru_majflt).
func MajorFaults() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return ru.Majflt
}

// EvictCheck maps path, reads one byte of every page (warm), then counts
// the major faults of reading every page again after MADV_DONTNEED on the
// mapping, and after POSIX_FADV_DONTNEED on the file with the mapping
// gone. It returns the page count and the two fault counts.
func EvictCheck(path string) (pages int, afterMadvise, afterFadvise int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, 0, err
	}
	size := int(st.Size())
	ps := os.Getpagesize()
	pages = size / ps
	touch := func() (int64, error) {
		m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return 0, err
		}
		defer unix.Munmap(m)
		// No readahead: one fault per page read from disk.
		if err := unix.Madvise(m, unix.MADV_RANDOM); err != nil {
			return 0, err
		}
		before := MajorFaults()
		var s byte
		for i := 0; i < size; i += ps {
			s += m[i]
		}
		runtime.KeepAlive(s)
		return MajorFaults() - before, nil
	}
	if _, err := touch(); err != nil { // warm
		return 0, 0, 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := unix.Madvise(m, unix.MADV_RANDOM); err != nil {
		unix.Munmap(m)
		return 0, 0, 0, err
	}
	var s byte
	for i := 0; i < size; i += ps {
		s += m[i]
	}
	if err := unix.Madvise(m, unix.MADV_DONTNEED); err != nil {
		unix.Munmap(m)
		return 0, 0, 0, err
	}
	before := MajorFaults()
	for i := 0; i < size; i += ps {
		s += m[i]
	}
	afterMadvise = MajorFaults() - before
	runtime.KeepAlive(s)
	if err := unix.Munmap(m); err != nil {
		return 0, 0, 0, err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return 0, 0, 0, err
	}
	afterFadvise, err = touch()
	return pages, afterMadvise, afterFadvise, err
}
