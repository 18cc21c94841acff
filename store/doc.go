// Package store implements filterstore's persistent filter store: Bloom
// (scalable or fixed), counting Bloom, cuckoo and bitmap filters in
// memory-mapped files, with a write-ahead log and a bbolt catalog, so that
// a filter survives a crash and reopens without being read.
//
// # Directory
//
//	DIR/LOCK                      flock held by the one writer process
//	DIR/catalog.db                bbolt: filters, layers, checkpoint LSN, counts
//	DIR/filters/<id>-<layer>.flt  one mapped file per layer (see mmapbits)
//	DIR/wal/<first-lsn>.log       WAL segments (see wal)
//
// The catalog value format is drawn in meta.go, the WAL payload format in
// record.go, the catalog buckets in catalog.go.
//
// # Durability
//
// A Bloom add is monotonic: its bits are set at once (atomic OR), its key
// hash is logged, and the caller is answered when the record is durable.
// A crash can leave bits whose record was lost only for adds that were never
// acknowledged: extra bits, never missing ones.
//
// Cuckoo slots, counting-Bloom counters and bitmap words are not
// monotonic. Such a change is planned against the filter as it will be once
// every earlier logged change is applied, logged as the after-images of
// the words it changes, and stored in the mapped file only when its record
// is durable (fdatasynced under SyncAlways; under SyncInterval after the
// next background fdatasync, with lookups reading a per-filter overlay
// until then). A page the kernel writes back early therefore never holds a
// change whose record could be lost. Replay stores absolute values, so it
// is idempotent.
//
// A call that changes nothing (the key was present, nothing to delete)
// still waits until the filter's latest logged change is durable: its
// answer may rest on it.
//
// Checkpoint: with the commit gate held exclusively, fdatasync the WAL,
// apply every pending change, msync every changed file, record the WAL
// position and the item counts in the catalog in one transaction, then
// delete WAL segments below it. Open replays only the WAL after the last
// checkpoint. Catalog counts are always as of a checkpoint: recovery adds
// the replayed records to them.
//
// Create and Drop: a new layer's file is created and made durable before
// the catalog names it; a dropped filter leaves the catalog before its
// files are removed. Open removes files the catalog does not name.
//
// # Decisions not fixed by DESIGN.md
//
//   - Lookups on a closed, dropped or incomplete filter answer "maybe
//     present" (true), never "absent": a storage engine then reads its
//     disk, which is always safe. Mutations return ErrClosed or
//     ErrIncomplete.
//   - The scalable Bloom chain gives layer i the error rate
//     ErrorRate/2^(i+1), so the compound rate stays below ErrorRate; a
//     NonScaling filter's single layer gets ErrorRate.
//   - A cuckoo Delete of a key whose fingerprint matches in two or more
//     layers is refused (false, nil): with per-layer buckets, a match in
//     the wrong layer may be another key's only copy. A cuckoo layer that
//     fails an insert while less than half full (one key added many times)
//     does not grow a layer: the add fails with ErrFull.
//   - The writer opens the bbolt catalog only for the length of each
//     catalog transaction (create, drop, new layer, checkpoint), so that
//     read-only openers can take bbolt's shared lock beside it.
//   - ReadOnly stores map filter files copy-on-write (MAP_PRIVATE) rather
//     than through golang.org/x/exp/mmap: lookups need the []uint64 view,
//     and the WAL records after the checkpoint are replayed into the
//     private pages so that answers match the live writer's. Nothing is
//     written to the files. cmd/inspect reads files through x/exp/mmap.
//   - Filter files are mapped with MADV_RANDOM: lookups touch one or two
//     pages at random, and readahead would make the first lookup after a
//     reopen read megabytes.
package store
