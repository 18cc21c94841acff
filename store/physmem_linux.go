package store

import "golang.org/x/sys/unix"

// physicalMemory returns the machine's memory in bytes (sysinfo(2)), or
// 4 GiB if it cannot be read.
func physicalMemory() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 4 << 30
	}
	return uint64(si.Totalram) * uint64(max(si.Unit, 1))
}
