package safelog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// panicky panics in the methods named in its set.
type panicky struct{ in map[string]bool }

func (p panicky) Enabled(context.Context, slog.Level) bool {
	if p.in["Enabled"] {
		panic("Enabled broke")
	}
	return true
}

func (p panicky) Handle(context.Context, slog.Record) error {
	if p.in["Handle"] {
		panic("Handle broke")
	}
	return nil
}

func (p panicky) WithAttrs([]slog.Attr) slog.Handler {
	if p.in["WithAttrs"] {
		panic("WithAttrs broke")
	}
	return p
}

func (p panicky) WithGroup(string) slog.Handler {
	if p.in["WithGroup"] {
		panic("WithGroup broke")
	}
	return p
}

// TestWrapRecovers: a handler that panics in any of its methods does not
// panic its caller through the wrapper, and a record whose handling
// panicked reaches the fallback with the panic's value.
func TestWrapRecovers(t *testing.T) {
	var buf bytes.Buffer
	old := Fallback
	Fallback = slog.NewTextHandler(&buf, nil)
	defer func() { Fallback = old }()
	for _, m := range []string{"Enabled", "Handle", "WithAttrs", "WithGroup"} {
		buf.Reset()
		l := Wrap(slog.New(panicky{in: map[string]bool{m: true, "Handle": m != "WithAttrs" && m != "WithGroup"}}))
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s panicked through the wrapper: %v", m, p)
				}
			}()
			l.With("k", "v").WithGroup("g").Error("the record", "err", "x")
		}()
		if m == "Enabled" || m == "Handle" {
			if out := buf.String(); !strings.Contains(out, "the record") || !strings.Contains(out, "Handle broke") {
				t.Errorf("%s: the fallback got %q, want the record with the panic's value", m, out)
			}
		}
	}
}

// TestWrapKeepsWorkingHandler: records reach a handler that does not
// panic, nothing goes to the fallback, and wrapping is idempotent.
func TestWrapKeepsWorkingHandler(t *testing.T) {
	var fb, out bytes.Buffer
	old := Fallback
	Fallback = slog.NewTextHandler(&fb, nil)
	defer func() { Fallback = old }()
	l := Wrap(slog.New(slog.NewTextHandler(&out, nil)))
	l.With("k", "v").Info("hello")
	if !strings.Contains(out.String(), "hello") || !strings.Contains(out.String(), "k=v") || fb.Len() != 0 {
		t.Errorf("handler got %q, fallback %q", out.String(), fb.String())
	}
	if Wrap(l) != l || Wrap(nil) != nil {
		t.Error("Wrap of a wrapped logger or of nil is not that logger")
	}
}
