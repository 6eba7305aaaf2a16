package tracing

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/internal/fakeclock"
	"switchyard/internal/otlptest"
	"switchyard/routing"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func on(endpoint string, ratio float64) config.Tracing {
	return config.Tracing{OTLPEndpoint: endpoint, SampleRatio: ratio, ServiceName: "switchyard-test"}
}

func newTracer(t *testing.T, cfg config.Tracing, opt Options) (*Tracer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opt.Registry, opt.Logger = reg, quiet
	tr, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, reg
}

var dep = &catalog.Deployment{
	Deployment: config.Deployment{ID: "d1", Model: "gpt", UpstreamModel: "gpt-4o-mini"},
	Provider:   &catalog.Provider{Provider: config.Provider{Name: "oa", Kind: "openai", APIKey: "sk-upstream-secret", BaseURL: "http://10.0.0.5/v1"}},
}

// TestOffIsFree: without an endpoint New returns nil, and every call on the
// nil tracer, request and attempt allocates nothing (SPEC 12.5, 16).
func TestOffIsFree(t *testing.T) {
	tr, err := New(config.Tracing{SampleRatio: 1, ServiceName: "x"}, Options{})
	if err != nil || tr != nil {
		t.Fatalf("New without endpoint = %v, %v; want nil, nil", tr, err)
	}
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h := http.Header{"Authorization": {"Bearer x"}}
	att := &routing.Attempt{Deployment: dep, N: 1}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, r := tr.StartRequest(ctx, req, "/v1/chat/completions")
		c, a := r.StartAttempt(c, catalog.OpChat, att)
		if got := Inject(c, h); len(got) != 1 {
			t.Fatal("Inject changed the headers with tracing off")
		}
		r.EdgeState(c, time.Time{}, true, 2, false)
		a.End(routing.Outcome{Class: routing.ClassOK}, Usage{InputTokens: 1})
		r.End(Outcome{Status: 200})
	})
	if allocs != 0 {
		t.Fatalf("tracing off allocates %.0f per request, want 0", allocs)
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSpansReachCollector: through the real OTLP/HTTP exporter into the
// in-process receiver, a request continues the caller's trace, its attempt
// is a child client span with the GenAI attributes, the edge-state span is
// a child too, and no credential or URL of the provider is in any span.
func TestSpansReachCollector(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	tr, reg := newTracer(t, on(rcv.URL(), 1), Options{Node: "node-a", Version: "v9"})

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	req.Header.Set("User-Agent", "sdk/1")
	ctx, r := tr.StartRequest(context.Background(), req, "/v1/chat/completions")
	r.EdgeState(ctx, time.Now().Add(-time.Millisecond), true, 1, true)
	actx, a := r.StartAttempt(ctx, catalog.OpChat, &routing.Attempt{Deployment: dep, Model: "gpt", N: 1})
	out := Inject(actx, http.Header{"Authorization": {"Bearer sk-upstream-secret"}})
	a.End(routing.Outcome{Status: 200, Class: routing.ClassOK, TTFB: 3 * time.Millisecond}, Usage{InputTokens: 11, OutputTokens: 7, Body: []byte("data: {\"model\":\"gpt-4o-mini-2024\"}\n\n"), Stream: true})
	r.End(Outcome{Status: 200, RequestID: "rid-1", Team: "t", RequestedModel: "normal", ServedModel: "gpt", Tier: "easy", Attempts: 1})
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	spans := rcv.Spans()
	if len(spans) != 3 {
		t.Fatalf("got %d spans, want 3 (server, edge state, attempt): %+v", len(spans), spans)
	}
	byName := map[string]otlptest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if s.TraceID != callerTrace {
			t.Errorf("span %q trace id %s, want the caller's %s", s.Name, s.TraceID, callerTrace)
		}
		for k, v := range s.Attrs {
			if str, ok := v.(string); ok && (strings.Contains(str, "secret") || strings.Contains(str, "10.0.0.5")) {
				t.Errorf("span %q attribute %s = %q carries a credential or upstream address", s.Name, k, str)
			}
		}
	}
	srv, edge, att := byName["POST /v1/chat/completions"], byName["switchyard.edge_state"], byName["chat gpt-4o-mini"]
	if srv.ParentSpanID != callerSpan || srv.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("server span parent %q kind %v, want the caller's span %s and SERVER", srv.ParentSpanID, srv.Kind, callerSpan)
	}
	if att.ParentSpanID != srv.SpanID || att.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("attempt span parent %q kind %v, want the server span %s and CLIENT", att.ParentSpanID, att.Kind, srv.SpanID)
	}
	if edge.ParentSpanID != srv.SpanID || edge.Attrs["switchyard.edge.fallback_local"] != true || edge.Attrs["switchyard.edge.pins"] != int64(1) {
		t.Errorf("edge state span: %+v", edge)
	}
	want := map[string]any{
		"http.request.method": "POST", "http.route": "/v1/chat/completions", "http.response.status_code": int64(200),
		"switchyard.team": "t", "switchyard.model.requested": "normal", "switchyard.model.served": "gpt", "switchyard.tier": "easy",
		"switchyard.attempts": int64(1), "switchyard.degraded": false, "switchyard.request_id": "rid-1", "user_agent.original": "sdk/1",
	}
	for k, v := range want {
		if srv.Attrs[k] != v {
			t.Errorf("server span %s = %v, want %v", k, srv.Attrs[k], v)
		}
	}
	want = map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
		"gen_ai.response.model": "gpt-4o-mini-2024", "gen_ai.usage.input_tokens": int64(11), "gen_ai.usage.output_tokens": int64(7),
		"switchyard.deployment": "d1", "switchyard.provider": "oa", "switchyard.stream": true,
	}
	for k, v := range want {
		if att.Attrs[k] != v {
			t.Errorf("attempt span %s = %v, want %v", k, att.Attrs[k], v)
		}
	}
	if _, ok := att.Attrs["error.type"]; ok {
		t.Errorf("a served attempt has error.type %v", att.Attrs["error.type"])
	}
	if srv.Resource["service.name"] != "switchyard-test" || srv.Resource["service.instance.id"] != "node-a" || srv.Resource["service.version"] != "v9" {
		t.Errorf("resource: %v", srv.Resource)
	}
	if tp := out.Get("traceparent"); tp != "00-"+callerTrace+"-"+att.SpanID+"-01" {
		t.Errorf("upstream traceparent %q, want the caller's trace and the attempt span %s", tp, att.SpanID)
	}
	if got := counter(t, reg, "switchyard_tracing_spans_exported_total", ""); got != 3 {
		t.Errorf("exported counter %v, want 3", got)
	}
}

// counter sums the named counter's series on reg whose reason label is
// reason ("" = every series).
func counter(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if reason == "" || (len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() == reason) {
				sum, found = sum+m.GetCounter().GetValue(), true
			}
		}
	}
	if !found {
		t.Fatalf("no counter %s{reason=%q}", name, reason)
	}
	return sum
}

func dropped(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return counter(t, reg, "switchyard_tracing_spans_dropped_total", reason)
}

// TestFailoverAttemptsAndErrorType: a failed attempt carries error.type =
// the outcome class and an error status; a 5xx request does too.
func TestFailoverAttemptsAndErrorType(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	tr, _ := newTracer(t, on(rcv.URL(), 1), Options{})
	ctx, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/embeddings", nil), "/v1/embeddings")
	_, a1 := r.StartAttempt(ctx, catalog.OpEmbeddings, &routing.Attempt{Deployment: dep, N: 1})
	a1.End(routing.Outcome{Status: 429, Class: routing.ClassRateLimited}, Usage{})
	_, a2 := r.StartAttempt(ctx, catalog.OpEmbeddings, &routing.Attempt{Deployment: dep, N: 2, Fallback: true})
	a2.End(routing.Outcome{Class: routing.ClassTimeout}, Usage{})
	r.End(Outcome{Status: 504, Attempts: 2})
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var attempts []otlptest.Span
	for _, s := range rcv.Spans() {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			attempts = append(attempts, s)
		} else if s.Attrs["error.type"] != "504" || s.StatusCode != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("504 server span: error.type %v status %v", s.Attrs["error.type"], s.StatusCode)
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	for i, class := range []string{"rate_limited", "timeout"} {
		a := attempts[i]
		if a.Attrs["error.type"] != class || a.StatusCode != tracepb.Status_STATUS_CODE_ERROR || a.Attrs["switchyard.attempt"] != int64(i+1) {
			t.Errorf("attempt %d: %v status %v", i+1, a.Attrs, a.StatusCode)
		}
		if a.Attrs["gen_ai.operation.name"] != "embeddings" {
			t.Errorf("attempt %d operation %v", i+1, a.Attrs["gen_ai.operation.name"])
		}
	}
	if attempts[1].Attrs["switchyard.fallback"] != true {
		t.Errorf("fallback attempt not marked: %v", attempts[1].Attrs)
	}
}

// TestSampleRatioZero: a trace that starts here with ratio 0 is not
// exported, but the upstream still gets a traceparent (unsampled), and a
// caller's sampled parent is honoured.
func TestSampleRatio(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	tr, _ := newTracer(t, on(rcv.URL(), 0), Options{})
	ctx, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/messages", nil), "/v1/messages")
	actx, a := r.StartAttempt(ctx, catalog.OpChat, &routing.Attempt{Deployment: dep, N: 1})
	if tp := Inject(actx, http.Header{}).Get("traceparent"); !strings.HasSuffix(tp, "-00") {
		t.Errorf("unsampled traceparent %q, want flags 00", tp)
	}
	a.End(routing.Outcome{}, Usage{})
	r.End(Outcome{Status: 200})

	req := httptest.NewRequest("POST", "/v1/messages", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, r = tr.StartRequest(context.Background(), req, "/v1/messages")
	r.End(Outcome{Status: 200})
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rcv.Spans()); n != 1 {
		t.Fatalf("%d spans exported, want only the caller-sampled one", n)
	}
}

// TestInjectLeavesSharedHeadersAlone: the adapters' prebuilt header map is
// shared by every attempt; Inject must copy, never write into it.
func TestInjectLeavesSharedHeadersAlone(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	tr, _ := newTracer(t, on(rcv.URL(), 1), Options{})
	shared := http.Header{"Authorization": {"Bearer k"}, "Content-Type": {"application/json"}}
	ctx, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions")
	out := Inject(ctx, shared)
	r.End(Outcome{Status: 200})
	if out.Get("traceparent") == "" || out.Get("Authorization") != "Bearer k" {
		t.Fatalf("injected headers: %v", out)
	}
	if len(shared) != 2 || shared.Get("traceparent") != "" {
		t.Fatalf("shared headers modified: %v", shared)
	}
}

// blockingExporter holds every export until released: a collector that
// does not answer. It counts what it was given.
type blockingExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

// TestSlowCollectorDropsAndCounts: with the collector stuck, ending far
// more spans than the queue holds never blocks; the excess is dropped and
// counted, and every span is either exported or counted once the
// collector answers again.
func TestSlowCollectorDropsAndCounts(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	tr, reg := newTracer(t, on("http://unused:4318", 1), Options{Exporter: exp})
	const total = 2 * QueueSize
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < total; i++ {
			_, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions")
			r.End(Outcome{Status: 200})
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ending spans blocked while the collector was stuck")
	}
	lost := dropped(t, reg, reasonQueueFull)
	// at most the queue and one batch in export can be waiting
	if lost < total-QueueSize-batchSize {
		t.Fatalf("dropped %v of %d with a stuck collector, want at least %d", lost, total, total-QueueSize-batchSize)
	}
	close(exp.release)
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	got := exp.got
	exp.mu.Unlock()
	if float64(got)+lost != total {
		t.Fatalf("exported %d + dropped %v != %d ended: a span was lost uncounted", got, lost, total)
	}
}

// failingExporter refuses every batch.
type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("collector says no")
}
func (failingExporter) Shutdown(context.Context) error { return nil }

func TestRefusedExportIsCounted(t *testing.T) {
	tr, reg := newTracer(t, on("http://unused:4318", 1), Options{Exporter: failingExporter{}})
	for i := 0; i < 5; i++ {
		_, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions")
		r.End(Outcome{Status: 200})
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := dropped(t, reg, reasonExportFailed); got != 5 {
		t.Fatalf("export_failed = %v, want 5", got)
	}
}

// TestRefusingCollector: the real exporter against a collector that answers
// 400 counts the batch as export_failed.
func TestRefusingCollector(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	rcv.Fail(true)
	tr, reg := newTracer(t, on(rcv.URL(), 1), Options{})
	_, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions")
	r.End(Outcome{Status: 200})
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := dropped(t, reg, reasonExportFailed); got != 1 {
		t.Fatalf("export_failed = %v, want 1", got)
	}
}

// TestShutdownBounded: a collector that never answers cannot hold shutdown
// past the caller's deadline.
func TestShutdownBounded(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	rcv.Hold()
	tr, err := New(on(rcv.URL(), 1), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	_, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions")
	r.End(Outcome{Status: 200})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tr.Shutdown(ctx); err == nil {
		t.Fatal("shutdown against a stuck collector reported success")
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://otel:4318":                  "http://otel:4318/v1/traces",
		"http://otel:4318/":                 "http://otel:4318/v1/traces",
		"https://otel.example/v1/traces":    "https://otel.example/v1/traces",
		"https://gw.example/otlp/v1/traces": "https://gw.example/otlp/v1/traces",
	} {
		if got, err := tracesURL(in); err != nil || got != want {
			t.Errorf("tracesURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := tracesURL("otel:4318"); err == nil {
		t.Error("a URL without scheme was accepted")
	}
}

// switchExporter fails while fail is set and counts the calls it got.
type switchExporter struct {
	mu    sync.Mutex
	fail  bool
	calls int
}

func (e *switchExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if e.fail {
		return errors.New("connection refused")
	}
	return nil
}
func (e *switchExporter) Shutdown(context.Context) error { return nil }

// TestGoneCollectorBacksOff: after a failed export the batches of the next
// second are dropped without calling the exporter (no CPU spent encoding
// them), the wait doubles while the collector stays down, and the first
// batch after it probes; once the collector answers, every batch is sent.
func TestGoneCollectorBacksOff(t *testing.T) {
	clock := fakeclock.New(time.Unix(1_000_000, 0))
	exp := &switchExporter{fail: true}
	tr, reg := newTracer(t, on("http://unused:4318", 1), Options{Exporter: exp, Now: clock.Now})
	batch := func() {
		t.Helper()
		_, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions")
		r.End(Outcome{Status: 200})
		if err := tr.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	calls := func() int {
		exp.mu.Lock()
		defer exp.mu.Unlock()
		return exp.calls
	}
	steps := []struct {
		advance time.Duration
		fail    bool
		calls   int
	}{
		{0, true, 1},                      // fails: back off 1s
		{500 * time.Millisecond, true, 1}, // within the wait: dropped, not sent
		{500 * time.Millisecond, true, 2}, // probe fails: back off 2s
		{1500 * time.Millisecond, true, 2},
		{500 * time.Millisecond, false, 3}, // probe succeeds
		{0, false, 4},                      // and the next batch goes at once
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		exp.mu.Lock()
		exp.fail = st.fail
		exp.mu.Unlock()
		batch()
		if got := calls(); got != st.calls {
			t.Fatalf("step %d: exporter called %d times, want %d", i, got, st.calls)
		}
	}
	if got := dropped(t, reg, reasonExportFailed); got != 4 {
		t.Fatalf("export_failed = %v, want 4 (2 refused, 2 skipped)", got)
	}
	if got := counter(t, reg, "switchyard_tracing_spans_exported_total", ""); got != 2 {
		t.Fatalf("exported = %v, want 2", got)
	}
}
