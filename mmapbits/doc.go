// Package mmapbits implements page-aligned, file-backed word regions: the
// only package in filterstore that calls mmap.
//
// A region file is one 4096-byte header page followed by DataPages pages of
// filter data and, from format version 3, S = ceil(DataPages/1024) pages
// of data-page checksums. The data is addressed as little-endian uint64
// words; word i lives at byte 4096+8*i. Filters lay their blocks and
// buckets out so that none straddles a page.
//
//	offset 0           4096                         4096*(1+N)       4096*(1+N+S)
//	+------------------+-------------+-----+--------+----------------+
//	| header page      | data page 0 | ... | pg N-1 | checksum pages |
//	+------------------+-------------+-----+--------+----------------+
//
//	checksum pages: one little-endian uint32 per data page, in page order
//	+----------+----------+-----+------------+---------------------+
//	| sum(p 0) | sum(p 1) | ... | sum(p N-1) | zero to the page end |
//	+----------+----------+-----+------------+---------------------+
//	sum(p) = CRC-32C(the 4096 bytes of data page p) XOR CRC-32C(4096 zero bytes)
//
// The mask makes a zeroed page's checksum 0, so a new file's checksum
// pages are right without being written. A checksum is what the page held
// at the writer's last checkpoint (Region.UpdateSums, then Sync): pages
// written since differ until the next one, and a reader must excuse them
// (the store knows which: see store.Check). Versions 1 and 2 have no
// checksum pages.
//
// The header is encoded explicitly little-endian (nothing is laid over the
// mapping); bytes past the encoded header are zero when written and
// reserved. Version 6, the version written:
//
//	off  size  field
//	  0     8  magic "FSFILTR\x00"
//	  8     4  format version (6)
//	 12     4  kind: 1 bloom, 2 counting bloom, 3 cuckoo, 4 bitmap
//	 16     8  data pages
//	 24     8  filter id (catalog key)
//	 32     4  layer index
//	 36     4  k (bloom, counting)
//	 40     8  salt mixed into the hash of this layer
//	 48     8  size: blocks (bloom, counting), buckets (cuckoo), bits (bitmap)
//	 56     4  bucket size (cuckoo)
//	 60     4  fingerprint bits (cuckoo)
//	 64     8  capacity of this layer (items)
//	 72     8  error rate of this layer (IEEE-754 bits)
//	 80     8  store id: random identity of the store that made the file
//	            (never 0 when written by a store)
//	 88     4  derivation (bloom, counting, cuckoo): how blocks and
//	            positions, or buckets and fingerprints, follow from a key's
//	            hash, 0 mix, 1 mul or (cuckoo) 2 local (bloom.Derivation,
//	            cuckoo.Derivation); 0 for other kinds
//	 92     4  CRC-32C (Castagnoli) of bytes 0..91
//	 96  1952  reserved, zero
//	2048    8  move-sequence word: live state, not covered by the CRC, any
//	            value in a file at rest (see Region.Seq)
//	2056    8  checkpoint stamp: live state, not covered by the CRC: the
//	            WAL position (LSN) of the last store checkpoint that synced
//	            the file with changes, or of a later durable change the
//	            store applied to it since, 0 if none has (or a build
//	            before the stamp wrote it); the store's catalog records
//	            each checkpoint's per layer, and a file stamped below the
//	            catalog's record is an older state of the file than the
//	            catalog describes, one stamped past the WAL's end a newer
//	            state than the WAL (see Region.SetStamp)
//	2064 2032  reserved, zero
//
// Versions 4 and 5 are version 6 but for the cuckoo layers: every cuckoo
// layer of a version 4 file is on the mix derivation, and its derivation
// field holds 0 (a version 4 header of a cuckoo layer with another value
// is invalid); a version 5 file's cuckoo layer is on the mix or the mul
// derivation (0 or 1); version 6 records the local derivation that new
// cuckoo layers take (2). Versions 2 and 3 have the same fields at 0..87, no derivation (every
// Bloom and counting layer of theirs is on the mix derivation), and their
// CRC-32C of bytes 0..87 at offset 88 (bytes 92..4095 reserved, but for
// the seq word). Version 1 has the fields at 0..79, no store id either,
// and its CRC-32C of bytes 0..79 at offset 80 (bytes 84..4095 reserved).
// The checkpoint stamp is in every version's header page: a file of any
// version that a checkpoint of this build synced carries one (older
// builds left the word zero, which no catalog of theirs contradicts).
// DecodeHeader reads all six versions (a version 1 header decodes with
// StoreID 0, versions 1 to 3 with Derivation 0); Append writes version 6
// only. HeaderFields lists the fields of each version from the encoder's
// own table. These offsets, the magic and the version numbers are
// part of the file format and must never change.
//
// Read-write regions are mapped MAP_SHARED through golang.org/x/sys/unix and
// expose the data as a []uint64 that filters read with atomic loads and write
// with atomic stores. Create allocates every block of the file (fallocate,
// or zeros where the file system cannot), so that a write through the
// mapping never needs disk space: on a full disk Create fails with ENOSPC
// instead of a later store through the mapping killing the process with
// SIGBUS. OpenRead maps a file PROT_READ and MAP_SHARED: it shows a live
// writer's changes, including its move-sequence word. Views (OpenView) use
// golang.org/x/exp/mmap and expose words through Word, never a slice.
// A read-write or read-only region of 2 MiB or more is mapped at a 2
// MiB-aligned address with MADV_HUGEPAGE, so that the kernel can map its
// page cache folios with 2 MiB entries; OS.SmallPages asks for 4 KiB
// entries instead (MADV_NOHUGEPAGE).
// Regions are never remapped or grown while open: a growing filter adds a
// region.
//
// Close never unmaps a region: it replaces the mapping, at the same
// address, with anonymous PROT_READ zero pages, so that a lookup racing
// Close reads instead of faulting, and such a placeholder stays mapped for
// good, since no one can tell when the last racing reader is done. Its
// address range goes to a process-wide pool, and a later mapping of a
// region file is moved over part of a pooled range (mremap, at a 2
// MiB-aligned address for a huge-page mapping) before any fresh address
// space is taken; the rest of the range stays in the pool as placeholder
// pages. A fresh mapping of a huge page or more takes the address space
// of its size class (whole huge pages, a quarter more at most from 8 MiB
// on: 2 MiB and a page take 4 MiB), the rest placeholder pages in the
// pool, so that a file a little larger than the last still fits its
// range; the rest is a mapping of its own while the region is open (two
// where one was), merged with the region's range once it closes. A
// mapping of less than a huge page goes at the end of the range it
// takes, keeping the range's aligned start whole for a large one. Address space and mappings therefore stay bounded by the
// regions open at once (and the classes a growing file crosses), however
// many are opened and closed. A reader of a closed region reads zeros
// or, once its range is reused, another file's bytes: its callers must
// take what they read after Close as a hint (the store checks the
// filter's closed flag again before it answers from a miss, a count or a
// fill). Mappings are made with unix.MmapPtr, so that x/sys/unix keeps no
// record of them.
//
// The store reaches files only through the Mapper seam. OS is the real
// implementation; Sim keeps a memory image (the page cache) and a "disk
// image" per file, so a test can simulate a power loss in which any subset
// of dirty pages reached the disk, the death of the process while the OS
// runs on, and injected failures with Linux's semantics, in which a failed
// msync or fsync leaves the failed pages clean but unwritten (see
// docs/DESIGN.md §6 and Sim). NewMem gives a region with no file at all.
//
// Data words are stored in the host's byte order, which must be little
// endian: Create and Open refuse to run on a big-endian host rather than
// misread a file.
package mmapbits
