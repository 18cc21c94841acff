package catalog

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseLeaked releases what bolt.Open held when it faulted or panicked
// on a damaged catalog and could not clean up: its flock (held until the
// file's last reference goes, and bbolt's mapping is one), its mapping of
// the file, and the descriptor. Only bbolt maps catalog files in this
// process, one open at a time per file (lockCatalog), so the mapping of
// this file is the leaked one. A mapping must name the file's path as well
// as its device and inode: inode numbers are reused, and a mapping of a
// deleted file (listed as "path (deleted)") that once had this number
// belongs to someone else.
func releaseLeaked(f *os.File) {
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	var st unix.Stat_t
	path, err := filepath.Abs(f.Name())
	if err == nil {
		path, err = filepath.EvalSymlinks(path)
	}
	if err == nil && unix.Fstat(int(f.Fd()), &st) == nil {
		unmapFile(path, uint64(st.Dev), st.Ino)
	}
	f.Close()
}

// unmapFile removes from this process every mapping of the file at path
// with inode (dev, ino), as /proc/self/maps lists them.
func unmapFile(path string, dev, ino uint64) {
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	type span struct{ start, end uintptr }
	var spans []span
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset major:minor inode path
		fields := strings.Fields(sc.Text())
		if len(fields) != 6 || fields[5] != path {
			continue // anonymous, another file, a deleted file, or a path with spaces
		}
		if n, err := strconv.ParseUint(fields[4], 10, 64); err != nil || n != ino {
			continue
		}
		var major, minor uint64
		if _, err := fmt.Sscanf(fields[3], "%x:%x", &major, &minor); err != nil || unix.Mkdev(uint32(major), uint32(minor)) != dev {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if ok && err1 == nil && err2 == nil && end > start {
			spans = append(spans, span{uintptr(start), uintptr(end)})
		}
	}
	maps.Close()
	for _, s := range spans {
		unix.Syscall(unix.SYS_MUNMAP, s.start, s.end-s.start, 0)
	}
}
