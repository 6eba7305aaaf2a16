package tracing

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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

// Backoff while the collector fails: the batches in between are dropped
// (and counted) without being encoded, so a collector that is gone costs no
// CPU; the first batch after the wait probes it again.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// countingExporter wraps the OTLP exporter: it releases the gate's count as
// a batch leaves the queue, counts what the collector accepted and what was
// lost, backs off while the collector fails, and logs when export starts
// and stops failing (once per change, not once per batch). It reports
// success to the batch processor either way: a failed batch is already
// counted and logged, and is not retried again.
type countingExporter struct {
	// immutable after New
	next sdktrace.SpanExporter
	gate *gate
	m    *metrics
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex    // exports are serial; mu only makes that explicit
	backoff time.Duration // guarded by mu; 0 while the collector answers
	until   time.Time     // guarded by mu; batches before it are dropped
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	n := len(spans)
	e.gate.pending.Add(-int64(n))
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.backoff > 0 && e.now().Before(e.until) {
		e.m.dropped.WithLabelValues(reasonExportFailed).Add(float64(n))
		return nil
	}
	if err := e.next.ExportSpans(ctx, spans); err != nil {
		e.m.dropped.WithLabelValues(reasonExportFailed).Add(float64(n))
		if e.backoff == 0 {
			e.log.Warn("trace export failing; spans are dropped and counted in switchyard_tracing_spans_dropped_total", "spans", n, "error", err)
		}
		e.backoff = min(max(2*e.backoff, minBackoff), maxBackoff)
		e.until = e.now().Add(e.backoff)
		return nil
	}
	e.m.exported.Add(float64(n))
	if e.backoff > 0 {
		e.log.Info("trace export recovered", "spans", n)
		e.backoff = 0
	}
	return nil
}

func (e *countingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

var (
	_ sdktrace.SpanProcessor = (*gate)(nil)
	_ sdktrace.SpanExporter  = (*countingExporter)(nil)
)
