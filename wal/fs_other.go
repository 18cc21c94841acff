//go:build !linux

package wal

// Sync is os.File.Sync where fdatasync(2) is not available.
func (f *osFile) Sync() error { return f.named(f.File.Sync()) }
