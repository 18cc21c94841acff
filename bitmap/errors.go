package bitmap

import "github.com/filterstore/filterstore/internal/fserr"

// ErrInvalid reports an offset or range outside the bitmap, a zero size,
// a word slice of the wrong length, or bitmaps of different sizes.
var ErrInvalid = fserr.ErrInvalid
