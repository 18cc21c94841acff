package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"log"
	"os"
	"slices"
	"time"

	"github.com/filterstore/filterstore/store"
)

// A store lives in a directory: create a Bloom filter, add to it, close the
// store, and open it again. The filter reopens without being read.
func Example() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil) // defaults: SyncAlways
	if err != nil {
		log.Fatal(err)
	}
	users, err := s.CreateBloom("users", store.BloomConfig{Capacity: 1_000_000, ErrorRate: 0.001})
	if err != nil {
		log.Fatal(err)
	}
	isNew, err := users.Add([]byte("alice")) // returns once the add is fsynced
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("alice new:", isNew)
	fmt.Println("alice:", users.Has([]byte("alice")))
	fmt.Println("bob:", users.Has([]byte("bob"))) // false: certainly absent
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	s, err = store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	users, err = s.Bloom("users")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after reopen, alice:", users.Has([]byte("alice")))
	fmt.Println("after reopen, bob:", users.Has([]byte("bob")))
	// Output:
	// alice new: true
	// alice: true
	// bob: false
	// after reopen, alice: true
	// after reopen, bob: false
}

// AddMany logs a batch with one WAL write and one fsync, and reports which
// keys were new.
func ExampleBloom_AddMany() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	seen, err := s.CreateBloom("seen", store.BloomConfig{Capacity: 10_000})
	if err != nil {
		log.Fatal(err)
	}

	isNew, err := seen.AddMany([][]byte{[]byte("a"), []byte("b"), []byte("a")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(isNew) // the second "a" found its bits set
	fmt.Println(seen.HasMany([][]byte{[]byte("a"), []byte("b"), []byte("c")}))
	fmt.Println("items:", seen.Card())
	// Output:
	// [true true false]
	// [true true false]
	// items: 2
}

// A cuckoo filter counts copies of a key and can delete them.
func ExampleCuckoo_Delete() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	sessions, err := s.CreateCuckoo("sessions", store.CuckooConfig{Capacity: 1024, Expansion: 2})
	if err != nil {
		log.Fatal(err)
	}

	key := []byte("session-42")
	for range 2 {
		if err := sessions.Add(key); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("count:", sessions.Count(key))
	for range 3 {
		deleted, err := sessions.Delete(key)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("deleted:", deleted, "count:", sessions.Count(key), "has:", sessions.Has(key))
	}
	// Output:
	// count: 2
	// deleted: true count: 1 has: true
	// deleted: true count: 0 has: false
	// deleted: false count: 0 has: false
}

// Checkpoint makes every change so far durable in the filter files and lets
// the WAL before it go: recovery replays only what follows the latest
// checkpoint. Close checkpoints, and a background checkpointer runs every
// CheckpointEvery and whenever the WAL passes CheckpointBytes.
func ExampleStore_Checkpoint() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, &store.Options{
		Sync:            store.SyncInterval, // acknowledged once written, fsynced every SyncEvery
		SyncEvery:       10 * time.Millisecond,
		CheckpointEvery: -1, // only explicit checkpoints (and Close)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	flags, err := s.CreateBitmap("flags", 1<<20)
	if err != nil {
		log.Fatal(err)
	}
	for _, off := range []uint64{1, 5, 1 << 19} {
		if _, err := flags.Set(off); err != nil {
			log.Fatal(err)
		}
	}

	if err := s.Checkpoint(); err != nil {
		log.Fatal(err) // the store failed: see ErrFailed
	}
	info, err := flags.Info()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("set bits:", info.Items, "of", info.Capacity)
	// Output:
	// set bits: 3 of 1048576
}

// Load builds a filter from a key source without logging each key: far
// faster than Add, durable at the checkpoint that ends it. The source
// yields a non-nil error when it fails; Load then stops, and the filter
// is left incomplete: lookups answer "maybe", changes fail with
// ErrIncomplete, until it is dropped and made again.
func ExampleBloom_Load() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	urls, err := s.CreateBloom("urls", store.BloomConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}

	// scan stands for a scan of the engine's data that breaks off.
	errScan := errors.New("scan: read error")
	scan := func(yield func([]byte, error) bool) {
		for _, k := range []string{"a.example", "b.example", "c.example"} {
			if !yield([]byte(k), nil) {
				return
			}
		}
		yield(nil, errScan)
	}
	err = urls.Load(scan)
	fmt.Println("source error:", errors.Is(err, errScan))
	fmt.Println("incomplete:", errors.Is(err, store.ErrIncomplete))
	fmt.Println("never added:", urls.Has([]byte("z.example"))) // "maybe": keys are missing
	_, err = urls.Add([]byte("d.example"))
	fmt.Println("add:", errors.Is(err, store.ErrIncomplete))
	info, _ := urls.Info()
	fmt.Println("state:", info.State)

	// Drop it and load again from a source that does not fail.
	if err := s.Drop("urls"); err != nil {
		log.Fatal(err)
	}
	urls, err = s.CreateBloom("urls", store.BloomConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	keys := [][]byte{[]byte("a.example"), []byte("b.example"), []byte("c.example")}
	if err := urls.Load(store.Keys(slices.Values(keys))); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reloaded, never added:", urls.Has([]byte("z.example")))
	// Output:
	// source error: true
	// incomplete: true
	// never added: true
	// add: true
	// state: incomplete
	// reloaded, never added: false
}

// Keys adapts a source that cannot fail (a slice, a map's keys, a
// generator) to Load.
func ExampleKeys() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ids, err := s.CreateCuckoo("ids", store.CuckooConfig{Capacity: 10_000})
	if err != nil {
		log.Fatal(err)
	}

	var gen iter.Seq[[]byte] = func(yield func([]byte) bool) {
		for i := range 1000 {
			if !yield(fmt.Appendf(nil, "id-%d", i)) {
				return
			}
		}
	}
	if err := ids.Load(store.Keys(gen)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("items:", ids.Items())
	fmt.Println("id-7:", ids.Has([]byte("id-7")))
	// Output:
	// items: 1000
	// id-7: true
}

// A read-only store takes no writer lock and writes nothing, so it can be
// opened beside a live writer (in this process or another) or, as here, on
// a store nobody has open. It never answers "absent" for an item
// acknowledged before it opened; changes fail with ErrReadOnly.
func ExampleOptions_readOnly() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	w, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	users, err := w.CreateBloom("users", store.BloomConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := users.Add([]byte("alice")); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	users, err = r.Bloom("users")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("alice:", users.Has([]byte("alice")))
	_, err = users.Add([]byte("bob"))
	fmt.Println("add:", errors.Is(err, store.ErrReadOnly))
	_, err = r.CreateBloom("more", store.BloomConfig{})
	fmt.Println("create:", errors.Is(err, store.ErrReadOnly))
	// Output:
	// alice: true
	// add: true
	// create: true
}

// Check reads every data page against the checksum its last checkpoint
// stored: after a clean Close every page verifies; a page damaged on disk
// is a *PageError naming the filter, layer, file, page and offset.
func ExampleStore_Check() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	seen, err := s.CreateBloom("seen", store.BloomConfig{Capacity: 10_000, ErrorRate: 0.01, NonScaling: true})
	if err != nil {
		log.Fatal(err)
	}
	keys := make([][]byte, 5000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	if _, err := seen.AddMany(keys); err != nil {
		log.Fatal(err)
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	// Flip one bit of the filter's second data page, as a disk might.
	file := dir + "/filters/1-0.flt"
	b, err := os.ReadFile(file)
	if err != nil {
		log.Fatal(err)
	}
	b[2*4096+100] ^= 1
	if err := os.WriteFile(file, b, 0o644); err != nil {
		log.Fatal(err)
	}

	s, err = store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	rep, err := s.Check()
	fmt.Println("pages verified:", rep.Pages)
	fmt.Println("corrupt:", errors.Is(err, store.ErrCorrupt))
	var pe *store.PageError
	if errors.As(err, &pe) {
		fmt.Printf("filter %q layer %d, %s page %d at offset %d\n", pe.Filter, pe.Layer, pe.File, pe.Page, pe.Offset)
	}
	// Output:
	// pages verified: 3
	// corrupt: true
	// filter "seen" layer 0, filters/1-0.flt page 1 at offset 8192
}

// Rename swaps in a filter rebuilt while the old one kept serving: Bloom
// filters cannot forget a key, so a filter that has collected keys since
// deleted from the data is rebuilt from a scan of the data and renamed
// over the old one, in one catalog transaction. The old handles then
// answer "maybe" (safe: the caller reads its disk); look the name up
// again to get the new filter.
func ExampleStore_Rename() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	users, err := s.CreateBloom("users", store.BloomConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range []string{"alice", "bob", "mallory"} {
		if _, err := users.Add([]byte(u)); err != nil {
			log.Fatal(err)
		}
	}
	// mallory's account is deleted from the data; the filter still says
	// "maybe". Rebuild from a snapshot of the data while users serves.
	next, err := s.CreateBloom("users.next", store.BloomConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	snapshot := [][]byte{[]byte("alice"), []byte("bob")}
	if err := next.Load(store.Keys(slices.Values(snapshot))); err != nil {
		log.Fatal(err)
	}
	if err := s.Rename("users.next", "users"); err != nil {
		log.Fatal(err)
	}

	fmt.Println("old handle, mallory:", users.Has([]byte("mallory"))) // "maybe": replaced
	_, err = users.Add([]byte("carol"))
	fmt.Println("old handle, add:", errors.Is(err, store.ErrClosed))
	users, err = s.Bloom("users")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("users, alice:", users.Has([]byte("alice")))
	fmt.Println("users, mallory:", users.Has([]byte("mallory")))
	_, err = s.Bloom("users.next")
	fmt.Println("users.next:", errors.Is(err, store.ErrNotFound))
	// Output:
	// old handle, mallory: true
	// old handle, add: true
	// users, alice: true
	// users, mallory: false
	// users.next: true
}

// EnsureBloom opens a filter if it exists and creates it otherwise, so a
// program can call it on every start. An existing filter keeps its own
// configuration (the one passed is ignored); one of another kind is
// ErrWrongKind.
func ExampleStore_EnsureBloom() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	for run := 1; run <= 2; run++ {
		s, err := store.Open(dir, nil)
		if err != nil {
			log.Fatal(err)
		}
		seen, err := s.EnsureBloom("seen", store.BloomConfig{Capacity: 1000 * uint64(run)})
		if err != nil {
			log.Fatal(err)
		}
		isNew, err := seen.Add([]byte("alice"))
		if err != nil {
			log.Fatal(err)
		}
		info, _ := seen.Info()
		fmt.Printf("run %d: alice new: %v, capacity: %d\n", run, isNew, info.Capacity)
		_, err = s.EnsureCuckoo("seen", store.CuckooConfig{})
		fmt.Printf("run %d: as a cuckoo filter: %v\n", run, errors.Is(err, store.ErrWrongKind))
		if err := s.Close(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// run 1: alice new: true, capacity: 1000
	// run 1: as a cuckoo filter: true
	// run 2: alice new: false, capacity: 1000
	// run 2: as a cuckoo filter: true
}

// A Batch changes several filters, of any kinds, atomically: one WAL
// record and one fsync for all of its ops; after a crash either all of
// them are there or (if Commit did not return) none may be.
func ExampleStore_NewBatch() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	seen, err := s.CreateBloom("seen", store.BloomConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	sessions, err := s.CreateCuckoo("sessions", store.CuckooConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	online, err := s.CreateBitmap("online", 1024)
	if err != nil {
		log.Fatal(err)
	}

	b := s.NewBatch()
	b.BloomAdd(seen, []byte("alice"))
	b.BloomAdd(seen, []byte("alice")) // sees the op before it: not new
	b.CuckooAdd(sessions, []byte("alice/1"))
	b.BitmapSet(online, 42)
	res, err := b.Commit()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("results:", res)
	fmt.Println("session:", sessions.Has([]byte("alice/1")), "online:", online.Get(42))

	// An op that cannot apply fails the whole batch, before anything is
	// logged or changed; the error names the op.
	b = s.NewBatch()
	b.BitmapClear(online, 42)
	b.BitmapSet(online, 5000)
	if _, err := b.Commit(); errors.Is(err, store.ErrInvalid) {
		fmt.Println(err)
	}
	fmt.Println("still online:", online.Get(42))
	// Output:
	// results: [true false true true]
	// session: true online: true
	// store: batch op 1 (bitmap set in "online"): store: bitmap "online": filterstore: invalid argument: offset 5000 out of range 0..1023
	// still online: true
}

// Info answers from counts the store keeps in memory, at a cost that does
// not grow with the filter: a metrics scraper can call it (or List) as
// often as it likes. How full the data is takes a read of every data word,
// so it is a call of its own: Fill.
func ExampleBloom_Fill() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	users, err := s.CreateBloom("users", store.BloomConfig{Capacity: 1000, ErrorRate: 0.01})
	if err != nil {
		log.Fatal(err)
	}
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user-%d", i)
	}
	if _, err := users.AddMany(keys); err != nil {
		log.Fatal(err)
	}

	info, err := users.Info() // O(layers): no data read
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("items %d of capacity %d, estimated FPR %.4f\n", info.Items, info.Capacity, info.EstimatedFPR)
	fill, err := users.Fill() // reads every data word
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d of %d bits set (%.3f)\n", fill.Used, fill.Total, fill.Ratio)
	// Output:
	// items 1000 of capacity 1000, estimated FPR 0.0048
	// 4673 of 11776 bits set (0.397)
}

// SetMany sets many bits with one WAL record and one sync. It stops at the
// first offset it cannot set and answers for the offsets before it, which
// are set and durable, as RedisBloom's BF.MADD answers per item before an
// error.
func ExampleBitmap_SetMany() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	days, err := s.CreateBitmap("active-days", 366)
	if err != nil {
		log.Fatal(err)
	}

	wasClear, err := days.SetMany([]uint64{0, 31, 0, 400, 59})
	fmt.Println(wasClear, errors.Is(err, store.ErrInvalid)) // 400 is out of range
	fmt.Println(days.GetMany([]uint64{0, 31, 59}), "set bits:", days.Count())
	wasSet, err := days.ClearMany([]uint64{31, 32})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(wasSet, "set bits:", days.Count())
	// Output:
	// [true true false] true
	// [true true false] set bits: 2
	// [true false] set bits: 1
}

// Backup copies a live store, as of one moment, to a new directory that
// opens like any store.
func ExampleStore_Backup() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir+"/live", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	seen, err := s.CreateCuckoo("seen", store.CuckooConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if err := seen.Add([]byte("alice")); err != nil {
		log.Fatal(err)
	}
	if err := s.Backup(dir + "/copy"); err != nil {
		log.Fatal(err)
	}
	if err := seen.Add([]byte("bob")); err != nil { // after the backup
		log.Fatal(err)
	}
	fmt.Println(errors.Is(s.Backup(dir+"/copy"), store.ErrExists))

	c, err := store.Open(dir+"/copy", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	copied, err := c.Cuckoo("seen")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(copied.Has([]byte("alice")), copied.Has([]byte("bob")))
	// Output:
	// true
	// true false
}

// WriteTo exports one filter as a self-describing stream (checksummed
// chunks) that Import turns into a filter of another store: RedisBloom's
// SCANDUMP and LOADCHUNK.
func ExampleBloom_WriteTo() {
	dirA, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dirA)
	dirB, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dirB)

	a, err := store.Open(dirA, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	seen, err := a.CreateBloom("seen", store.BloomConfig{Capacity: 1000, ErrorRate: 0.001})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := seen.AddMany([][]byte{[]byte("alice"), []byte("bob")}); err != nil {
		log.Fatal(err)
	}

	// Export the filter: one consistent, checksummed stream.
	var stream bytes.Buffer
	if _, err := seen.WriteTo(&stream); err != nil {
		log.Fatal(err)
	}

	// Import it into another store, under another name.
	b, err := store.Open(dirB, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := b.Import("seen-copy", &stream); err != nil {
		log.Fatal(err)
	}
	cp, err := b.Bloom("seen-copy")
	if err != nil {
		log.Fatal(err)
	}
	info, err := cp.Info()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cp.Has([]byte("alice")), cp.Has([]byte("bob")), "items:", info.Items, "error rate:", info.ErrorRate)

	// A damaged stream is refused, and leaves nothing behind.
	if _, err := seen.WriteTo(&stream); err != nil {
		log.Fatal(err)
	}
	damaged := stream.Bytes()
	damaged[len(damaged)/2] ^= 1
	err = b.Import("damaged", bytes.NewReader(damaged))
	fmt.Println(errors.Is(err, store.ErrCorrupt))
	_, err = b.Bloom("damaged")
	fmt.Println(errors.Is(err, store.ErrNotFound))
	// Output:
	// true true items: 2 error rate: 0.001
	// true
	// true
}

// External-log mode: the filter change rides in the engine's own log
// record (here a map stands for the engine's durable log), so the write
// path has no filterstore fsync. After a restart the engine replays its
// records above ExternalDurable.
func ExampleBatch_Encode() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(dir, &store.Options{Sync: store.SyncInterval})
	if err != nil {
		log.Fatal(err)
	}
	live, err := s.CreateCuckoo("live", store.CuckooConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	engineLog := map[uint64][]byte{} // the engine's log: seq -> record

	put := func(key string) {
		b := s.NewBatch()
		b.CuckooAdd(live, []byte(key))
		rec, err := b.Encode() // changes nothing yet
		if err != nil {
			log.Fatal(err)
		}
		seq, _ := store.ExternalSeq(rec)
		engineLog[seq] = rec // the engine commits rec with its data, durably
		if _, err := s.ApplyExternal(rec); err != nil {
			log.Fatal(err)
		}
	}
	put("alice")
	put("bob")
	fmt.Println("alice:", live.Has([]byte("alice")), "carol:", live.Has([]byte("carol")))

	// A put whose engine commit failed is aborted: later ones stop
	// waiting for it.
	b := s.NewBatch()
	b.CuckooAdd(live, []byte("carol"))
	rec, _ := b.Encode()
	if err := s.AbortExternal(rec); err != nil {
		log.Fatal(err)
	}
	put("dave")

	// Restart: replay, in seq order, every record above ExternalDurable
	// (a record the store holds already changes nothing).
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
	if s, err = store.Open(dir, &store.Options{Sync: store.SyncInterval}); err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	durable := s.ExternalDurable()
	for seq := durable + 1; seq <= 4; seq++ {
		if rec, ok := engineLog[seq]; ok {
			if _, err := s.ApplyExternal(rec); err != nil {
				log.Fatal(err)
			}
		}
	}
	live, _ = s.Cuckoo("live")
	fmt.Println("durable through seq", durable, "- dave:", live.Has([]byte("dave")), "items:", live.Items())
	// Output:
	// alice: true carol: false
	// durable through seq 4 - dave: true items: 3
}

// Stats counts what changes cost the WAL: under SyncAlways, single adds
// from one goroutine wait for an fdatasync each, a Batch for one in all.
func ExampleStore_Stats() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(dir, nil) // SyncAlways
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	seen, err := s.CreateBloom("seen", store.BloomConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	// The log's first write also syncs the space it reserves ahead.
	if _, err := seen.Add([]byte("first")); err != nil {
		log.Fatal(err)
	}

	before := s.Stats().WAL
	for _, k := range []string{"a", "b", "c"} {
		if _, err := seen.Add([]byte(k)); err != nil {
			log.Fatal(err)
		}
	}
	after := s.Stats().WAL
	fmt.Println("3 adds:", after.Records-before.Records, "records,", after.Syncs-before.Syncs, "fdatasyncs")

	before = after
	b := s.NewBatch()
	for _, k := range []string{"x", "y", "z"} {
		b.BloomAdd(seen, []byte(k))
	}
	if _, err := b.Commit(); err != nil {
		log.Fatal(err)
	}
	after = s.Stats().WAL
	fmt.Println("a batch of 3:", after.Records-before.Records, "record,", after.Syncs-before.Syncs, "fdatasync")
	// Output:
	// 3 adds: 3 records, 3 fdatasyncs
	// a batch of 3: 1 record, 1 fdatasync
}

// A store on storage whose reads can fail under it guards its single
// lookups: a read of a mapped page that faults (the file truncated by
// another process, a disk read error) answers "maybe" and fails the
// store, instead of killing the process. Batch lookups always do.
func ExampleOptions_guardLookups() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, &store.Options{GuardLookups: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	users, err := s.CreateBloom("users", store.BloomConfig{Capacity: 1000})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := users.Add([]byte("alice")); err != nil {
		log.Fatal(err)
	}
	fmt.Println(users.Has([]byte("alice")), users.Has([]byte("mallory")))
	// Output: true false
}

// LoadParallel builds a filter from several key sources at once, each
// read on a goroutine of its own: one per file of an engine's data, say.
// It is a Load of every key of every source.
func ExampleBloom_LoadParallel() {
	dir, err := os.MkdirTemp("", "filterstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	users, err := s.CreateBloom("users", store.BloomConfig{Capacity: 100_000})
	if err != nil {
		log.Fatal(err)
	}

	// file stands for a scan of one of the engine's files, holding keys
	// user-lo to user-(hi-1).
	file := func(lo, hi int) iter.Seq2[[]byte, error] {
		return func(yield func([]byte, error) bool) {
			for i := lo; i < hi; i++ {
				if !yield(fmt.Appendf(nil, "user-%d", i), nil) {
					return
				}
			}
		}
	}
	if err := users.LoadParallel(file(0, 30_000), file(30_000, 60_000), file(60_000, 90_000)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("user-0:", users.Has([]byte("user-0")))
	fmt.Println("user-89999:", users.Has([]byte("user-89999")))
	info, _ := users.Info()
	fmt.Println("state:", info.State)
	// Output:
	// user-0: true
	// user-89999: true
	// state: ok
}
