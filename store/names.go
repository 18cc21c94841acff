package store

import "github.com/filterstore/filterstore/internal/format"

// MaxNameLen is the longest filter name, in bytes: 200. A filter name is
// 1 to MaxNameLen bytes of valid UTF-8 with no NUL and no '/'; any other
// byte is allowed ("." and "..", spaces and newlines too: names are
// catalog keys, never paths). Every call that takes a name refuses
// another with ErrInvalid, saying why.
const MaxNameLen = format.MaxNameLen

// checkName reports why name cannot name a filter: names are 1-200 bytes
// of valid UTF-8 with no NUL and no '/' (the catalog's rule, in format).
func checkName(name string) error { return format.CheckName(name) }
