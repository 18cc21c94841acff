package bloom

import "github.com/filterstore/filterstore/internal/fserr"

// Sentinel errors returned by this package, usable with errors.Is. They are
// the shared filterstore sentinels, so errors.Is(err, store.ErrFull) holds
// for an error that came from here.
var (
	// ErrInvalid reports a bad argument or configuration: a capacity of 0,
	// an error rate outside (0, 1), a geometry out of range, a word slice
	// of the wrong length, a filter too large to address. The wrapping
	// message starts with "bloom: " and names the field and accepted range.
	ErrInvalid = fserr.ErrInvalid

	// ErrFull reports an Add to a non-scaling Scalable filter whose only
	// layer has reached its capacity.
	ErrFull = fserr.ErrFull
)
