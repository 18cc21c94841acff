//go:build !linux

package store

// physicalMemory returns 4 GiB where the machine's memory is not read.
func physicalMemory() uint64 { return 4 << 30 }
