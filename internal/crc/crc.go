// Package crc computes the CRC-32C (Castagnoli) checksum that every
// filterstore format carries: filter file headers (mmapbits), WAL segment
// headers and records (wal), catalog values (internal/format).
//
// The checksum is stored as computed, not masked as pebble's internal/crc
// does: files written before this package existed carry unmasked values,
// and the format must not change.
package crc

import "hash/crc32"

// table is the one Castagnoli table of the module.
var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, table) }

// Update returns the CRC-32C of the bytes summed into c followed by b:
// Update(Checksum(a), b) == Checksum(append(a, b...)), and Update(0, b) ==
// Checksum(b).
func Update(c uint32, b []byte) uint32 { return crc32.Update(c, table, b) }
