// Package safelog wraps the caller's *slog.Logger for filterstore's
// packages so that a panic in its handler never unwinds through them.
//
// The store and the WAL log from deep inside their operations, often with
// their mutexes held or halfway through a change (a failed write, a
// postponed segment rotation, a checkpoint, a recovery). A handler that
// panics there would leave a lock held, a round of the log led by no one,
// or a marker unwritten, and on a background goroutine it would end the
// process. So the wrapper recovers such a panic, and the record goes to
// standard error instead, as slog's text handler writes it, with the
// panic's value added: the caller's logging bug is seen, and the store
// goes on as if the record had been logged.
package safelog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// Wrap returns a logger whose handler is l's behind a recovering wrapper;
// l itself if it is nil or already wrapped.
func Wrap(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	if _, ok := l.Handler().(*handler); ok {
		return l
	}
	return slog.New(&handler{h: l.Handler()})
}

// handler recovers the panics of h's methods.
type handler struct{ h slog.Handler }

// Fallback is where a record goes whose handler panicked: standard
// error, by slog's text handler. A variable for the tests.
var Fallback slog.Handler = slog.NewTextHandler(os.Stderr, nil)

func (s *handler) Enabled(ctx context.Context, level slog.Level) (on bool) {
	defer func() {
		if p := recover(); p != nil {
			on = true // the record goes on to Handle (and to the fallback if that panics too)
		}
	}()
	return s.h.Enabled(ctx, level)
}

func (s *handler) Handle(ctx context.Context, r slog.Record) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r = r.Clone()
			r.AddAttrs(slog.String("filterstore_logger_panic", fmt.Sprint(p)))
			err = Fallback.Handle(ctx, r)
		}
	}()
	return s.h.Handle(ctx, r)
}

func (s *handler) WithAttrs(attrs []slog.Attr) (h slog.Handler) {
	defer func() {
		if p := recover(); p != nil {
			h = s
		}
	}()
	return &handler{h: s.h.WithAttrs(attrs)}
}

func (s *handler) WithGroup(name string) (h slog.Handler) {
	defer func() {
		if p := recover(); p != nil {
			h = s
		}
	}()
	return &handler{h: s.h.WithGroup(name)}
}
