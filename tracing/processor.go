package tracing

import (
	"context"
	"log/slog"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// gate is the span processor in front of the SDK's batch span processor. It
// bounds the spans waiting for export to limit and drops (and counts) the
// rest, so the SDK's own queue, a little larger, never fills: the SDK
// drops silently, the gate drops visibly. OnEnd never blocks and never
// locks: a slow or absent collector costs a request one atomic add.
type gate struct {
	next  sdktrace.SpanProcessor // the SDK's batch span processor
	limit int64
	m     *metrics

	// pending counts spans handed to next and not yet given to an export:
	// the SDK's queue plus the batch being formed never exceed it.
	pending atomic.Int64
}

func (g *gate) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { g.next.OnStart(ctx, s) }

func (g *gate) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor ignores these too
	}
	if g.pending.Add(1) > g.limit {
		g.pending.Add(-1)
		g.m.dropped.WithLabelValues(reasonQueueFull).Inc()
		return
	}
	g.next.OnEnd(s)
}

func (g *gate) Shutdown(ctx context.Context) error   { return g.next.Shutdown(ctx) }
func (g *gate) ForceFlush(ctx context.Context) error { return g.next.ForceFlush(ctx) }

// countingExporter wraps the OTLP exporter: it releases the gate's count as
// a batch leaves the queue, counts what the collector accepted and what was
// lost, and logs when export starts and stops failing (once per change, not
// once per batch). It reports success to the batch processor either way: a
// failed batch is already counted and logged, and is not retried again.
type countingExporter struct {
	next sdktrace.SpanExporter
	gate *gate
	m    *metrics
	log  *slog.Logger

	failing atomic.Bool // the last export failed
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	n := len(spans)
	e.gate.pending.Add(-int64(n))
	if err := e.next.ExportSpans(ctx, spans); err != nil {
		e.m.dropped.WithLabelValues(reasonExportFailed).Add(float64(n))
		if !e.failing.Swap(true) {
			e.log.Warn("trace export failing; spans are dropped and counted in switchyard_tracing_spans_dropped_total", "spans", n, "error", err)
		}
		return nil
	}
	e.m.exported.Add(float64(n))
	if e.failing.Swap(false) {
		e.log.Info("trace export recovered", "spans", n)
	}
	return nil
}

func (e *countingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

var (
	_ sdktrace.SpanProcessor = (*gate)(nil)
	_ sdktrace.SpanExporter  = (*countingExporter)(nil)
)
