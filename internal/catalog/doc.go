// Package catalog reads and writes a store's catalog, DIR/catalog.db: the
// bbolt database whose buckets and values package format draws. Package
// store writes it through a Catalog, one short transaction at a time;
// cmd/inspect and the tests read it with Read, which never writes.
//
// bbolt follows page pointers read from the file and can fault or panic on
// a damaged one: every open here turns both into an error wrapping
// ErrCorrupt and releases the descriptor, lock and mapping bbolt held.
package catalog
