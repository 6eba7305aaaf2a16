package node

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"switchyard/internal/otlptest"
	"switchyard/internal/redistest"
)

// TestTraceEdgeStateRoundTrip: with Redis, the edge-state round trip
// (admission and the pins the request can use) is a child span of the
// request's server span; while Redis is up it says so, once Redis is gone
// the same request's span says it fell back to local state (SPEC 9, 12.5).
func TestTraceEdgeStateRoundTrip(t *testing.T) {
	rs := redistest.Start(t)
	rcv := otlptest.New()
	t.Cleanup(rcv.Close)
	yml := strings.NewReplacer("${REDIS}", rs.URL(), "${NODE}", "node-t", "${TIMEOUT}", "200ms").Replace(clusterYAML) +
		"tracing: {otlp_endpoint: \"" + rcv.URL() + "\"}\n"
	n := assemble(t, yml, 1)
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		// Redis is dead by then: the edge writer's final flush gives up at
		// this bound (the spans are already exported)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_ = n.Close(ctx)
	})

	edgeSpan := func(session string) map[string]any {
		t.Helper()
		resp, body := post(t, srv.URL+"/v1/chat/completions", "sk-rpm", chatBody, "X-Session-Id", session)
		if resp == nil || resp.StatusCode != 200 {
			t.Fatalf("request: %v %s", resp, body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Server.Tracer.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		spans := rcv.Spans()
		server := map[string]string{} // trace id -> server span id
		for _, s := range spans {
			if s.ParentSpanID == "" {
				server[s.TraceID] = s.SpanID
			}
		}
		var last map[string]any
		for _, s := range spans {
			if s.Name == "switchyard.edge_state" {
				if s.ParentSpanID != server[s.TraceID] {
					t.Errorf("edge state span parent %s, want the server span %s", s.ParentSpanID, server[s.TraceID])
				}
				last = s.Attrs
			}
		}
		if last == nil {
			t.Fatalf("no edge state span among %d spans", len(spans))
		}
		return last
	}
	a := edgeSpan("s-1")
	if a["switchyard.edge.admission"] != true || a["switchyard.edge.fallback_local"] != false || a["switchyard.edge.pins"] != int64(1) {
		t.Errorf("edge state with Redis up: %v", a)
	}
	rs.Kill()
	a = edgeSpan("s-2")
	if a["switchyard.edge.fallback_local"] != true || a["switchyard.edge.admission"] != true {
		t.Errorf("edge state with Redis gone: %v", a)
	}
}
