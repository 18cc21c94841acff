package kv

import "github.com/cockroachdb/pebble/v2"

// quietLogger drops pebble's informational messages (every Open logs the
// WALs it found and replayed) and passes errors and fatal errors on to
// pebble.DefaultLogger.
type quietLogger struct{}

// Infof drops the message.
func (quietLogger) Infof(string, ...any) {}

// Errorf logs through pebble.DefaultLogger.
func (quietLogger) Errorf(format string, args ...any) {
	pebble.DefaultLogger.Errorf(format, args...)
}

// Fatalf logs through pebble.DefaultLogger, which exits.
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
