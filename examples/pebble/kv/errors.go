package kv

import "errors"

// Sentinel errors; test with errors.Is.
var (
	// ErrClosed: the Service was closed.
	ErrClosed = errors.New("kv: closed")
	// ErrInvalid: a bad mode or option; the message names it.
	ErrInvalid = errors.New("kv: invalid argument")
	// ErrModeMismatch: the directory was written in a way the mode cannot
	// follow: its pebble database was written without filters (a filter
	// mode would miss its keys), or it has filters that ModePebbleOnly
	// would leave stale.
	ErrModeMismatch = errors.New("kv: directory written in another mode")
	// ErrCorrupt: a value the Service keeps in pebble for itself (the
	// filter binding) is malformed.
	ErrCorrupt = errors.New("kv: corrupt data")
)
