package mmapbits

import "fmt"

// FieldError is a header or size failure of a filter file at a known byte
// offset: the field at fault. It wraps one of ErrBadMagic, ErrBadVersion,
// ErrBadChecksum or ErrBadSize (and so ErrCorrupt), so a caller reads the
// offset with errors.As instead of parsing the message.
type FieldError struct {
	Err    error  // the sentinel it wraps
	Offset int64  // byte offset in the file of the field at fault
	Reason string // what is wrong with it
}

// Error returns "<Err> at offset <Offset>: <Reason>".
func (e *FieldError) Error() string {
	return fmt.Sprintf("%v at offset %d: %s", e.Err, e.Offset, e.Reason)
}

// Unwrap returns the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldOffset returns the offset of the numeric header field name, shared
// by every version.
func fieldOffset(name string) int64 {
	for _, f := range fieldsV1 {
		if f.name == name {
			return int64(f.off)
		}
	}
	panic("mmapbits: no header field " + name)
}
