package store

import (
	"errors"
	"strings"
)

func errorsIsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func containsName(err error, name string) bool { return strings.Contains(err.Error(), name) }
