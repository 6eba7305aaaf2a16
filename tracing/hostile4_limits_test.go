package tracing

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A client chooses its User-Agent (up to the server's 1 MiB header limit)
// and the model it names (up to the body limit); both become attributes of
// its server span. Unbounded, every span waiting in the 8192-span export
// queue could hold megabytes (gigabytes while a collector is slow), and an
// export batch outgrows what a collector accepts, losing the other spans
// with it. Every attribute value is bounded.
func TestHostile4SpanAttributeValuesBounded(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, _ := newTracer(t, on("http://unused:4318", 1), Options{Exporter: exp})
	huge := strings.Repeat("A", 512<<10)
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	r.Header.Set("User-Agent", huge)
	_, req := tr.StartRequest(context.Background(), r, "/v1/chat/completions")
	req.End(Outcome{Status: 404, RequestID: "r1", Team: "web", RequestedModel: huge})
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	for _, a := range spans[0].Attributes {
		if n := len(a.Value.Emit()); n > maxAttrValue {
			t.Errorf("attribute %s holds %d bytes, want at most %d", a.Key, n, maxAttrValue)
		}
	}
}
