package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest filter name, in bytes.
const MaxNameLen = 200

// checkName reports why name cannot name a filter: names are 1-200 bytes
// of valid UTF-8 with no NUL and no '/'.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("store: %w: name is empty", ErrInvalid)
	case len(name) > MaxNameLen:
		return fmt.Errorf("store: %w: name is %d bytes, the limit is %d", ErrInvalid, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("store: %w: name %q is not valid UTF-8", ErrInvalid, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("store: %w: name %q contains NUL", ErrInvalid, name)
	case strings.IndexByte(name, '/') >= 0:
		return fmt.Errorf("store: %w: name %q contains '/'", ErrInvalid, name)
	}
	return nil
}
