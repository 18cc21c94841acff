package kv

import "fmt"

// Mode says how a Service writes a put: to pebble alone, or to the filters
// and then pebble (see the package doc). A new mode goes in Modes, String,
// filtered and valid, and as a case of Service.commit.
type Mode int

const (
	// ModePebbleOnly keeps no filters: every Get reads pebble. The
	// baseline.
	ModePebbleOnly Mode = iota + 1
	// ModePerFilter makes a put durable in the Bloom filter, then in the
	// cuckoo filter (one durability wait each), then in pebble.
	ModePerFilter
	// ModeBatch makes a put durable in both filters with one filterstore
	// Batch (one WAL record, one wait), then in pebble; the puts that
	// arrive while one commits share the next Batch and pebble batch (a
	// write group).
	ModeBatch
	// ModeExternal writes a put's filter changes, encoded as a
	// filterstore external record, inside the same pebble batch as the
	// key (one durability wait in all), and applies them to the filters
	// once that batch is committed; after a crash Open replays the
	// records the filters lack from pebble (store external-log mode).
	ModeExternal
)

// Modes lists every mode, in the order of their values.
func Modes() []Mode { return []Mode{ModePebbleOnly, ModePerFilter, ModeBatch, ModeExternal} }

// String returns the mode's name: "pebble-only", "per-filter", "batch",
// "external".
func (m Mode) String() string {
	switch m {
	case ModePebbleOnly:
		return "pebble-only"
	case ModePerFilter:
		return "per-filter"
	case ModeBatch:
		return "batch"
	case ModeExternal:
		return "external"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode returns the mode whose String is name.
func ParseMode(name string) (Mode, error) {
	for _, m := range Modes() {
		if m.String() == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("kv: %w: no mode %q (pebble-only, per-filter, batch, external)", ErrInvalid, name)
}

// filtered reports whether m keeps filters.
func (m Mode) filtered() bool { return m == ModePerFilter || m == ModeBatch || m == ModeExternal }

func (m Mode) valid() bool { return m >= ModePebbleOnly && m <= ModeExternal }
