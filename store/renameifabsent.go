package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// renameIfAbsent is renameNoReplace in two steps: an Lstat of to, then
// os.Rename.
func renameIfAbsent(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("rename %s %s: %w", from, to, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(from, to)
}
