// Package store implements filterstore's persistent filter store: Bloom
// (scalable or fixed), counting Bloom, cuckoo and bitmap filters in
// memory-mapped files, with a write-ahead log and a bbolt catalog, so that
// a filter survives a crash and reopens without being read.
//
// # Directory
//
//	DIR/LOCK                      flock held by the one writer process (which flocks DIR too)
//	DIR/catalog.db                bbolt: store id, filters, layers, checkpoints, counts
//	DIR/filters/<id>-<layer>.flt  one mapped file per layer (see mmapbits)
//	DIR/wal/<first-lsn>.log       WAL segments (see wal)
//	DIR/SESSION                   there while a writer has the store open (or died), locked while it runs: "wal <first LSN of its newest segment> <session id> <crc>"
//	DIR/RESYNC                    a failed msync: the next Open rebuilds the pages
//	DIR/BACKUP-INCOMPLETE         only in a Backup's copy being made: Open refuses the directory
//
// The catalog buckets and values and the WAL payloads are drawn in
// internal/format, which holds their codecs; the export stream of one
// filter (WriteTo, Store.Import) is drawn below ("Export stream"). A random store id, never
// 0, is recorded in the catalog, in every filter file header and in every
// WAL segment header: Open refuses a WAL of another store, treats a layer
// file of another store as damaged, and deletes a file the catalog does
// not name only if its header proves it is this store's orphan. A store
// from before ids (a format 1 catalog) gets one at its first writer Open,
// committed once that Open's checks have passed and before it removes
// orphans or replays; the WAL segments of that whole session carry 0, as
// the older ones do, so a failed commit leaves no file naming an id the
// next Open would not draw again.
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
// External-log mode lets a batch ride in the commit of an engine with a
// log of its own, with no filterstore fsync on the write path:
// Batch.Encode turns it into bytes the engine writes into its record,
// Store.ApplyExternal applies them once that record is durable (in the
// order Encode handed out sequence numbers), and after a restart
// Store.ExternalDurable says from which sequence number the engine
// replays its records into the store. The section "External-log mode"
// below draws the protocol and argues why nothing the engine
// acknowledged is lost or applied twice.
//
// A Batch (Store.NewBatch) commits ops on several filters, of any kinds,
// as one WAL record (a batch record holding each op's hash or
// after-images) and one durability wait. It locks its filters in the
// order of their ids, holding the commit gate shared, plans every op
// against the filters as the batch's earlier ops leave them, and fails
// whole, before anything is logged or a bit set, if one op cannot apply.
// Then it sets its Bloom bits, appends the record and stages the other
// after-images, which reach the mapped files only once the record is
// durable, as a single change's do. The WAL's CRC covers the record
// whole: a torn batch record is truncated with the tail and never
// replayed, so after any crash a batch is there whole or not at all
// (less its Bloom bits, which may stay as an unacknowledged add's may).
// Recovery and read-only opens take a batch record's parts one by one,
// each as the single record it encodes.
//
// A call that changes nothing (the key was present, nothing to delete)
// still waits until the filter's latest logged change is durable: its
// answer may rest on it. No answer is acknowledged once the store has
// failed (below): the state it rests on may be in memory only.
//
// Checkpoint: with the commit gate held exclusively, fdatasync the WAL,
// apply every pending change, msync every changed file, record in the
// catalog, in one transaction, the WAL position and each filter's item
// counts and synced LSN (the checkpoint its files reflect), then delete the
// WAL segments no filter needs. Open replays, filter by filter, only the
// WAL after the filter's synced LSN. Catalog counts are always as of the
// filter's checkpoint: recovery adds the replayed records to them.
//
// Open checks everything it reads before it changes any file it found:
// the catalog, every filter file header, the files the catalog does not
// name, every WAL segment and every WAL record (it must decode and fit its
// filter's geometry). Only then does it remove proven orphans, truncate a
// torn WAL tail, sync the directories, write the WAL records it will
// replay again (a copy of each segment holding one, synced and renamed
// over it: a writer whose fdatasync of them failed leaves bytes that read
// back from the page cache but never reach the disk, and replaying them
// into files that are then synced would leave, after a power loss,
// changes no record explains: half a batch, or a cuckoo fingerprint moved
// out of one bucket and not into the other; nothing to copy after a clean
// Close), replay, and msync every filter file
// (cheap when nothing is dirty): a writer killed between setting bits and
// logging them leaves them dirty in the page cache, and nothing may be
// answered from them before they are on disk. Replay writes every word a
// record covers even where the value is already there, so that a page an
// earlier failed sync left clean but unwritten is written again. If an
// msync of a filter file fails (at Open or at a checkpoint), the store
// writes DIR/RESYNC first, since Linux reports a failed writeback once and
// a later msync "succeeds" without writing the lost pages. Nor does writing
// such a page again make it durable for sure: on ext4 a page of a
// preallocated extent whose write-back failed reads zeros once it leaves
// the cache, though it was written again and synced without an error. So
// the next Open first syncs each filter file and drops its pages from the
// cache, before it maps them (Linux: posix_fadvise; other systems keep
// the pages): they then read what the disk holds, and the replay of the
// WAL from the catalog's checkpoint, which a failed checkpoint never
// advances, puts back every logged change. If another process maps the
// files (a read-only store, an inspect command), their pages stay: that
// Open fails with ErrBusy, DIR/RESYNC staying, until they are closed; a
// sync or drop that fails fails that Open with its error, DIR/RESYNC
// staying. A filter whose file is missing or damaged opens broken, and
// DIR/RESYNC stays, listing only such a filter's files, so that the Open
// that finds its own file again drops its pages first; the Opens until
// then drop and rewrite only the listed files (see resync.go). A
// catalog commit that fails the store writes DIR/RESYNC too,
// and the Open that finds it drops the catalog's pages the same way before
// it opens the catalog, so that it reads the last commit that reached the
// disk.
// Where DIR/RESYNC cannot be created (a new file: a failing disk may not
// write its first block), the session marker records the failed msync in
// place, and the next Open makes DIR/RESYNC from it first. The Open then
// rewrites every data page and syncs before it trusts them.
//
// Create, Drop and Rename: a new layer's file is created with every block
// allocated and made durable before the catalog names it; a dropped filter
// leaves the catalog before its files are removed. Rename moves a
// filter's catalog entry to its new name in one transaction, deleting the
// entry of a filter it replaces (whose files then go as a dropped
// filter's); files are named by filter id, so none moves. Every Open syncs the
// store directory and its parent, so a directory an earlier Open created
// and died before syncing is made durable too.
//
// Backup (Store.Backup) copies a live store to a new directory as of one
// WAL position E, holding the checkpoint mutex throughout so that no
// checkpoint records (and no WAL segment goes) meanwhile: it checkpoints
// (LSN C), copies every layer file without the gate while writers go on,
// then with the gate held exclusively syncs the WAL and notes its
// segments and their sizes (the end E), copies the catalog in one bbolt
// read transaction and any layer created meanwhile, and then copies each
// noted segment up to its noted size. A non-Bloom word reaches a mapped
// file only after its record is in the WAL, so every word copied holds its
// value at C or the after-image of a record in (C, E]; the copy's recovery
// replays (C, E] and every word ends at its value at E (Bloom bits of
// later adds may stay: extra bits, as after a crash). The copy is built
// in DIR.tmp with a SESSION marker (its checksums are unknown, as a dead
// writer's), synced, and renamed into place.
//
// # External-log mode
//
// A filter change that rides in the commit of an
// engine that has a durable log of its own (pebble's WAL, a Raft log),
// with no filterstore fsync on the write path.
//
//	engine goroutine                          store
//	----------------                          -----
//	b := s.NewBatch(); b.BloomAdd(...)
//	rec, _ := b.Encode()                  --> seq N handed out (dense, rising)
//	engine batch: data + rec (e.g. under
//	  a key "filterlog/<N>")
//	engine commit, durable                    (nothing changes before this)
//	s.ApplyExternal(rec)                  --> waits for every seq < N encoded
//	                                          here to be applied or aborted;
//	                                          plans the ops, logs one external
//	                                          record (seq N) in its own WAL
//	                                          without waiting, stages the
//	                                          after-images
//	(engine commit failed: s.AbortExternal(rec))
//
//	background: WAL fdatasync (Options.SyncEvery), then the after-images of
//	non-monotonic changes reach the mapped pages; checkpoints record the
//	highest seq they cover (catalog "external").
//
//	restart: s.ExternalDurable() = D; the engine calls ApplyExternal for its
//	records with seq > D, in seq order, before encoding new batches; then
//	deletes its records with seq <= s.ExternalDurable() when it likes.
//
// Why this loses nothing the engine acknowledged, and applies nothing twice:
//
//   - The store's state after recovery is exactly that of every external
//     batch through some seq D and of none after it (plus, for Bloom
//     filters, possibly bits of later ones: Bloom adds are idempotent). Its
//     own WAL holds external records in seq order, because ApplyExternal
//     applies in seq order; a torn tail loses a suffix. After-images of
//     cuckoo, counting and bitmap changes reach the mapped pages only after
//     the record that logs them is fdatasynced (DESIGN.md §5), so no page
//     holds a change past D; replaying the WAL's after-images (idempotent)
//     brings every filter to D exactly.
//   - The engine replays its records after D in seq order; each is planned
//     against the state the one before left, as it was the first time. A
//     record at or below the store's applied seq is skipped, so replaying
//     from too early is harmless; one whose seq was passed over (replayed
//     out of order) is refused with ErrInvalid rather than skipped. Once
//     Encode began to hand out seqs (above every seq applied or being
//     applied), a record of an earlier process with one of them, or a
//     later one, is refused with ErrInvalid too, whether it arrives
//     before or after the record encoded here with its seq (the store
//     compares checksums): applied, it would make that record look like
//     a replay, and its ops would be dropped.
//   - Seqs are handed out by Encode, so their order is the order of
//     planning. Batches that touch the same key must be encoded in the
//     order the engine commits them (an engine serializes writes to one
//     key anyway: hold that lock from Encode to ApplyExternal). Batches on
//     different keys commute as far as membership goes.
//   - Ordinary calls (Add, Delete, Commit) may change the same filters.
//     Their records before an external record's can be lost with the
//     WAL's unsynced tail while the engine keeps the external record, and
//     its replay then runs against a filter without them. An add or a set
//     planned again is right on any state, but a cuckoo or counting
//     delete of a key whose ordinary add was lost would remove another
//     key's fingerprint or counters that collide with it, perhaps a key
//     synced long before. So Encode of a batch that deletes from such a
//     filter first makes the filter's ordinary changes durable (one
//     fdatasync, only if one is not yet), before the engine can commit the
//     record. That covers the ordinary changes acknowledged before Encode:
//     an ordinary change of a key must be ordered with the external
//     records on that key as they are among themselves (acknowledged
//     before the Encode of a later one: hold the engine's lock on the key
//     across it too). An ordinary add of a key acknowledged after the
//     Encode of its delete is a race on the key, and a power loss may
//     then undo the add and apply the delete to the filter without it.
//   - A seq the engine never commits (its commit failed, or the process
//     died) is a gap: AbortExternal releases the batches waiting behind it;
//     after a restart nothing waits for seqs of an earlier process.
//
// The store must be opened with SyncInterval: its own WAL is then synced
// in the background, off the write path, and its interval only bounds how
// far back the engine's log must be kept.
//
// An op that cannot apply when the engine has already committed its data
// must not leave a key the engine holds reading "absent": ops on a dropped,
// broken or incomplete filter are skipped (such a filter answers "maybe",
// or is gone); a cuckoo delete refused as ambiguous deletes nothing (a
// false positive at worst); an add refused with ErrFull, and any op on a
// broken filter, mark the filter incomplete, so that its lookups answer
// "maybe" until it is rebuilt (Load into a new filter and Rename), even
// after its file is restored. Those ops report false. The incomplete mark
// is written to the catalog, and logged in the store's WAL, before the
// record is logged: once the record is durable the engine may drop it,
// and neither a crash nor a catalog put back from a copy taken before the
// mark may bring the filter back whole but for the op it skipped. An op
// refused with ErrInvalid is treated as ErrFull (it would be refused at every
// replay). An op that fails for a reason that may pass (an I/O error
// creating a new layer's file, a full disk) is not skipped: it fails the
// store, nothing of its record applies, and the engine replays the record
// after the next Open, onto the filter left whole.
//
// A record's WAL record must fit the WAL's limit (wal.MaxRecordSize):
// Encode refuses, with ErrInvalid, a batch whose WAL record could exceed
// it, counting each op at its largest (a Bloom add 18 bytes, a bitmap op
// 31, a counting op 143), each cuckoo op at one word (31 bytes). A cuckoo
// add that displaces fingerprints logs a word per move, which no bound
// foresees: a record that then exceeds the limit marks the cuckoo filters
// it adds to incomplete and skips its ops on them, as for ErrFull, and
// its other ops apply.
//
// The external record that Encode returns, which the engine stores:
//
//	+-------+---------+----------+-----+-----+----- ... ------+--------+
//	| magic | version | store id | seq |  n  | n x op          | crc32c |
//	| FSXB  | u8 = 1  | u64      | u64 | u32 | kind u8, filter | u32    |
//	|       |         |          |     |     | id u64, arg u64 |        |
//	+-------+---------+----------+-----+-----+----- ... ------+--------+
//	0       4         5          13    21    25         25+17n     29+17n
//
// kind is the op (0 Bloom add, 1 cuckoo add, 2 cuckoo delete, 3 counting
// add, 4 counting delete, 5 bitmap set, 6 bitmap clear), arg the key's
// hash or the bitmap offset; the CRC (Castagnoli) covers every byte before
// it. Filters are named by id, which Rename keeps.
//
// # Export stream
//
// An export stream (WriteTo, Store.Import) is one filter, self-describing:
// a header, its layers' data words in checksummed chunks, and an end
// marker. Integers are little-endian.
//
//	header, at offset 0:
//	  0    8  magic "FSEXPORT"
//	  8    4  version (2; Import reads 1 too)
//	  12   4  n: length of the filter's description, 1..8192
//	  16   n  the filter's catalog value (internal/format FilterMeta,
//	          with its own version and CRC-32C): kind, configuration,
//	          every layer's geometry and item count; id 0, synced LSN
//	          0, state ok, every layer's checkpoint stamp 0
//	then each layer's data words, layer 0 first, in chunks:
//	  0    4  L: bytes of words, min(words left in the layer, 131072)*8
//	  4    4  CRC-32C of the L bytes
//	  8    L  the words (FilterMeta.LayerWords of the layer)
//	end marker:
//	  0    4  0
//	  4    4  CRC-32C of every byte before the end marker: the header
//	          and every chunk, frames included (version 1: of the
//	          header alone, bytes 0..16+n)
//
// Every length is implied by the header: the reader knows each chunk's L
// before reading it, so a stream that lies about a length, ends early or
// lacks the end marker is corrupt. A chunk's own CRC says nothing of its
// place: the end marker's CRC, over the whole stream, catches chunks of
// equal length swapped, repeated or taken from another stream, which
// version 1 let through. The stream holds only the words the
// geometry uses (not the pages' padding), in a fixed byte order, so it
// does not depend on the file format version or the host.
//
// # Data checksums
//
// Every layer file (format version 3 and later) keeps a CRC-32C per data page in
// checksum pages after its data (drawn in package mmapbits). Every write
// to a mapped page is followed by Region.Touch, which marks the page's
// checksum stale; a checkpoint, with the writers out, recomputes the
// checksums of the stale pages only, before the msync that makes both
// durable, so its cost follows the pages changed since the last
// checkpoint, not the filter's size. Check verifies every page whose
// checksum is current and names any that differs (a *PageError: filter,
// layer, file, page, offset).
//
// A page may legitimately differ from its checksum only if something
// changed it after the checkpoint: a writer's change since (Check in the
// writer knows which pages, from the stale marks), a WAL record after the
// checkpoint (a read-only store knows these, from its WAL read at Open),
// or a writer that died. For the last, Open creates DIR/SESSION before its
// directory sync (no extra fsync), and a Close that checkpointed
// everything removes it after recomputing every checksum a dead writer
// left unknown (it stays while a filter that opened broken after the
// crash has not been recomputed: such a store recomputes its Bloom
// checksums at every Close until that filter is whole or dropped). An Open that finds the marker knows the last writer died:
// its pages may hold changes no record or checkpoint covers (the bits of
// an add whose record never reached the WAL, pages the kernel wrote back
// before a power loss), so every checksum of its Bloom filters, and of a
// filter whose Load the crash cut short, counts as stale until the next
// clean Close, which recomputes them all (a full read of those filters,
// once per crash; a periodic checkpoint does not); the other kinds keep
// theirs (below). A read-only store that finds the marker beside
// mismatching pages reports them as Unsettled, not as problems, unless it
// can tell that the writer died (below). Version 1 and 2 files have no
// checksums and are reported as such.
//
// What the checksums cannot catch: a page damaged on disk and then
// changed by a writer before a Check read it. A checkpoint recomputes the
// checksum of a page it finds changed from what the page holds, damage
// included, without verifying the page first (that would cost a read of
// 4 KiB at the first change of every page after each checkpoint); after a
// crash, the next clean Close recomputes a Bloom filter's checksums so.
// A cuckoo, counting or bitmap page changes only once the record of the
// change is durable, and a recovery's replay marks every page the records
// after the checkpoint cover: a crashed writer's recovery keeps those
// filters' other checksums, so damage there stays a mismatch that Check
// reports, before and after the next clean Close. Check a store whose
// disk is suspect (Check in a read-only Open, or inspect verify) before a
// writer opens it. The writer holds an open file description lock (fcntl
// F_OFD_SETLK) on the session marker while it runs, which a reader tests
// without taking it, and writes a new session id into the marker at each
// Open: a read-only Check of a store whose writer died (the marker there,
// its lock free, its content, the WAL and the catalog unchanged since the
// reader opened) reports a damaged cuckoo, counting or bitmap page that
// no record after the checkpoint covers, and counts Bloom pages as
// changed (deadwriter.go). Beside a running writer, off Linux, and on
// network and cluster file systems, where the lock cannot be trusted,
// such a page is Unsettled.
//
// # Fault model
//
// What each fault does, and what holds after it:
//
//   - A failed WAL write or fdatasync, a failed msync of a filter file, a
//     failed catalog commit (except a create on a full disk, below, a
//     catalog lock another process held past 5 s, and a commit that
//     cannot grow catalog.db past the process's file size limit,
//     RLIMIT_FSIZE, where bbolt's ftruncate fails with EFBIG before it
//     writes a page: these write nothing and only fail the call), a failed segment creation or directory sync
//     (except for want of room, below): the store fails. On Linux a
//     failed sync marks the pages clean without writing them, so no retry
//     can be trusted; the store records no checkpoint and deletes no WAL
//     segment from then on. Every later mutation, Load, Checkpoint,
//     Create, Drop and Rename returns an error wrapping ErrFailed and the original
//     error; lookups keep answering; Close returns the error. The next
//     Open recovers from the WAL, with nothing acknowledged lost. (Under
//     SyncInterval, changes acknowledged since the last fdatasync that
//     succeeded stay in the page cache only: reopen promptly. Where the
//     file system itself went read-only on the error, as ext4 does when
//     its journal aborts, no Open can run until it is remounted, and a
//     remount drops that page cache: those changes are lost.)
//   - A full disk when a filter or a new layer is created: the call fails
//     with an error wrapping syscall.ENOSPC; nothing is left in the
//     catalog, and the store goes on. (If the layer file was allocated and
//     the catalog commit ran out of space, the file stays until the next
//     Open removes it as a proven orphan.) A commit that reached the
//     catalog although its final sync reported ENOSPC leaves an entry of
//     a filter the store does not have: the next checkpoint deletes it,
//     and a Backup leaves it out of its copy (before, its synced LSN,
//     older than the WAL that checkpoint kept, made every later Open
//     fail, and a backup opened it broken). Until that checkpoint a
//     read-only Open beside the writer finds the filter, empty (a create)
//     or as imported (an Import), and so does the next Open if the
//     process dies before it; after it, the filter does not exist. Layer files are fully
//     allocated at creation, so no later write through a mapping can need
//     space (which would be a SIGBUS). Files of version 1 stores were
//     created sparse and are not allocated after an upgrade. A full disk
//     under the WAL is a failed write: the store fails. Any other error
//     making a new filter's or layer's file (its allocation, its sync or
//     rename, an I/O error or a read-only file system: EIO, EROFS, EFBIG)
//     fails only that call too: nothing acknowledged rests on a file not
//     yet in the catalog.
//   - No room for a new WAL segment (no free inode or block for its file,
//     ENOSPC; EDQUOT) or no file descriptor (EMFILE, ENFILE), before its
//     name reaches the directory (the directory, whose sync follows the
//     rename, is opened before it): the WAL goes on in its current segment
//     (logged once; Stats().WAL.PostponedRotations counts them), trying
//     again after each further SegmentSize and at each checkpoint, and
//     the store goes on. Meanwhile checkpoints free no WAL (the active
//     segment is never deleted): it grows until the disk's blocks run
//     out, and that write fails the store; a recovery after a crash
//     copies the longer segment (package wal, "Durability"). Before, a disk out of inodes failed the store at
//     the next segment. A rotation away from a segment Open found holding
//     records (the first change after such an Open starts a segment of
//     its own: package wal, "Durability") still fails the store, and Open
//     itself needs a free inode for the session marker.
//   - A missing, empty, damaged (bbolt cannot parse it), foreign (another
//     bbolt file, another store's catalog) or older catalog (the WAL names
//     filters it does not know, records it needs are gone, or a file of
//     this store it does not name holds data or lies beyond its next id,
//     past the empty layer-0 files that creates whose catalog commit
//     failed leave at the next ids, which Open removes): Open fails with
//     ErrCorrupt and leaves every file as it was. A read-only Open fails
//     so too where the WAL holds records for a layer its catalog does not
//     name, once a second read of the catalog still does not name it (a
//     writer records a new layer in the catalog before it logs a record
//     for it, so one added meanwhile only makes the read-only Open start
//     over). Open creates a catalog
//     only in a directory with no filter file and no WAL segment. A damaged catalog
//     that makes bbolt fault or panic is reported the same way, and the
//     failed Open keeps no descriptor, lock or mapping. So is one whose
//     content does not match the checksum every commit stores (catalog
//     format 3; package format, "Catalog"): bbolt checks only its meta
//     pages, and before the checksum a flipped bit could read as a
//     catalog without some filter (whose files a writer's Open then
//     removed as a dropped filter's) or with one renamed. A commit keeps
//     the checksum from the entries it replaces and writes, without
//     reading the others: damage that reaches the disk while a writer
//     runs does not stop its commits, and stays a mismatch that the next
//     Open reports (even where a commit wrote over the damaged entry).
//     Older builds refuse a format 3 catalog: a store this build has
//     written to does not open with a build from before it. A catalog copied
//     before a Load is older too: a Load logs a record (and syncs it)
//     before it changes a word, and its closing checkpoint covers it, so
//     once a later checkpoint (Close's, a periodic one) has removed the
//     record Open fails with ErrCorrupt (records missing), and while the
//     WAL still holds it (a Load that a crash interrupted, or a process
//     that died after the Load) replaying it brings the filter back
//     incomplete, answering "maybe": a Load into a cuckoo layer that holds
//     items moves fingerprints in place, and the older catalog would have
//     brought the filter back "ok" with some of them lost. (Replay then
//     skips the filter's records before that load record, whose
//     after-images predate the Load: the file stays as the Load left it,
//     for the current catalog put back later.) Only a copy
//     put back with the WAL removed after a clean Close (which loses
//     nothing with the current catalog) opens with stale item counts:
//     every key stays found, a later cuckoo Load inserts beside the
//     fingerprints of a layer whose count says it is empty rather than
//     copying over them, and counts that layer's items anew; so does an
//     add that finds a layer full while its count says it is less than
//     half full and a sample of the layer's buckets says otherwise,
//     before it decides whether to grow. A Bloom or counting filter takes
//     the stale count as it is: it fills past its capacity before it
//     grows (a NonScaling one past its capacity before ErrFull), so its
//     false-positive rate rises above the configured one, though no key
//     is lost. (cmd/inspect's verify, on a store no writer holds, reports
//     the records missing, a load record the catalog does not know of,
//     and the stale counts it can see: a cuckoo or bitmap count that
//     differs from the data, a counting one unless a counter is
//     saturated, and a Bloom count that the set bits put at over 1.5
//     times.)
//   - Corruption of the WAL anywhere but its torn tail (a bad record, an
//     LSN gap or jump, a record that does not fit its filter, a segment of
//     another store): Open fails with ErrCorrupt naming the segment and
//     offset, and leaves every file as it was. A torn tail is truncated.
//     A deleted segment is a gap too: one between others fails Open so,
//     and the oldest one the filters need fails it with ErrCorrupt naming
//     the missing records. The newest one, deleted or moved after its
//     writer died, fails Open (writer or read-only) with ErrCorrupt
//     naming it: the session marker records the first LSN of the
//     segment the writer appends to, at Open and at each segment it
//     starts, before any record goes into it. (A newest segment cut
//     short reads as a torn tail: not detected.)
//   - A WAL directory deleted or emptied after its writer died (the
//     session marker is there): its records after the last checkpoint are
//     gone, so Open, writer or read-only, fails with ErrCorrupt naming
//     the loss and the marker, and leaves every file as it was; removing
//     the marker opens the store without those records (Check then
//     reports the pages the dead writer changed as checksum mismatches).
//     After a clean Close the WAL holds nothing the filters need, and Open
//     restarts it after the checkpoint before it writes the marker.
//   - A layer file missing, unreadable, of the wrong size, with a header
//     that does not match the catalog, older than the catalog says (an
//     earlier copy of the file put back, or writes the disk lost: each
//     checkpoint that syncs a layer's changed pages writes its LSN into
//     the file's header page, as its checkpoint stamp, before the catalog
//     records the same stamp for the layer, so the file's stamp is never
//     below the catalog's unless the file went back in time), or, at a
//     writer's Open whose WAL holds records past the catalog's
//     checkpoint, newer than the WAL (a cuckoo, counting or bitmap change
//     stored in the map raises the stamp to its record's LSN, and no
//     change reaches the map before its record is durable, so the stamp
//     is past the WAL's end only in a plain copy of a live store that
//     took the WAL before the filter files, or after WAL writes the disk
//     lost; replaying the older WAL into the newer file would put moved
//     cuckoo entries and counters back to older values): the filter
//     opens broken. Its
//     lookups answer "maybe", its mutations and Info return an error
//     wrapping ErrCorrupt that names the file, List shows it with State
//     "broken" and the reason, and Drop removes it; every other filter
//     works. Its WAL records are kept (checkpoints do not delete them)
//     until it is dropped, so restoring its file and reopening brings it
//     back whole. The WAL is one log, so what is kept is every record
//     since the broken filter's last checkpoint, all filters': the WAL
//     (Stats.WALSize) and the next Open's replay grow until the filter is
//     dropped or its file restored, and each checkpoint logs a warning.
//     Size-triggered checkpoints count the bytes written since the last
//     one, so a store that keeps segments does not checkpoint over and
//     over for them. A file that cannot be mapped for want of descriptors
//     or memory (EMFILE, ENFILE, ENOMEM, ErrTooManyMappings, which wraps
//     ENOMEM; EAGAIN, which mmap also returns for a file under a
//     mandatory lock) is no fault of its contents:
//     Open, writer or read-only, fails with that error instead, and
//     succeeds once it passes. So does a catalog that bbolt cannot open
//     for any error the system returns (those, or an I/O error): only
//     what bbolt or the store finds wrong in its contents is ErrCorrupt.
//     A catalog change of a running writer (a create, a new layer, a
//     checkpoint) that cannot open the catalog for want of descriptors or
//     memory fails only that call, as a catalog lock held too long does:
//     nothing was written, and the store goes on.
//   - Files a writer may not write: before it changes any file, a
//     writer's Open opens the catalog and the session marker for writing
//     (and closes them), and checks that it may write and read the store
//     directory and the WAL directory, read the directory above the store
//     (which it syncs), and write filters/ where it has orphan files to
//     remove there; a filter file or WAL segment it may not open for
//     writing refuses before any change too. Where the system refuses
//     (permission: mode, owner, an immutable or append-only attribute, a
//     security module; or a read-only file system), Open fails naming
//     the path, wrapping the system's error (fs.ErrPermission, EROFS),
//     not ErrCorrupt, with every file as it was; an operator fixes it and
//     opens again. A catalog that becomes unwritable under a running
//     writer fails only the catalog update that meets it (a checkpoint, a
//     create, a new layer) with that error, as a catalog lock held too
//     long does: nothing was written, and the store goes on. A read-only Open still reads the store: a
//     filter file it may not read opens broken, its error wrapping the
//     permission error too, and the rest is read. Before, a writer's Open
//     opened such a filter broken and called it corrupt, and a catalog it
//     could not write failed the store at the first commit, after the
//     WAL was replayed or at the first checkpoint, leaving a resync marker.
//   - A FIFO, device or directory where a layer file or a WAL segment
//     should be: refused as not a regular file before it is opened (the
//     filter opens broken; a WAL segment fails Open with ErrCorrupt), in
//     a read-only open, a backup and cmd/inspect as well, so that none
//     waits for a FIFO's writer.
//   - A copy of the store made with hard links (cp -al), whose files are
//     the original's under a second name: a writer's Open of either
//     fails with ErrCorrupt naming the first file with more than one
//     name (the catalog, a WAL segment, a filter file), before it reads
//     or changes any of them (it has taken LOCK); a read-only Open reads
//     it. Two writers, one in each
//     directory, would share one WAL and one catalog.
//   - DIR/LOCK deleted while a writer runs (a "stale" lock cleared by
//     hand): a second writer's Open still fails with ErrLocked, because
//     the writer holds a flock on the directory too. (On a file system
//     where a directory cannot be flocked, only the LOCK file's is held.)
//   - catalog.db replaced while a writer runs (an older copy of it, or
//     another store's catalog, renamed over it or copied onto it): the
//     writer's next catalog change (a create, drop, rename, new layer or
//     checkpoint) finds another store id, or a last commit older than
//     its own (bbolt's transaction id, which every commit raises and a
//     copy keeps), fails with ErrCorrupt and writes nothing; a checkpoint
//     that finds it fails the store, whose WAL then keeps every
//     acknowledged change for the catalog put back. (A copy taken since
//     the writer's last catalog change is the same catalog, and passes.)
//   - A layer file truncated or replaced by another process while a store
//     has it mapped: Check, CheckFilter, Fill and WriteTo, which read a
//     whole filter through its mapping, turn the fault into an error
//     naming the file and wrapping ErrCorrupt ("truncated while mapped");
//     Check reports it as that filter's problem and goes on; a
//     checkpoint (Close's too) reading its changed pages for their
//     checksums fails the store with that error, and the next Open opens
//     the filter broken. A batch lookup (HasMany, HasManyInto,
//     HasManyHash, HasManyHashInto of a Bloom, counting or cuckoo
//     filter, a Bitmap's GetMany) that faults answers every key of the
//     batch "maybe", makes the filter answer every later lookup "maybe"
//     without reading it, and fails the store with that error, so no
//     change writes the file (through an overlay, under SyncInterval or
//     in a read-only store, a batch reads one key at a time, under the
//     same guard).
//     With Options.GuardLookups single lookups (Has and HasHash, a
//     Bitmap's Get, a counting or cuckoo filter's Count and CountHash) do the
//     same, at a cost per lookup (see there). A change of any kind
//     (single or many, a Batch, ApplyExternal, a Load, on every goroutine
//     it runs on, and the writing of a durable change's after-images into
//     the file, by the change, a checkpoint or the background apply of
//     SyncInterval) that faults fails with ErrFailed wrapping that error,
//     acknowledging nothing, turns the filter's lookups off as above and
//     fails the store; an Open whose replay of the WAL faults fails with
//     that error, and leaves the WAL whole for the next Open. Changes
//     pay for their guard, always: 9-36 ns a change that changes nothing
//     (BenchmarkNoopChange), within the noise of the WAL write of one
//     that does (1.4-1.5 µs under SyncInterval).
//     Otherwise not handled: a single lookup without that option
//     touching a mapped page past the file's new end raises SIGBUS,
//     which kills the process, as in
//     every store that maps its files (bbolt, LMDB); the directory's lock
//     keeps other filterstore processes from doing it, and nothing in the
//     store truncates a mapped file. cmd/inspect turns such a fault into
//     exit 2 ("a mapped file changed (truncated?) while it was being
//     read").
//   - A disk read error (EIO) on a page of a mapped layer file, once the
//     page has left the cache: Check, CheckFilter, Fill and WriteTo
//     return an error naming the file and wrapping the error a plain read
//     of the page returns (syscall.EIO if that read succeeds), and a
//     checkpoint reading it fails the store with that error, and so
//     does a batch lookup, a single one with Options.GuardLookups, a
//     change and Open's replay, as above. Otherwise not handled either:
//     a single lookup without that option that touches the page faults,
//     and the fault (SIGBUS) kills the process, as in every store that
//     maps its files; a store cannot check a page before each read, or
//     recover around each single lookup, without giving up the speed
//     that mapping is for (the guard costs a single lookup 17-27 ns,
//     1.8-3.4x its time on filters of 2^20 keys; a batch of 256 keys
//     nothing measurable).
//   - A Load whose key source fails, that cannot add a key, or that a
//     crash or Close interrupts: the filter is incomplete (below). So is
//     one whose load record's append or fdatasync fails (the store fails
//     before a word changes): the catalog marks the filter loading before
//     the record is logged. A Load started in a store whose WAL has
//     failed is refused before the catalog is marked, and one whose first
//     catalog commit is refused without writing anything (a lock timeout,
//     a file size limit) fails only the call; both leave the filter as it
//     was, after a crash too.
//   - Close, Drop or a Rename over a filter racing lookups: no lookup
//     answers "absent" for an item added before, and closed, dropped or
//     replaced handles answer "maybe".
//   - A nil or zero handle (a Store that Open did not return, a filter
//     that no Store call returned, a Batch that NewBatch did not): as with
//     a nil *os.File, every call that returns an error returns one
//     wrapping ErrInvalid that names the handle, and lookups answer
//     "maybe", as a closed filter's do (see each type). The exception:
//     the single lookups Has and HasHash of a nil or zero Bloom, Cuckoo
//     or Counting panic, as a method of a nil pointer does; they are
//     inlined into their callers, and a check slowed in-cache lookups by
//     7-12% (BenchmarkLookup, four alternated runs).
//
// # Decisions not fixed by docs/DESIGN.md
//
//   - Lookups on a closed, dropped, broken or incomplete filter answer
//     "maybe present": Has and Get true, Count math.MaxUint64 ("unknown").
//     A storage engine then reads its disk, which is always safe.
//     Mutations return ErrClosed, ErrCorrupt or ErrIncomplete. A lookup
//     that read a mapping Close or Drop replaced (by placeholder pages:
//     zeros, or another file mapped over the range later) sees the
//     filter's flag when it checks it again, and answers "maybe".
//   - Load and logged mutations of the same filter are serialized: while a
//     Load runs, other changes to that filter wait for it to end. Load
//     writes words directly and releases its locks between batches (so
//     checkpoints and other filters go on); a logged change planned in
//     between would be applied later as a stale after-image over loaded
//     words. Bloom bits would compose, but one rule for every kind is
//     simpler to reason about. A Load either adds every key, or leaves the
//     filter incomplete (catalog state "loading"): lookups "maybe",
//     changes ErrIncomplete, until Drop.
//   - The scalable Bloom chain gives layer i the error rate
//     ErrorRate/2^(i+1), so the compound rate stays below ErrorRate; a
//     NonScaling filter's single layer gets ErrorRate.
//   - A cuckoo Delete of a key whose fingerprint matches in two or more
//     layers is refused with ErrAmbiguous: with per-layer buckets, a match in
//     the wrong layer may be another key's only copy. (RedisBloom's CF.DEL
//     deletes a match; a false negative is worse than a key that stays.)
//     A cuckoo layer that fails an insert while less than half full
//     because the key's two buckets hold nothing but copies of it (one
//     key added many times) does not grow a layer: the add fails with
//     ErrFull. (One that fails below half full for another reason, such
//     as a MaxIterations of 1 or 2, grows.)
//   - Cuckoo filters grow by default, as RedisBloom's CF.RESERVE
//     (EXPANSION 1: new layers of the first's size); CuckooConfig.NonScaling
//     refuses instead, as BloomConfig.NonScaling. A non-scaling filter is
//     recorded as Expansion 0, which is also how filters created when a zero
//     Expansion meant "no growth" are recorded: they keep refusing.
//   - The many-key calls (AddMany, DeleteMany, SetMany, ClearMany) run
//     their keys in order, as the single calls one after another, and log
//     them as one WAL record (a batch record; more only past the WAL's
//     record size limit) with one durability wait. They are not all or
//     nothing, unlike a Batch: like RedisBloom's BF.MADD, which answers
//     per item up to an error, they stop at the first key that cannot
//     apply (ErrFull, ErrAmbiguous, an offset out of range) and return
//     the answers for the keys before it, which are durable, with its
//     error. An error that refuses the whole call (closed, dropped,
//     broken or incomplete filter) or fails the store (ErrFailed) comes
//     with no answers: nothing is acknowledged.
//   - The writer opens the bbolt catalog only for the length of each
//     catalog transaction (create, drop, rename, new layer, checkpoint),
//     so that read-only openers can take bbolt's shared lock beside it. Open reads
//     it in bbolt's read-only mode, so a damaged or foreign file is never
//     written.
//   - A ReadOnly store maps the layer files read-only and shared, so it
//     sees the live writer's changes as they happen, and keeps the WAL
//     records after each filter's checkpoint in memory; a lookup answers
//     "present" if either says so (see readonly.go for why that never
//     misses an item acknowledged before the Open). Cuckoo moves are
//     bracketed by a sequence word in each layer file's header page, which
//     readers in other processes share; a reader that finds it stuck (a
//     writer died mid-move, or mid-recovery) answers "maybe" after about
//     10 ms, and at once for later misses while it stays stuck. A writer's
//     recovery holds it odd while it replays (replaying older after-images
//     over newer files moves entries back for a while).
//   - Load calls the key source with no lock held: keys are hashed a
//     batch at a time, and each batch is added with the locks held. A
//     source may be slow, may use the store (not to change the filter it
//     loads, nor wait on an ApplyExternal: see Load), and may panic: the filter is
//     then left incomplete and the store goes on. A large Load builds in
//     private memory and publishes into the mapping once, with writes
//     that never hide an item from a lookup (Bloom: OR; counting: a
//     saturating add per counter; cuckoo: a copy over a layer that had no
//     items); its keys are then seen from the publish on, still before
//     Load returns (see (*Bloom).Load).
//   - Rename of a filter to its own name is a no-op (Redis RENAME since
//     3.2), not an error. Rename replaces a filter of any kind. Handles of
//     the renamed filter keep working under its new name.
//   - Ensure{Bloom,Cuckoo,Counting,Bitmap} of an existing filter of its
//     kind return it and ignore the configuration passed (BF.INSERT's
//     create-if-missing; Info reports the filter's own); a filter of
//     another kind under the name is ErrWrongKind.
//   - A Batch that needs a new layer for one of its ops (a scalable Bloom
//     or an expanding cuckoo filter) creates it while it plans, as the
//     single call does: the file and catalog entry are durable before the
//     record. If the batch then fails, the empty layer stays (lookups are
//     unaffected; later adds fill it). A batch is atomic against crashes,
//     not isolated: a concurrent lookup may see some of its changes
//     before others.
//   - Export (WriteTo) copies a filter with its writer mutex held, so the
//     stream is one image as of its latest logged change; Import writes
//     the files of an id it first reserved in the catalog, then names the
//     filter in one commit: a crash in between leaves proven orphans (an
//     id below the catalog's next id that no filter has). A stream holds
//     only the words its geometry uses, little-endian, so it moves
//     between file format versions.
//   - Filter files are mapped with MADV_RANDOM: lookups touch one or two
//     pages at random, and readahead would make the first lookup after a
//     reopen read megabytes. A file of 2 MiB or more is also mapped for
//     transparent huge pages (2 MiB-aligned, MADV_HUGEPAGE) unless
//     Options.SmallPages is set: fewer TLB misses for lookups in filters
//     larger than the TLB's reach, at the price of reading 2 MiB on a
//     cold fault and writing back 2 MiB folios whole (Options.SmallPages
//     says when to choose which).
package store
