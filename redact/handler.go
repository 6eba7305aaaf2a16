package redact

import (
	"context"
	"log/slog"
)

// Handler wraps a slog.Handler so that no log line carries a credential:
// the message and every string or error attribute (in groups too) pass
// Credentials. A record with nothing to mask goes through unchanged. A
// handler that masks already is returned as it is.
func Handler(h slog.Handler) slog.Handler {
	if _, ok := h.(handler); ok {
		return h
	}
	return handler{h}
}

type handler struct{ next slog.Handler }

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	dirty := maybe(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		dirty = dirty || attrDirty(a)
		return !dirty
	})
	if !dirty {
		return h.next.Handle(ctx, r)
	}
	c := slog.NewRecord(r.Time, r.Level, Credentials(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		c.AddAttrs(clean(a))
		return true
	})
	return h.next.Handle(ctx, c)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = clean(a)
	}
	return handler{h.next.WithAttrs(out)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.next.WithGroup(name)} }

// attrDirty reports an attribute whose text may hold a credential.
func attrDirty(a slog.Attr) bool {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return maybe(v.String())
	case slog.KindGroup:
		for _, g := range v.Group() {
			if attrDirty(g) {
				return true
			}
		}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return maybe(err.Error())
		}
	}
	return false
}

// clean returns a with its text masked.
func clean(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Credentials(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = clean(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, Credentials(err.Error()))
		}
	}
	return a
}
