package providers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"switchyard/wire"
)

// TestHTTPAdaptersSendTraceparent: an attempt whose context carries a span
// sends its W3C traceparent upstream (SPEC 12.5), on sync and stream calls
// (the HTTP adapters share send, so the anthropic one is covered too); without one nothing is added, and the shared
// prebuilt headers are never written into.
func TestHTTPAdaptersSendTraceparent(t *testing.T) {
	var got captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		if r.Header.Get("Accept") == "text/event-stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"id\":\"c\",\"model\":\"gpt-up\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, syncChat)
	}))
	defer srv.Close()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	p := openAIProvider(srv.URL, nil)
	a := newAdapter(t, p)
	for _, stream := range []bool{false, true} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		for _, tc := range []struct {
			ctx  context.Context
			want string
		}{{traced, want}, {context.Background(), ""}} {
			resp, err := a.Do(tc.ctx, deployment(p, "gpt-up"), chatReq(t, body, wire.FormatOpenAI))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Stream != nil {
				for {
					if _, err := resp.Stream.Next(); err != nil {
						break
					}
				}
				resp.Stream.Close()
			}
			got.mu.Lock()
			tp := got.header.Get("Traceparent")
			got.mu.Unlock()
			if tp != tc.want {
				t.Errorf("stream=%v: upstream traceparent %q, want %q", stream, tp, tc.want)
			}
		}
	}
	up := a.(scrubbed).Adapter.(*openAI)
	if up.sync.Get("Traceparent") != "" || up.stream.Get("Traceparent") != "" {
		t.Fatal("Inject wrote into the adapter's shared headers")
	}
}
