package format

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/filterstore/filterstore/internal/fserr"
)

// MaxNameLen is the longest filter name, in bytes.
const MaxNameLen = 200

// CheckName reports, wrapping ErrInvalid, why name cannot name a filter:
// names are 1-200 bytes of valid UTF-8 with no NUL and no '/'.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("store: %w: name is empty", fserr.ErrInvalid)
	case len(name) > MaxNameLen:
		return fmt.Errorf("store: %w: name is %d bytes, the limit is %d", fserr.ErrInvalid, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("store: %w: name %q is not valid UTF-8", fserr.ErrInvalid, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("store: %w: name %q contains NUL", fserr.ErrInvalid, name)
	case strings.IndexByte(name, '/') >= 0:
		return fmt.Errorf("store: %w: name %q contains '/'", fserr.ErrInvalid, name)
	}
	return nil
}
