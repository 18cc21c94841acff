// Package bitmap implements a plain bit array addressed by offset: the exact
// answer when keys are dense integers.
//
// Bit off lives in word off/64 at bit position off%64 (least significant
// bit first); words are little-endian on disk, so bit off is bit off%8 of
// byte off/8 of the data:
//
//	word 0                      word 1
//	+---------------------------+---------------------------+
//	| bit 63 ............ bit 0 | bit 127 ........... bit 64 |
//	+---------------------------+---------------------------+
//
// Bits at offsets >= Bits() in the last word are always zero. This mapping is
// part of the file format and never changes.
//
// Every method is safe for concurrent use and takes no lock: Set and Clear
// are single atomic OR / AND operations whose returned old word tells
// whether the bit changed, so Count stays exact under concurrency.
package bitmap
