// Package dirsync makes directory entries durable: the one fsync of a
// directory that every package creating, renaming or removing files
// needs after doing so.
package dirsync

import "os"

// Sync fsyncs the directory dir, making the creations, renames and
// removals of its entries durable.
func Sync(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
