// Package kv implements a small key-value service on pebble that keeps two
// filterstore filters in front of Get: a Bloom filter of every key ever
// put ("seen") and a cuckoo filter of the keys pebble holds now ("live").
// A Get for a key either filter says is absent answers "not found"
// without reading pebble.
//
// # Directory
//
//	DIR/pebble/   the pebble database (the keys and values)
//	DIR/filters/  the filterstore store: Bloom "seen", cuckoo "live" ("seen.N", "live.N" after a rebuild)
//
// # The invariant, and the order of the writes
//
// A key pebble holds is never reported absent by a filter, after any
// crash. The two stores are written one after the other, each durable on
// its own (pebble.Sync, filterstore SyncAlways), so a crash can keep the
// first write and lose the second. The order is chosen so that the write
// a crash may keep alone only ever leaves a filter saying "maybe present"
// for a key pebble lacks (a false positive: one wasted pebble read), never
// the reverse:
//
//	Put:    filters (Bloom add, cuckoo add) durable  ->  pebble Set durable
//	Delete: pebble Delete durable                    ->  cuckoo delete
//
// A Put whose pebble write is lost leaves the key in the filters; a
// Delete whose cuckoo delete is lost (a crash, a failed filter write)
// leaves it in the cuckoo filter. Both are leaks, never misses. The
// reverse orders would not be safe: a pebble Set that survives its lost
// filter add is a key the filters call absent, and a cuckoo delete made
// durable before a pebble Delete that is lost is the same.
//
// Lookups need no lock: in ModePerFilter and ModeBatch, at every instant
// a key pebble holds has a cuckoo copy of its own, added before its Set
// and deleted only after its Delete. (ModeExternal adds the copy just
// after the Set: see below.)
//
// # One cuckoo copy per key
//
// A cuckoo Add of a key already there stores a second copy, and Delete
// removes one, so the service keeps exactly one copy per key pebble
// holds: Put adds to the cuckoo filter only if the key is not in pebble
// already (a put of a key pebble holds writes pebble alone: its filter
// entries were made durable before its first Set), and Delete deletes
// from it only if the key was in pebble.
// Both learn that from the cuckoo filter first and read pebble only when
// it says "maybe" (so a Put of a new key reads nothing), with the key's
// mutations serialized by a lock striped over key hashes. Deleting only
// keys that were added is also what keeps a cuckoo delete from removing
// another key's fingerprint. A copy a crash leaks (above) stays as an
// extra copy: a later Put of the key finds it absent from pebble and adds
// another, and the filter answers "maybe" until both are deleted, which
// is safe. A delete the filter refuses with store.ErrAmbiguous (the key
// matches in two layers of a grown filter) is a leak of the same kind,
// counted in Stats.Kept.
//
// # Modes
//
// The Mode given to Open says how a put reaches the disk:
//
//   - ModePebbleOnly: no filters; pebble Set with pebble.Sync. The
//     baseline.
//   - ModePerFilter: Bloom Add and cuckoo Add, each its own durability
//     wait, then the pebble Set: three fsyncs per put (each shared with
//     concurrent puts by group commit).
//   - ModeBatch: one filterstore Batch holding both adds (one WAL record,
//     one wait), then the pebble Set: two fsyncs per put, both shared by
//     the puts of a write group (group.go): the puts that queue while a
//     group commits form the next, whose filter changes go in one Batch
//     and whose keys in one pebble batch, filters first. A delete commits
//     alone (its order is the other one).
//   - ModeExternal: the filter changes, encoded by store.Batch.Encode as an
//     external record, are written in the same pebble batch as the key,
//     under a filter log key (filterlog.go), and applied to the filters
//     with store.Store.ApplyExternal once that batch is durable: one
//     fsync per put, pebble's. The filter store runs under SyncInterval;
//     its own WAL is synced in the background, off the write path.
//
// Service.commit is the one place that orders the writes of each mode.
//
// # ModeExternal: one atomic write, replayed after a crash
//
//	Put:    Encode (seq N)  ->  pebble batch {key=value, filterlog/N=record}, Sync
//	                        ->  ApplyExternal (the filters see the key)
//	Delete: Encode (seq N)  ->  pebble batch {delete key, filterlog/N=record}, Sync
//	                        ->  ApplyExternal (the cuckoo copy goes)
//	Open:   replay filterlog/N for every N above the store's
//	        ExternalDurable, in order; checkpoint; delete filterlog keys
//	        at or below ExternalDurable (also every 4096 records)
//
// A key and its filter change are durable together or not at all, so no
// crash leaks a cuckoo copy in this mode. A crash after the pebble commit
// and before the apply, or a power loss that takes the apply from the
// filter store's unsynced WAL, leaves the filters behind pebble; Open
// replays the records they lack before serving. Meanwhile (between a
// put's commit and its apply) a Get may answer "not found" for a put that
// has not returned: it is ordered before the put. If the filter store
// refuses an apply (it failed), the Service stops trusting the filters
// and every Get reads pebble until it is reopened. If pebble's commit
// itself fails, a put's record is applied all the same (a false positive
// at worst) and a delete's aborted (the copy stays: a false positive).
// The key lock of each change is held from Encode to the apply, so the
// records of one key are numbered in pebble's commit order, as
// external-log mode requires.
//
// # The binding: filters that cannot be the ones pebble's writes went through
//
// pebble holds, under the filter log's key of seq 0, the id of the filter
// store its writes went through, the generation of the two filters in it
// and the seq through which the filter log was trimmed (binding.go).
// Open compares them with the store it opened, before any replay:
// another id (the filters directory emptied or replaced), a missing
// generation (an older copy from before a rebuild), a store older than the
// trim, or a broken or incomplete filter make it rebuild both filters
// from pebble's keys, as a new generation, since no replay can give them
// back what they lack; so do filters still empty after the replay beside
// pebble's keys.
//
// A directory keeps the filters only while every put goes through them:
// Open refuses a filter mode on a directory whose pebble database was
// written without filters, and ModePebbleOnly on one that has filters
// (they would go stale). The filter modes keep the same filters and may
// alternate: ModePerFilter and ModeBatch, opening a directory that
// ModeExternal left with records its filters lack, replay them first.
package kv
