// Package blackbox2_test holds black-box tests of filterstore's standalone
// packages (bloom, cuckoo, bitmap, wal, mmapbits) and of cmd/inspect and
// cmd/demo, written from their documentation alone (README.md, docs/,
// go doc, -h output and Example functions). Each test checks one documented
// claim.
package blackbox2_test

import (
	"errors"
	"fmt"
	"math/bits"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

// noPanic runs f and reports a panic as a test error.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// panics reports whether f panics.
func panics(f func()) (p bool) {
	defer func() {
		if recover() != nil {
			p = true
		}
	}()
	f()
	return false
}

func keyN(prefix string, i int) []byte { return fmt.Appendf(nil, "%s-%d", prefix, i) }

func hi64(a, b uint64) uint64 {
	h, _ := bits.Mul64(a, b)
	return h
}

const golden = 0x9e3779b97f4a7c15

func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

var sprintf = fmt.Sprintf
