package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// renameIfAbsent is renameNoReplace in two steps: an Lstat of to, then
// os.Rename.
func renameIfAbsent(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("rename %s %s: %w", from, to, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(from, to); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			// A file, or a non-empty directory, made at to meanwhile.
			return fmt.Errorf("rename %s %s: %w", from, to, fs.ErrExist)
		}
		return err
	}
	return nil
}
