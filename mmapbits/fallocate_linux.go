package mmapbits

import "golang.org/x/sys/unix"

// fallocate is unix.Fallocate; tests replace it to exercise the fallback.
var fallocate = unix.Fallocate

// freeSpace returns the bytes an unprivileged writer may still allocate
// on the file system of fd, and ok false if it cannot tell. Tests replace
// it.
var freeSpace = func(fd int) (free uint64, ok bool) {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
