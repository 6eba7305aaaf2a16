package telemetry

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"switchyard/redact"
	"switchyard/wire"
)

// RequestLog writes the one structured log line of each request (SPEC
// 12.2): its audit entry's summary, as the "request" message. With a line
// writer it appends the bytes that slog's JSON handler writes for that
// record straight to it (AppendRequestLine: no reflection, no attribute
// list, no json.Marshal per float, which made the line a twentieth of a
// busy gateway's CPU); without one it logs through the logger, whatever its
// handler. Safe for concurrent use.
type RequestLog struct {
	log   *slog.Logger
	lines io.Writer
}

// NewRequestLog logs through log, or, when lines is not nil, writes each
// line to lines. lines must be where log's handler writes, a
// slog.JSONHandler with default options under redact.Handler: build the
// two together, as cmd/switchyard's serveLogger does. log still decides
// whether info lines are on.
func NewRequestLog(log *slog.Logger, lines io.Writer) *RequestLog {
	return &RequestLog{log: log, lines: lines}
}

// lineBufs holds the encoding buffers of request lines. A line is a few
// hundred bytes; one far longer (a huge client-chosen request id is capped
// by the server's header limit) is not kept.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Write logs e, a request that ended at end.
func (l *RequestLog) Write(e *Entry, end time.Time) {
	if !l.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	if l.lines == nil {
		var attrs [16]slog.Attr
		r := slog.NewRecord(end, slog.LevelInfo, "request", 0)
		r.AddAttrs(requestAttrs(attrs[:0], e)...)
		_ = l.log.Handler().Handle(context.Background(), r)
		return
	}
	bp := lineBufs.Get().(*[]byte)
	b := AppendRequestLine((*bp)[:0], e, end)
	_, _ = l.lines.Write(b) // a failing log writer has nowhere to report to
	if cap(b) <= 16<<10 {
		*bp = b
		lineBufs.Put(bp)
	}
}

// requestAttrs appends the request line's attributes to a, in their
// order: the slog path's. AppendRequestLine writes the same fields by hand,
// which a loop over this list would make about twice as slow (kind switch
// and Value accessors per field); TestRequestLineIsSlogs and
// FuzzRequestLine hold the two equal.
func requestAttrs(a []slog.Attr, e *Entry) []slog.Attr {
	return append(a,
		slog.String("request_id", e.RequestID), slog.String("team", e.Team),
		slog.String("model", e.RequestedModel), slog.String("routed", e.RoutedModel),
		slog.String("deployment", e.Deployment), slog.Int("status", e.Status),
		slog.Int("attempts", len(e.Attempts)), slog.Bool("degraded", e.Degraded),
		slog.String("tier", tierName(e)), slog.Bool("stream", e.Stream),
		slog.Int("prompt_tokens", e.PromptTokens), slog.Int("cached_tokens", e.CachedTokens),
		slog.Int("cache_write_tokens", e.CacheWriteTokens), slog.Int("completion_tokens", e.CompletionTokens),
		slog.Float64("cost_usd", e.CostUSD), slog.Float64("duration_ms", e.DurationMs),
		slog.Float64("overhead_ms", e.OverheadMs), slog.String("error", e.Error),
	)
}

func tierName(e *Entry) string {
	if e.Tier != nil {
		return e.Tier.Tier
	}
	return ""
}

// AppendRequestLine appends e's log line, timed at end, byte for byte as
// slog's JSON handler with default options under redact.Handler writes the
// "request" record of requestAttrs, newline included
// (TestRequestLineIsSlogs holds the two together; a float that slog cannot
// marshal, NaN or an infinity, is written as 0 here). Every string is
// masked of what is shaped like a credential (SPEC 15): the client chooses
// the request id and the model it names, and a key pasted into either
// must not reach the log in clear.
func AppendRequestLine(b []byte, e *Entry, end time.Time) []byte {
	b = append(b, `{"time":`...)
	b = appendTime(b, end.Round(0))
	b = append(b, `,"level":"INFO","msg":"request","request_id":`...)
	b = appendLogString(b, e.RequestID)
	b = append(b, `,"team":`...)
	b = appendLogString(b, e.Team)
	b = append(b, `,"model":`...)
	b = appendLogString(b, e.RequestedModel)
	b = append(b, `,"routed":`...)
	b = appendLogString(b, e.RoutedModel)
	b = append(b, `,"deployment":`...)
	b = appendLogString(b, e.Deployment)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(len(e.Attempts)), 10)
	b = append(b, `,"degraded":`...)
	b = strconv.AppendBool(b, e.Degraded)
	b = append(b, `,"tier":`...)
	b = appendLogString(b, tierName(e))
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, e.Stream)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(e.PromptTokens), 10)
	b = append(b, `,"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(e.CachedTokens), 10)
	b = append(b, `,"cache_write_tokens":`...)
	b = strconv.AppendInt(b, int64(e.CacheWriteTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(e.CompletionTokens), 10)
	b = append(b, `,"cost_usd":`...)
	b = appendFloat(b, e.CostUSD)
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, e.DurationMs)
	b = append(b, `,"overhead_ms":`...)
	b = appendFloat(b, e.OverheadMs)
	b = append(b, `,"error":`...)
	b = appendLogString(b, e.Error)
	return append(b, "}\n"...)
}

// appendLogString appends s as a JSON string, masked as redact.Handler
// masks a string attribute.
func appendLogString(b []byte, s string) []byte {
	return wire.AppendString(b, redact.Credentials(s))
}
