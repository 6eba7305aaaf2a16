package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"switchyard/internal/otlptest"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	secretWords = "zebra-violet-quartz" // prompt text that must never reach a span
)

// tracedUpstream is an OpenAI-compatible upstream where model up-a always
// fails with 503 and every other model serves (sync, or a stream with a
// usage chunk). It records the traceparent of each call and when it wrote
// a stream's last chunk.
type tracedUpstream struct {
	mu          sync.Mutex
	traceparent []string // per call, in order
	streamEnd   time.Time
}

func (u *tracedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	u.mu.Lock()
	u.traceparent = append(u.traceparent, r.Header.Get("Traceparent"))
	u.mu.Unlock()
	if body.Model == "up-a" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		fmt.Fprint(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
		return
	}
	if !body.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"%s-2024","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`, body.Model)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"%s-2024\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n", body.Model)
	fl.Flush()
	u.mu.Lock()
	u.streamEnd = time.Now()
	u.mu.Unlock()
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"%s-2024\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\ndata: [DONE]\n\n", body.Model)
}

func tracedNode(t *testing.T) (*Node, *tracedUpstream, *otlptest.Receiver) {
	t.Helper()
	rcv := otlptest.New()
	t.Cleanup(rcv.Close)
	up := &tracedUpstream{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	// cost strategy: A is cheaper, so it is always tried first and fails over to B
	n := newTestNode(t, `
tracing: {otlp_endpoint: "`+rcv.URL()+`", service_name: gw-test}
providers:
  - {name: up, kind: openai, base_url: "`+srv.URL+`/v1", api_key: "sk-upstream-credential"}
deployments:
  - {id: A, model: m, provider: up, upstream_model: up-a, price: {input: 0.1, output: 0.1}}
  - {id: B, model: m, provider: up, upstream_model: up-b, price: {input: 5, output: 5}}
models: [{name: m, strategy: cost}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
routing: {failures_before_cooldown: 100}
`)
	return n, up, rcv
}

// flushed exports every span ended so far and returns the receiver's spans.
func flushed(t *testing.T, n *Node, rcv *otlptest.Receiver) []otlptest.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Server.Tracer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return rcv.Spans()
}

// TestTraceOfAFailover: a request whose first deployment fails and second
// serves is one server span continuing the caller's trace, with one client
// span per attempt under it carrying the SPEC 12.5 attributes; each upstream
// call got a traceparent naming its attempt span; no span holds the prompt
// or a key.
func TestTraceOfAFailover(t *testing.T) {
	n, up, rcv := tracedNode(t)
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey,
		`{"model":"m","messages":[{"role":"user","content":"`+secretWords+`"}]}`,
		"traceparent", "00-"+callerTrace+"-"+callerSpan+"-01", "X-Request-Id", "req-trace-1")
	if w.Code != 200 || w.Header().Get("X-Switchyard-Deployment") != "B" || w.Header().Get("X-Switchyard-Attempts") != "2" {
		t.Fatalf("failover: %d %v %s", w.Code, w.Header(), w.Body)
	}
	spans := flushed(t, n, rcv)

	var server otlptest.Span
	var attempts []otlptest.Span
	for _, s := range spans {
		if s.TraceID != callerTrace {
			t.Errorf("span %q in trace %s, want the caller's %s", s.Name, s.TraceID, callerTrace)
		}
		for k, v := range s.Attrs {
			str := fmt.Sprint(v)
			if strings.Contains(str, secretWords) || strings.Contains(str, "sk-upstream-credential") || strings.Contains(str, testKey) || strings.Contains(str, "127.0.0.1") {
				t.Errorf("span %q attribute %s = %q leaks the prompt, a key or an upstream address", s.Name, k, str)
			}
		}
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			if server.Name != "" {
				t.Fatalf("two server spans: %q and %q", server.Name, s.Name)
			}
			server = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			attempts = append(attempts, s)
		}
	}
	if server.Name != "POST /v1/chat/completions" || server.ParentSpanID != callerSpan {
		t.Fatalf("server span %q parent %q, want POST /v1/chat/completions under the caller's %s", server.Name, server.ParentSpanID, callerSpan)
	}
	for k, v := range map[string]any{
		"http.request.method": "POST", "http.route": "/v1/chat/completions", "http.response.status_code": int64(200),
		"switchyard.team": "t", "switchyard.model.requested": "m", "switchyard.model.served": "m",
		"switchyard.attempts": int64(2), "switchyard.degraded": false, "switchyard.request_id": "req-trace-1",
	} {
		if server.Attrs[k] != v {
			t.Errorf("server span %s = %v, want %v", k, server.Attrs[k], v)
		}
	}
	if server.Resource["service.name"] != "gw-test" {
		t.Errorf("service.name %v", server.Resource["service.name"])
	}
	if len(attempts) != 2 {
		t.Fatalf("%d client spans, want one per attempt (2)", len(attempts))
	}
	wantAttempts := []map[string]any{
		{"switchyard.deployment": "A", "gen_ai.request.model": "up-a", "error.type": "server_error", "switchyard.upstream.status": int64(503), "switchyard.attempt": int64(1)},
		{"switchyard.deployment": "B", "gen_ai.request.model": "up-b", "gen_ai.response.model": "up-b-2024", "switchyard.attempt": int64(2),
			"gen_ai.usage.input_tokens": int64(5), "gen_ai.usage.output_tokens": int64(1)},
	}
	for i, a := range attempts {
		if a.ParentSpanID != server.SpanID {
			t.Errorf("attempt %d parent %q, want the server span %s", i+1, a.ParentSpanID, server.SpanID)
		}
		if a.Attrs["gen_ai.operation.name"] != "chat" || a.Attrs["gen_ai.provider.name"] != "openai" || a.Name != "chat "+wantAttempts[i]["gen_ai.request.model"].(string) {
			t.Errorf("attempt %d: %q %v", i+1, a.Name, a.Attrs)
		}
		for k, v := range wantAttempts[i] {
			if a.Attrs[k] != v {
				t.Errorf("attempt %d %s = %v, want %v", i+1, k, a.Attrs[k], v)
			}
		}
	}
	if attempts[0].StatusCode != tracepb.Status_STATUS_CODE_ERROR {
		t.Error("the failed attempt's span is not marked as an error")
	}
	if _, ok := attempts[1].Attrs["error.type"]; ok {
		t.Error("the serving attempt has an error.type")
	}
	up.mu.Lock()
	tps := append([]string(nil), up.traceparent...)
	up.mu.Unlock()
	if len(tps) != 2 {
		t.Fatalf("upstream saw %d calls, want 2", len(tps))
	}
	for i, tp := range tps {
		if want := "00-" + callerTrace + "-" + attempts[i].SpanID + "-01"; tp != want {
			t.Errorf("upstream call %d traceparent %q, want %q (the caller's trace, this attempt's span)", i+1, tp, want)
		}
	}
}

// TestTraceOfAStream: a stream's attempt span ends when the stream ends,
// with the usage of its last chunk, and the server span ends after it.
func TestTraceOfAStream(t *testing.T) {
	n, up, rcv := tracedNode(t)
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey,
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"`+secretWords+`"}]}`)
	if w.Code != 200 || !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
		t.Fatalf("stream: %d %s", w.Code, w.Body)
	}
	var server, served otlptest.Span
	for _, s := range flushed(t, n, rcv) {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			server = s
		} else if s.Attrs["switchyard.deployment"] == "B" {
			served = s
		}
	}
	if served.Name == "" || server.Name == "" {
		t.Fatal("missing the server span or the serving attempt's span")
	}
	for k, v := range map[string]any{"switchyard.stream": true, "gen_ai.usage.input_tokens": int64(7), "gen_ai.usage.output_tokens": int64(3), "gen_ai.response.model": "up-b-2024"} {
		if served.Attrs[k] != v {
			t.Errorf("stream attempt %s = %v, want %v", k, served.Attrs[k], v)
		}
	}
	up.mu.Lock()
	lastChunk := uint64(up.streamEnd.UnixNano())
	up.mu.Unlock()
	if served.End < lastChunk || server.End < served.End {
		t.Errorf("attempt span ended at %d, before the upstream's last chunk (%d) or after the server span (%d)", served.End, lastChunk, server.End)
	}
}

// TestTraceEveryEndpoint: every client endpoint (chat, embeddings, images,
// messages, responses sync and stream), rejected requests included, leaves
// one server span named after its route with its attempt under it.
func TestTraceEveryEndpoint(t *testing.T) {
	rcv := otlptest.New()
	t.Cleanup(rcv.Close) // after the node's Close (cleanups run last first)
	n := newTestNode(t, strings.Replace(simYAML, "providers:", "tracing: {otlp_endpoint: \""+rcv.URL()+"\"}\nproviders:", 1))
	h := n.Handler()
	cases := []struct{ path, body, key, op string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, testKey, "chat"},
		{"/v1/embeddings", `{"model":"e","input":"x"}`, testKey, "embeddings"},
		{"/v1/images/generations", `{"model":"i","prompt":"x"}`, testKey, "generate_content"},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, testKey, "chat"},
		{"/v1/responses", `{"model":"m","input":"x"}`, testKey, "chat"},
		{"/v1/responses", `{"model":"m","input":"x","stream":true}`, testKey, "chat"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "sk-wrong", ""},
	}
	for _, c := range cases {
		if w := do(t, h, "POST", c.path, c.key, c.body); (w.Code == 200) != (c.op != "") {
			t.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
		}
	}
	spans := flushed(t, n, rcv)
	servers := map[string]otlptest.Span{}
	ops := map[string]bool{}
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			servers[s.TraceID] = s
		}
	}
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			srv := servers[s.TraceID]
			ops[srv.Attrs["http.route"].(string)+" "+s.Attrs["gen_ai.operation.name"].(string)] = true
		}
	}
	if len(servers) != len(cases) {
		t.Fatalf("%d server spans for %d requests", len(servers), len(cases))
	}
	for _, c := range cases[:len(cases)-1] {
		if !ops[c.path+" "+c.op] {
			t.Errorf("no %s attempt span under a %s server span (have %v)", c.op, c.path, ops)
		}
	}
	unauthorized := 0
	for _, s := range servers {
		if s.Attrs["http.response.status_code"] == int64(401) {
			unauthorized++
			if _, ok := s.Attrs["switchyard.team"]; ok {
				t.Error("an unauthenticated request's span names a team")
			}
		}
	}
	if unauthorized != 1 {
		t.Errorf("%d 401 server spans, want 1", unauthorized)
	}
}
