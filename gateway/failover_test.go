package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/telemetry"
)

// scriptedUpstream is an OpenAI-compatible upstream whose answers are
// scripted per upstream model: the n-th call to a model gets the n-th
// status of its script (the last one repeats).
type scriptedUpstream struct {
	mu      sync.Mutex
	scripts map[string][]int
	calls   map[string]int
}

func (u *scriptedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model string `json:"model"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	u.mu.Lock()
	script := u.scripts[body.Model]
	n := u.calls[body.Model]
	u.calls[body.Model]++
	u.mu.Unlock()
	status := 200
	if len(script) > 0 {
		status = script[min(n, len(script)-1)]
	}
	w.Header().Set("Content-Type", "application/json")
	switch status {
	case 200:
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`, body.Model)
	case 400:
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":{"message":"Invalid parameter","type":"invalid_request_error","code":null,"param":null}}`)
	case 413:
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded","param":"messages"}}`)
	default:
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"upstream says %d","type":"server_error","code":null,"param":null}}`, status)
	}
}

func scriptedNode(t *testing.T, scripts map[string][]int, extra string) (*Node, *scriptedUpstream) {
	t.Helper()
	up := &scriptedUpstream{scripts: scripts, calls: map[string]int{}}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	yml := `
admin: {key: admin-secret}
providers:
  - {name: up, kind: openai, base_url: "` + srv.URL + `/v1", api_key: "k"}
deployments:
  - {id: A, model: primary, provider: up, upstream_model: up-a}
  - {id: B, model: primary, provider: up, upstream_model: up-b}
  - {id: C, model: fb1, provider: up, upstream_model: up-c}
  - {id: D, model: fb2, provider: up, upstream_model: up-d}
  - {id: E, model: ctxfb, provider: up, upstream_model: up-e}
  - {id: G, model: global, provider: up, upstream_model: up-g}
models: [{name: primary, strategy: round_robin}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
routing:
  max_attempts: {chat: {sync: 8, stream: 8}}
` + extra
	return newTestNode(t, yml), up
}

func auditOf(t *testing.T, n *Node, id string) *telemetry.Entry {
	t.Helper()
	es, _ := n.Audit.Lookup(context.Background(), id)
	if len(es) == 0 {
		t.Fatalf("no audit entry for %s", id)
	}
	return es[0]
}

func timeline(e *telemetry.Entry) string {
	var parts []string
	for _, a := range e.Attempts {
		parts = append(parts, a.Deployment+":"+a.Class)
	}
	return strings.Join(parts, " ")
}

// TestSeedAttemptOrder reproduces seed 003's example over HTTP:
// primary (A, B): A1, B1, A2; fallback-1 (C): C1, C2, C3; fallback-2 (D): D1.
func TestSeedAttemptOrder(t *testing.T) {
	n, _ := scriptedNode(t, map[string][]int{
		"up-a": {503, 400},      // A1 retryable, A2 non-retryable: A exhausted
		"up-b": {400},           // B1 non-retryable: B exhausted
		"up-c": {503, 503, 400}, // C1, C2 retryable (streak 2 < 3), C3 non-retryable
		"up-d": {200},
	}, "  fallbacks: [{primary: primary, reason: general, models: [fb1, fb2]}]\n")
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"primary","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "seed-1")
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w.Header().Get("X-Switchyard-Degraded") != "true" || w.Header().Get("X-Switchyard-Attempts") != "7" ||
		w.Header().Get("X-Switchyard-Deployment") != "D" || w.Header().Get("X-Switchyard-Model") != "fb2" {
		t.Fatalf("decision headers: %v", w.Header())
	}
	e := auditOf(t, n, "seed-1")
	want := "A:server_error B:bad_request A:bad_request C:server_error C:server_error C:bad_request D:ok"
	if got := timeline(e); got != want {
		t.Fatalf("timeline\n got %s\nwant %s", got, want)
	}
	if e.FallbackReason != "general" || !e.Degraded {
		t.Fatalf("reason %q degraded %v", e.FallbackReason, e.Degraded)
	}
	for _, a := range e.Attempts {
		if a.Adapter != "openai" || a.Transport != "http" || a.Start.IsZero() {
			t.Fatalf("attempt record incomplete: %+v", a)
		}
	}
}

// TestFallbackReasonChains: an all-context-window pool takes the
// context_window chain, never the general one; a missing chain for the
// reason falls to the global list, not to another reason's chain.
func TestFallbackReasonChains(t *testing.T) {
	t.Run("context window chain", func(t *testing.T) {
		n, _ := scriptedNode(t, map[string][]int{"up-a": {413}, "up-b": {413}}, `
  fallbacks:
    - {primary: primary, reason: general, models: [fb1]}
    - {primary: primary, reason: context_window, models: [ctxfb]}
`)
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"primary","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "ctx-1")
		if w.Code != 200 || w.Header().Get("X-Switchyard-Model") != "ctxfb" {
			t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
		}
		if e := auditOf(t, n, "ctx-1"); e.FallbackReason != "context_window" || strings.Contains(timeline(e), "C:") {
			t.Fatalf("reason %q timeline %s", e.FallbackReason, timeline(e))
		}
	})
	t.Run("mixed takes general", func(t *testing.T) {
		n, _ := scriptedNode(t, map[string][]int{"up-a": {413}, "up-b": {503, 400}}, `
  fallbacks:
    - {primary: primary, reason: general, models: [fb1]}
    - {primary: primary, reason: context_window, models: [ctxfb]}
`)
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"primary","messages":[{"role":"user","content":"hi"}]}`)
		if w.Header().Get("X-Switchyard-Model") != "fb1" {
			t.Fatalf("mixed failures must take the general chain: %v %s", w.Header(), w.Body)
		}
	})
	t.Run("missing chain falls to global", func(t *testing.T) {
		n, _ := scriptedNode(t, map[string][]int{"up-a": {413}, "up-b": {413}}, `
  fallback_models: [global]
  fallbacks:
    - {primary: primary, reason: general, models: [fb1]}
`)
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"primary","messages":[{"role":"user","content":"hi"}]}`)
		if w.Header().Get("X-Switchyard-Model") != "global" {
			t.Fatalf("a missing context_window chain must fall to the global list: %v %s", w.Header(), w.Body)
		}
	})
	t.Run("everything fails: last upstream error", func(t *testing.T) {
		n, _ := scriptedNode(t, map[string][]int{"up-a": {400}, "up-b": {400}}, "")
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"primary","messages":[{"role":"user","content":"hi"}]}`)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "Invalid parameter") || w.Header().Get("X-Switchyard-Attempts") != "2" {
			t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
		}
	})
}

// TestMidStreamFailure: once a byte reached the client there is no
// failover; the stream ends with an error event and the attempt is recorded.
func TestMidStreamFailure(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"partial"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		// cut the connection mid-stream
		hj, ok := w.(http.Hijacker)
		if !ok {
			return
		}
		conn, _, _ := hj.Hijack()
		conn.Close()
	}))
	defer up.Close()
	n := newTestNode(t, `
providers: [{name: up, kind: openai, base_url: "`+up.URL+`/v1", api_key: "k"}, {name: sim, kind: simulated}]
deployments: [{id: broken, model: m, provider: up}, {id: backup, model: fb, provider: sim}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
routing: {fallbacks: [{primary: m, models: [fb]}]}
`)
	gw := httptest.NewServer(n.Handler())
	defer gw.Close()
	req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("X-Request-Id", "mid-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := string(b)
	if !strings.Contains(s, "partial") || !strings.Contains(s, `"error"`) || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Fatalf("stream must carry the partial answer, then an error event: %q", s)
	}
	if strings.Contains(s, "sim token") {
		t.Fatalf("failed over after the first byte: %q", s)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		if es, _ := n.Audit.Lookup(context.Background(), "mid-1"); len(es) > 0 {
			e := es[0]
			if len(e.Attempts) != 1 || e.Attempts[0].Class == "ok" || !strings.Contains(e.Error, "after first byte") {
				t.Fatalf("mid-stream failure not recorded: %+v", e)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no audit entry")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUpstreamTimeoutIsTimeToFirstByte: server.upstream_timeout bounds the
// wait for the first byte; a long body after prompt headers is not cut.
func TestUpstreamTimeoutIsTimeToFirstByte(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "chat") && r.Header.Get("X-Never") == "" {
			var body struct{ Model string }
			_ = json.NewDecoder(r.Body).Decode(&body)
			if body.Model == "hang" {
				time.Sleep(400 * time.Millisecond) // no headers within the timeout
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			time.Sleep(400 * time.Millisecond) // a long generation after the first byte
			fmt.Fprint(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"slow but fine"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}}`)
		}
	}))
	defer up.Close()
	n := newTestNode(t, `
server: {upstream_timeout: 150ms}
providers: [{name: up, kind: openai, base_url: "`+up.URL+`/v1", api_key: "k"}]
deployments: [{id: slowbody, model: m, provider: up}, {id: hang, model: h, provider: up, upstream_model: hang}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
routing: {max_attempts: {chat: {sync: 1}}}
`)
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "slow but fine") {
		t.Fatalf("a body slower than upstream_timeout after the first byte was cut: %d %s", w.Code, w.Body)
	}
	w = do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"h","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "hang-1")
	if w.Code != 504 && w.Code != 502 {
		t.Fatalf("no first byte within upstream_timeout must fail: %d %s", w.Code, w.Body)
	}
	if e := auditOf(t, n, "hang-1"); len(e.Attempts) != 1 || e.Attempts[0].Class != "timeout" {
		t.Fatalf("attempt must be classed timeout: %+v", e.Attempts)
	}
}

// TestSessionPinSurvivesAFailover: a session pinned to a deployment keeps
// its pin when a request fails over from it without the deployment
// entering cooldown (one 500 of failures_before_cooldown 3): SPEC 8
// releases a pin only when its deployment enters cooldown. Before, the
// gateway pinned whatever served, so one transient error moved the session
// (and its warm prompt cache) for good.
func TestSessionPinSurvivesAFailover(t *testing.T) {
	n, up := scriptedNode(t, map[string][]int{}, "")
	ask := func(id string) *httptest.ResponseRecorder {
		t.Helper()
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"primary","messages":[{"role":"user","content":"hi"}]}`,
			"X-Request-Id", id, "X-Session-Id", "sess-1")
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", id, w.Code, w.Body)
		}
		return w
	}
	pinned := ask("r1").Header().Get("X-Switchyard-Deployment")
	other := map[string]string{"A": "B", "B": "A"}[pinned]
	if other == "" {
		t.Fatalf("served by %q", pinned)
	}
	up.mu.Lock()
	up.scripts["up-"+strings.ToLower(pinned)] = []int{200, 500, 200} // its next call fails once
	up.mu.Unlock()
	if w := ask("r2"); w.Header().Get("X-Switchyard-Deployment") != other {
		t.Fatalf("r2 served by %s, want the failover to %s (timeline %s)", w.Header().Get("X-Switchyard-Deployment"), other, timeline(auditOf(t, n, "r2")))
	}
	if got := ask("r3").Header().Get("X-Switchyard-Deployment"); got != pinned {
		t.Fatalf("r3 served by %s: the session lost its pin to %s after one transient failure", got, pinned)
	}
}
