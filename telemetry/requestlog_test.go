package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"switchyard/redact"
)

// slogLine is what slog's JSON handler (default options) under
// redact.Handler, the serving logger, writes for the request record of e
// at end: the reference AppendRequestLine must equal.
func slogLine(e *Entry, end time.Time) []byte {
	var buf bytes.Buffer
	r := slog.NewRecord(end, slog.LevelInfo, "request", 0)
	r.AddAttrs(requestAttrs(nil, e)...)
	_ = redact.Handler(slog.NewJSONHandler(&buf, nil)).Handle(context.Background(), r)
	return buf.Bytes()
}

// TestRequestLineIsSlogs: the direct encoding is byte for byte the slog
// JSON handler's line, for every sample entry and at times with a zone and
// a monotonic reading.
func TestRequestLineIsSlogs(t *testing.T) {
	ends := []time.Time{
		time.Date(2026, 12, 1, 13, 4, 5, 123456789, time.UTC),
		time.Date(2026, 12, 1, 13, 4, 5, 0, time.FixedZone("x", -3600)),
		time.Now(), // carries a monotonic reading, which slog drops
	}
	for i, e := range sampleEntries() {
		for _, end := range ends {
			got, want := AppendRequestLine(nil, e, end), slogLine(e, end)
			if !bytes.Equal(got, want) {
				t.Errorf("entry %d at %v:\n got %s\nwant %s", i, end, got, want)
			}
		}
	}
}

func FuzzRequestLine(f *testing.F) {
	f.Add("r", "team", "model", "tier", "err", 200, 2, 1.5, 0.001, 12.5, true)
	f.Add("\xff\"\\", "\x00\x1f\x7f", "\u2028\u2029", "<&>", "\t\n\r", -1, 0, 1e-9, 1e22, -0.0, false)
	f.Add("Bearer abcdefgh12345", "t", "sk-proj-Zq3xV8mN2pL7rT4wY9kH6cB1", "AKIAABCDEFGHIJKLMNOP", "key sk-\\u002dabcdefghijklmnopq", 401, 1, 1.0, 0.0, 0.1, true)
	f.Fuzz(func(t *testing.T, id, team, model, tier, errText string, status, attempts int, dur, cost, over float64, stream bool) {
		if math.IsNaN(dur) || math.IsInf(dur, 0) || math.IsNaN(cost) || math.IsInf(cost, 0) || math.IsNaN(over) || math.IsInf(over, 0) {
			return // slog writes an error marker for these; the line writes 0
		}
		e := &Entry{RequestID: id, Team: team, RequestedModel: model, RoutedModel: tier + model, Deployment: errText,
			Status: status, Degraded: stream, Stream: !stream, Tier: &TierVerdict{Tier: tier},
			PromptTokens: status * 3, CachedTokens: status, CacheWriteTokens: -attempts, CompletionTokens: attempts, CostUSD: cost, DurationMs: dur, OverheadMs: over, Error: errText}
		e.Attempts = make([]Attempt, max(0, attempts%8))
		end := time.Unix(1796155014, int64(status)*7919).UTC()
		if got, want := AppendRequestLine(nil, e, end), slogLine(e, end); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

// TestRequestLogWritesTheLine: with a line writer the line goes there,
// once per request; without one it goes through the logger; a logger above
// info writes neither.
func TestRequestLogWritesTheLine(t *testing.T) {
	e := sampleEntries()[2]
	end := time.Date(2026, 12, 1, 13, 4, 5, 6, time.UTC)
	var lines, logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	NewRequestLog(log, &lines).Write(e, end)
	if !bytes.Equal(lines.Bytes(), slogLine(e, end)) || logged.Len() != 0 {
		t.Fatalf("with a line writer: lines %q, logger %q", lines.String(), logged.String())
	}
	NewRequestLog(log, nil).Write(e, end)
	if !bytes.Equal(logged.Bytes(), slogLine(e, end)) {
		t.Fatalf("through the logger: %q", logged.String())
	}
	lines.Reset()
	quiet := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	NewRequestLog(quiet, &lines).Write(e, end)
	if lines.Len() != 0 {
		t.Fatalf("a logger above info still got %q", lines.String())
	}
}

func BenchmarkRequestLine(b *testing.B) {
	e := sampleEntries()[2]
	end := time.Now()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		l := NewRequestLog(slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard)
		for b.Loop() {
			l.Write(e, end)
		}
	})
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		l := NewRequestLog(slog.New(slog.NewJSONHandler(io.Discard, nil)), nil)
		for b.Loop() {
			l.Write(e, end)
		}
	})
}
