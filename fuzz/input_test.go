// Package fuzz holds filterstore's cross-package go test -fuzz targets: the
// fuzzer's bytes are decoded into sequences of operations on each filter
// (bloom.Filter, bloom.Scalable, bloom.Counting, cuckoo.Chain,
// bitmap.Bitmap) and on a whole store (store.Open), and every answer is
// checked against a simple model after each operation.
//
// Every byte string is a valid program, decoded by input: a target first
// reads a short header that picks its configuration (geometry, capacity,
// durability mode; each target's comment lists the fields), then
// operations until the input or the target's bound ends. One byte picks an
// operation, modulo their number, and the operation reads its own
// arguments: a key is one byte naming one of the key space's keys (a fixed
// set of named keys, "key-0", "key-1", ..., plus the raw hashes the input
// introduced, 256 at most, so that keys repeat); an offset is two bytes, a
// hash eight, little-endian. Reads past the end of the input return zeros.
//
// Each target bounds its work per input, so that one execution takes
// milliseconds whatever the input and CI's 10-second runs reach hundreds of
// inputs: the filter targets run at most maxOps operations in memory;
// FuzzStoreOps runs at most maxStoreOps, with few checkpoints and reopens,
// on a store whose directory is in memory where the machine has a memory
// file system (fuzzcorpus.MemTempDir), since on a disk the fsyncs of
// opening, checkpointing and closing a store would take most of an input's
// time. Decoder targets live beside their decoders (store/, wal/,
// mmapbits/); the crash target FuzzCrashRecovery lives in store/, since it
// needs the unexported seams.
//
// Seed corpora are under testdata/fuzz/<Target>/; TestCorpus checks that
// they match the seeds built in corpus_test.go (regenerate them with
// FILTERSTORE_WRITE_CORPUS=1 go test -run TestCorpus ./fuzz/). Crashers the
// fuzzer finds are written beside them and belong in the repository.
package fuzz

import (
	"encoding/binary"
	"fmt"

	"github.com/filterstore/filterstore/bloom"
)

// input decodes the fuzzer's bytes. Reads past the end return zeros.
type input struct {
	b   []byte
	off int
}

func newInput(b []byte) *input { return &input{b: b} }

// more reports whether unread bytes remain.
func (in *input) more() bool { return in.off < len(in.b) }

func (in *input) u8() byte {
	if in.off >= len(in.b) {
		in.off++
		return 0
	}
	in.off++
	return in.b[in.off-1]
}

func (in *input) u16() uint16 { return uint16(in.u8()) | uint16(in.u8())<<8 }

func (in *input) u64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = in.u8()
	}
	return binary.LittleEndian.Uint64(b[:])
}

// intn returns a value in [0, n), n <= 256.
func (in *input) intn(n int) int { return int(in.u8()) % n }

// keySpace is the key space of an op sequence: named keys, which the
// sequence addresses by one byte so that keys repeat, plus hashes the input
// introduces itself, so that the fuzzer can steer blocks, buckets and
// fingerprints directly.
type keySpace struct {
	keys []key
}

// key is a key and its hash; raw keys (given only by a hash) have no bytes.
type key struct {
	b []byte
	h uint64
}

func (k key) String() string {
	if k.b != nil {
		return fmt.Sprintf("%q", k.b)
	}
	return fmt.Sprintf("hash %#x", k.h)
}

// maxKeys bounds a key space, so that one byte addresses every key.
const maxKeys = 256

func newKeySpace(named int) *keySpace {
	ks := &keySpace{}
	for i := range named {
		b := []byte(fmt.Sprintf("key-%d", i))
		ks.keys = append(ks.keys, key{b, bloom.Hash(b)})
	}
	return ks
}

// pick reads one byte and returns the key it names.
func (ks *keySpace) pick(in *input) key { return ks.keys[int(in.u8())%len(ks.keys)] }

// raw reads a hash from the input, adds it to the key space (while there is
// room) and returns it.
func (ks *keySpace) raw(in *input) key {
	k := key{h: in.u64()}
	if len(ks.keys) < maxKeys {
		ks.keys = append(ks.keys, k)
	}
	return k
}

// prog builds inputs for the seed corpora: the inverse of input.
type prog []byte

func (p *prog) u8(v ...byte) *prog { *p = append(*p, v...); return p }

func (p *prog) u16(v uint16) *prog { *p = binary.LittleEndian.AppendUint16(*p, v); return p }

func (p *prog) u64(v uint64) *prog { *p = binary.LittleEndian.AppendUint64(*p, v); return p }
