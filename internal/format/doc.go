// Package format defines the on-disk formats of a filterstore store
// directory that package store owns: the directory's names, the catalog's
// buckets and filter values, and the payloads of the store's WAL records.
// Package store reads and writes them through this package, and so do
// cmd/inspect, the fuzz targets and the tests; nothing else restates them.
// The formats of the other layers are drawn where they are encoded: a
// layer file's header page in mmapbits, a WAL segment header and record
// framing in wal.
//
// Every integer is little-endian. Every constant and name below is part
// of the format and must never change; a new layout gets a new version
// number, and the old one stays readable.
//
// # Directory
//
//	DIR/LOCK                       flock held by the one writer process
//	DIR/catalog.db                 bbolt catalog (below)
//	DIR/catalog.db.tmp             a catalog being created (renamed when whole)
//	DIR/RESYNC                     an msync failed: rewrite every page at Open
//	DIR/SESSION                    a writer has the store open (or died with it open)
//	DIR/filters/<id>-<layer>.flt   one mapped file per layer (mmapbits)
//	DIR/filters/<id>-<layer>.flt.tmp  a layer file being created
//	DIR/wal/<first-lsn>.log        WAL segments (wal)
//
// # Catalog
//
// catalog.db is a bbolt database with two buckets:
//
//	bucket "meta":     "format"     -> u32 catalog format (1, 2 or 3)
//	                   "storeid"    -> u64 store id, never 0 (from format 2)
//	                   "checkpoint" -> u64 LSN of the latest checkpoint
//	                   "external"   -> u64 highest external seq it covers (may be absent)
//	                   "nextid"     -> u64 id of the next filter (never reused)
//	                   "sum"        -> u64 content checksum (format 3 only)
//	bucket "filters":  filter name  -> filter value (below)
//
// The content checksum (format 3) is the XOR, over every entry of every
// root bucket ("sum" itself left out), of xxHash64 of the bucket's name,
// the entry's key and its value, each preceded by its length as a
// uvarint: a commit updates it from the entries it replaces and writes.
// Every commit stores it and every read recomputes and checks it: bbolt
// checks only its meta pages, and a flipped bit elsewhere can read as a
// catalog that lists fewer filters, or one under another name. A format
// 2 catalog has none; the first commit of this build makes it format 3,
// which older builds refuse ("format 03000000"): a store this build has
// written to does not open with a build from before it.
//
// A filter name is 1-200 bytes of UTF-8 with no NUL and no '/'.
//
// # Filter value, version 6
//
//	+-----+---------+------+-------+-------+----------+------------+
//	| ver | id      | kind | state | flags | capacity | error rate |
//	| u8  | u64     | u8   | u8    | u8    | u64      | f64        |
//	+-----+---------+------+-------+-------+----------+------------+
//	0     1         9      10      11      12         20
//
//	+-----------+-------------+------------------+----------------+
//	| expansion | bucket size | fingerprint bits | max iterations |
//	| u32       | u32         | u32              | u32            |
//	+-----------+-------------+------------------+----------------+
//	28          32            36                 40
//
//	+---------+--------+------------+
//	| bits    | layers | synced LSN |   (synced LSN: from version 2)
//	| u64     | u32 n  | u64        |
//	+---------+--------+------------+
//	44        52       56           64
//
//	n x +----------+------------+------+-----+------+------------+-------+------------+-------+
//	    | capacity | error rate | size | k   | salt | data pages | items | derivation | stamp |
//	    | u64      | f64        | u64  | u32 | u64  | u64        | u64   | u32        | u64   |
//	    +----------+------------+------+-----+------+------------+-------+------------+-------+
//	    0          8            16     24    28     36           44      52           56      64
//
//	+-----------------------------------+
//	| CRC-32C of every byte before it   |
//	| u32                               |
//	+-----------------------------------+
//
// ver is 6 (MetaVersion); flags bit 0 is "non-scaling"; state is 0 (ok)
// or 1 (a bulk Load began and has not ended); 1 <= n <= MaxLayers. A
// layer's size counts Bloom blocks, cuckoo buckets or bitmap bits; its
// items are as of the filter's synced LSN; its derivation, mirrored in its
// file's header (format version 4; 5 for cuckoo layers, 6 for local
// ones), is a Bloom or counting layer's bloom.Derivation (0 mix, 1 mul)
// or a cuckoo layer's cuckoo.Derivation (0 mix, 1 mul, 2 local), and 0
// for bitmaps. A layer's stamp is the checkpoint stamp its file carries
// in its header page (mmapbits: byte 2056) since the last checkpoint that
// synced the file with changes, 0 if none has: a file stamped below it is
// older than the catalog (store: the filter opens broken). Version 5 is
// version 6 without the stamp (56 bytes a layer, read with stamp 0).
// Version 4 is version 5 with every cuckoo layer's
// derivation 0 or 1; version 3 is version 5 with every cuckoo layer's
// derivation 0 (mix). Version 2 is
// version 3 without the layers' derivation (52 bytes a layer, every one
// on the mix derivation); version 1 is version 2 without the synced LSN
// (the layers start at offset 56). Both are read, version 1 with the
// catalog's checkpoint standing for the synced LSN, and never written.
//
// # WAL payload
//
// The wal package frames each payload with its length, CRC-32C and LSN.
// A payload is one of:
//
//	hash record (Bloom add, monotonic), 18 bytes:
//	+------+-----------+-------+----------+
//	| op=1 | filter id | layer | key hash |
//	| u8   | u64       | u8    | u64      |
//	+------+-----------+-------+----------+
//	0      1           9       10         18
//
//	words record (cuckoo, counting Bloom, bitmap), 15 + 16n bytes:
//	+------+-----------+-------+-------------+-------+
//	| op=2 | filter id | layer | items delta | n     |
//	| u8   | u64       | u8    | i8          | u32   |
//	+------+-----------+-------+-------------+-------+
//	0      1           9       10            11      15
//	n x +------------+-------+
//	    | word index | value |
//	    | u64        | u64   |
//	    +------------+-------+
//
//	batch record (store Batch: ops on any filters), 5 + parts bytes:
//	+------+-------+
//	| op=3 | n     |
//	| u8   | u32   |
//	+------+-------+
//	0      1       5
//	n x part: a hash record (op=1) or a words record (op=2), encoded
//	          exactly as above, one after another
//
//	external record (a batch that rode in another log), 13 + parts bytes:
//	+------+----------------+-------+
//	| op=4 | external seq   | n     |
//	| u8   | u64            | u32   |
//	+------+----------------+-------+
//	0      1                9       13
//	n x part, as in a batch record; here 0 <= n
//
//	load record (a Load began, or an op was skipped), 9 bytes:
//	+------+-----------+
//	| op=5 | filter id |
//	| u8   | u64       |
//	+------+-----------+
//	0      1           9
//
// Replay of a hash record sets the key's bits in the layer and counts one
// new item. A words record holds after-images in the order they were
// applied; replay stores them as absolute values, so replaying twice is
// harmless. Records naming a filter id the catalog does not hold (dropped
// since) are skipped. 0 <= n <= 65536.
//
// A batch record holds the ops of one store Batch, in the order they were
// planned: 1 <= n, no part is a batch, and the parts fill the payload
// exactly. Its parts share its LSN and are replayed in order, each as the
// lone record it encodes (a part of a filter whose files already reflect
// the LSN, or of a dropped filter, is skipped like a record). One record
// has one CRC in the WAL's framing: a torn or damaged batch record is
// never replayed, so a batch is replayed whole or not at all.
//
// An external record is a batch the store applied in external-log mode
// (package store, external.go): its sequence number in the engine's log
// rides with it, so the store knows, after a crash, through which engine
// record its own WAL and files reach. It is logged even with no parts
// (every op of the batch changed nothing): its sequence number still
// counts. The catalog's meta bucket keeps the highest one a checkpoint
// covers under "external".
//
// A load record says the filter is incomplete from there on: a Load of
// it began (the store logs the record, and syncs it, before the Load
// changes a word, and the Load's closing checkpoint covers it, though
// only a later checkpoint removes it), or in
// external-log mode an op on it could not apply (logged before the
// external record that skipped the op). It is never a part. Replay of one (its LSN above
// the filter's synced LSN) means the catalog entry is from before the
// Load, which did not end, or whose catalog was replaced by an older
// copy: the filter opens incomplete. A build older than load records
// refuses a WAL that holds one (unknown op). A clean Close checkpoints
// past it, so such a build opens a store closed cleanly, unless a broken
// filter keeps the WAL from its own checkpoint on.
//
// Error text names the store ("store: catalog value: ...", "store: wal
// record: ..."): these are the store's formats, and their errors reach
// users through package store and cmd/inspect.
package format
