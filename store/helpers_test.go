package store

import (
	"errors"
	"math/rand/v2"
	"strings"
)

func errorsIsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func containsName(err error, name string) bool { return strings.Contains(err.Error(), name) }

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }
