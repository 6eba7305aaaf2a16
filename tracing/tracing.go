// Package tracing owns Switchyard's OpenTelemetry traces (SPEC 12.5): the
// tracer provider built from config.Tracing with the official SDK, the
// OTLP/HTTP exporter behind a batch span processor whose queue is bounded
// (a full queue drops the span and counts it, it never blocks a request),
// W3C trace context in (Tracer.StartRequest continues a caller's
// traceparent) and out (Inject, called by the HTTP provider adapters), and
// the gateway's spans: one server span per client request (Request) and one
// client span per upstream attempt (Attempt) with the GenAI attributes.
//
// Tracing off is a nil *Tracer: every method of a nil *Tracer, *Request and
// *Attempt is a no-op that allocates nothing, so the request path pays one
// pointer test (SPEC 16's allocation guard holds).
//
// No span carries prompt or completion text, an error message (an upstream
// message may quote the prompt) or a credential: only names, counts,
// statuses and classes (SPEC 12.5, 15); a value the client chose (its
// request id, User-Agent, the model it named) is masked of what is shaped
// like a credential, as the audit entry masks it.
//
// tracing imports catalog and routing for their value types, config for
// its section and redact; never gin, go-redis, providers or gateway.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"switchyard/config"
)

// Bounds of the export pipeline. They are constants, not configuration:
// they only decide how much is lost while a collector is down, never how a
// request is served.
const (
	// QueueSize is how many ended spans wait for export; past it a span is
	// dropped and counted (reason queue_full).
	QueueSize = 8192
	// batchSize is the most spans sent in one export request.
	batchSize = 512
	// batchDelay is the longest an ended span waits for its batch.
	batchDelay = 2 * time.Second
	// exportTimeout bounds one export, the exporter's retries included; a
	// batch that does not make it in time is dropped (reason export_failed).
	exportTimeout = 5 * time.Second
	// shutdownTimeout bounds the final flush when the caller gives no
	// shorter deadline.
	shutdownTimeout = 5 * time.Second
	// maxAttrValue bounds every attribute value (bytes; the SDK truncates
	// longer ones). Clients choose some values (user_agent.original up to
	// the 1 MiB header limit, switchyard.model.requested up to the body
	// limit): unbounded, QueueSize spans could hold gigabytes while a
	// collector is slow, and one batch outgrow what a collector accepts.
	maxAttrValue = 512
)

// Tracer is the process's tracing handle. A nil *Tracer is tracing off.
type Tracer struct {
	// immutable after New
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TraceContext
	gate     *gate
}

// Options are the parts of New's environment that are not configuration.
type Options struct {
	Node     string                // service.instance.id; the node id
	Version  string                // service.version; may be empty
	Registry prometheus.Registerer // the dropped/exported counters go here
	Logger   *slog.Logger
	// Exporter replaces the OTLP/HTTP exporter (tests of the bounded queue).
	Exporter sdktrace.SpanExporter
	// Now is the clock of the export backoff; nil: time.Now.
	Now func() time.Time
}

// New builds the tracer for cfg, or returns nil (tracing off) when
// cfg.OTLPEndpoint is empty. Nothing is dialled here: the exporter connects
// on its first export, so a collector that is down at start costs nothing
// but dropped spans.
func New(cfg config.Tracing, opt Options) (*Tracer, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	exp := opt.Exporter
	if exp == nil {
		endpoint, err := tracesURL(cfg.OTLPEndpoint)
		if err != nil {
			return nil, err
		}
		// OTEL_EXPORTER_OTLP_HEADERS and the TLS variables of the OTLP
		// exporter spec still apply (a SaaS backend's API key goes there).
		exp, err = otlptracehttp.New(context.Background(),
			otlptracehttp.WithEndpointURL(endpoint),
			otlptracehttp.WithTimeout(exportTimeout),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
				Enabled: true, InitialInterval: 250 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: exportTimeout,
			}))
		if err != nil {
			return nil, fmt.Errorf("tracing.otlp_endpoint: building the OTLP/HTTP exporter: %w", err)
		}
	}
	m := newMetrics(opt.Registry)
	g := &gate{limit: QueueSize, m: m}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	counted := &countingExporter{next: exp, gate: g, m: m, log: log, now: now}
	// The SDK's queue is a little larger than the gate's bound, so the SDK
	// itself never drops (its drops are not observable): every loss is
	// counted by the gate or the exporter wrapper.
	g.next = sdktrace.NewBatchSpanProcessor(counted,
		sdktrace.WithMaxQueueSize(QueueSize+64),
		sdktrace.WithMaxExportBatchSize(batchSize),
		sdktrace.WithBatchTimeout(batchDelay),
		sdktrace.WithExportTimeout(exportTimeout))
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if opt.Node != "" {
		attrs = append(attrs, attribute.String("service.instance.id", opt.Node))
	}
	if opt.Version != "" {
		attrs = append(attrs, attribute.String("service.version", opt.Version))
	}
	limits := sdktrace.NewSpanLimits()
	limits.AttributeValueLengthLimit = maxAttrValue
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithRawSpanLimits(limits),
		// a caller's sampling decision is honoured so its trace stays whole;
		// a trace that starts here is kept by trace id (SPEC 12.5)
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithSpanProcessor(g),
	)
	return &Tracer{provider: tp, tracer: tp.Tracer("switchyard"), gate: g}, nil
}

// tracesURL turns the configured endpoint into the exporter's URL: a bare
// collector address (no path, or "/") gets the OTLP traces path /v1/traces,
// any other path is used as given (a collector behind a path prefix).
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", errors.New("tracing.otlp_endpoint: must be an http:// or https:// URL, e.g. http://otel-collector:4318")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Flush exports every span ended so far, waiting at most until ctx's
// deadline. Nil-safe.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Shutdown flushes what is queued and stops the exporter, waiting at most
// until ctx's deadline and never longer than 5s: a collector that is gone
// must not hold a node's shutdown. Spans still queued then are lost; the
// error says about how many. Nil-safe; only the first call does the work.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		// nobody scrapes a counter after shutdown: say it in the log
		return fmt.Errorf("tracing: flushing spans on shutdown (about %d not exported): %w", t.gate.pending.Load(), err)
	}
	return nil
}

// Inject returns h unchanged when ctx carries no span (tracing off, so the
// request path adds nothing), else a copy of h with the W3C traceparent
// (and tracestate) of ctx's span: the upstream continues the caller's
// trace. h itself is never modified, so callers may pass shared,
// read-only header maps.
func Inject(ctx context.Context, h http.Header) http.Header {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	out := make(http.Header, len(h)+2)
	for k, v := range h {
		out[k] = v // values are shared read-only; only the map is new
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(out))
	return out
}
