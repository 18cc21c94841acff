//go:build !linux

package store

import "os"

// syncData makes f's data durable: os.File.Sync, where fdatasync(2) is
// not available (on macOS it issues F_FULLFSYNC, which also flushes the
// drive's cache).
func syncData(f *os.File) error { return f.Sync() }
