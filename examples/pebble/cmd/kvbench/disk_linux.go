package main

import (
	"fmt"

	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"
)

// disk reads the counters of the block device that holds a directory, from
// /proc/diskstats.
type disk struct {
	fs           blockdevice.FS
	major, minor uint32
}

// diskOf returns the device holding dir, or an error if /proc/diskstats
// does not list it (tmpfs, overlayfs and other file systems on no single
// block device).
func diskOf(dir string) (*disk, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, err
	}
	fs, err := blockdevice.NewFS("/proc", "/sys")
	if err != nil {
		return nil, err
	}
	d := &disk{fs: fs, major: unix.Major(st.Dev), minor: unix.Minor(st.Dev)}
	if _, err := d.read(); err != nil {
		return nil, err
	}
	return d, nil
}

// read returns the device's counters now.
func (d *disk) read() (diskCounters, error) {
	all, err := d.fs.ProcDiskstats()
	if err != nil {
		return diskCounters{}, err
	}
	for _, s := range all {
		if s.MajorNumber == d.major && s.MinorNumber == d.minor {
			return diskCounters{
				writes:  s.WriteIOs,
				flushes: s.FlushRequestsCompleted,
				flushMs: s.TimeSpentFlushing,
			}, nil
		}
	}
	return diskCounters{}, fmt.Errorf("device %d:%d is not in /proc/diskstats", d.major, d.minor)
}
