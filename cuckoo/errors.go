package cuckoo

import "github.com/filterstore/filterstore/internal/fserr"

var (
	// ErrInvalid reports a bad argument or configuration. The wrapping
	// message, prefixed "cuckoo: ", names the field and the accepted range.
	ErrInvalid = fserr.ErrInvalid
	// ErrFull reports that an insert found no free slot within
	// MaxIterations examined buckets and no expansion layer could be added
	// (Expansion 0, or MaxLayers reached). A failed insert changes nothing.
	ErrFull = fserr.ErrFull
)
