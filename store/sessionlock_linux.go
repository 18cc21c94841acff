package store

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/filterstore/filterstore/internal/regfile"
	"golang.org/x/sys/unix"
)

// lockSession takes an open file description lock (fcntl F_OFD_SETLK,
// Linux 3.15 and later) for writing on the whole session marker, open
// for writing in f: a reader tells a running writer from one that died
// with the marker there by whether the lock is held (sessionHeld). The
// lock goes with f's close or the process's death. It is not the flock
// on DIR/LOCK, which a reader could only test by taking it (and so make
// a starting writer fail), and which NFS emulates with the same byte
// range locks: the marker is locked by no one else.
func lockSession(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// sessionHeld reports whether a process holds the session marker's lock
// (F_OFD_GETLK asks without taking it), and known false if it cannot
// tell: no marker, the query failed, or dir is on a network or cluster
// file system (lockNotShared).
func sessionHeld(dir string) (held, known bool) {
	if lockNotShared(dir) {
		return false, false
	}
	f, err := regfile.Open(filepath.Join(dir, sessionFile), os.O_RDONLY)
	if err != nil {
		return false, false
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, false
	}
	return lk.Type != unix.F_UNLCK, true
}

// Statfs types of cluster file systems that x/sys/unix does not name.
const (
	gfs2Magic   = 0x01161970
	lustreMagic = 0x0bd00bd0
	gpfsMagic   = 0x47504653
	beegfsMagic = 0x19830326
	panfsMagic  = 0xaad7aaea
)

// lockNotShared reports whether dir is on a file system where a lock
// another host's writer holds may not show here, or where cached
// attributes may hide its changes to the WAL for a while (NFS, SMB, FUSE,
// 9p, Ceph, AFS, Coda, GFS2, OCFS2, Lustre, GPFS, BeeGFS, PanFS), or
// whose type cannot be read: there a reader cannot tell a dead writer
// from a running one.
func lockNotShared(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return true
	}
	switch uint32(st.Type) {
	case unix.NFS_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC,
		unix.FUSE_SUPER_MAGIC, unix.V9FS_MAGIC, unix.CEPH_SUPER_MAGIC, unix.AFS_SUPER_MAGIC,
		unix.AFS_FS_MAGIC, unix.CODA_SUPER_MAGIC, unix.OCFS2_SUPER_MAGIC, gfs2Magic,
		lustreMagic, gpfsMagic, beegfsMagic, panfsMagic:
		return true
	}
	return false
}
