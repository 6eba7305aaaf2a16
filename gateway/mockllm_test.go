package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/providers"
)

// TestAgainstMockLLM drives the gateway over real HTTP against the mockllm
// server (OpenAI and Anthropic wire formats), as the cluster benchmarks do.
func TestAgainstMockLLM(t *testing.T) {
	mock := httptest.NewServer(providers.MockHandler(config.Simulate{
		TTFB: time.Millisecond, TokensPerSecond: 2000, OutputTokens: 5, ErrorStatus: 503,
		ContextTokens: 50, EmbeddingDims: 4,
	}, 1))
	defer mock.Close()
	n := newTestNode(t, `
admin: {key: admin-secret}
providers: [{name: mock, kind: openai, base_url: "`+mock.URL+`/v1", api_key: "k"}]
deployments:
  - {id: chat-1, model: m, provider: mock, upstream_model: mock-chat}
  - {id: emb-1, model: e, provider: mock, operations: [embeddings]}
teams: [{name: t, keys: ["sk-test"], models: ["*"], rpm: 1000, tpm: 1000000}]
`)
	gw := httptest.NewServer(n.Handler())
	defer gw.Close()
	call := func(path, body string, hdr ...string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", gw.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}

	resp, body := call("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"model":"mock-chat"`) || resp.Header.Get("X-Ratelimit-Remaining-Requests") == "" {
		t.Fatalf("sync: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	resp, body = call("/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"usage"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream with usage asked: %d %s", resp.StatusCode, body)
	}

	resp, body = call("/v1/messages", `{"model":"m","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || !strings.Contains(body, "event: message_start") || !strings.Contains(body, "event: message_stop") {
		t.Fatalf("anthropic client stream over an OpenAI upstream: %d %s", resp.StatusCode, body)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok && !json.Valid([]byte(line)) {
			t.Fatalf("invalid JSON in an Anthropic event: %s", line)
		}
	}

	resp, body = call("/v1/embeddings", `{"model":"e","input":["a","b"]}`)
	if resp.StatusCode != 200 || strings.Count(body, `"embedding":[`) != 2 {
		t.Fatalf("embeddings: %d %s", resp.StatusCode, body)
	}

	// the mock's context limit is 50 tokens: a context_window error, not retried
	long := strings.Repeat("word ", 200)
	resp, body = call("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+long+`"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "context") || resp.Header.Get("X-Switchyard-Attempts") != "1" {
		t.Fatalf("context window: %d %v %s", resp.StatusCode, resp.Header, body)
	}
}

// TestRetryAfterWhenEverythingCools: with every deployment cooling down and
// last resort off, the answer is 503 with the shortest remaining wait.
func TestRetryAfterWhenEverythingCools(t *testing.T) {
	n, _ := scriptedNode(t, map[string][]int{"up-a": {429}, "up-b": {429}}, "  last_resort: false\n  cooldown_base: 30s\n")
	body := `{"model":"primary","messages":[{"role":"user","content":"hi"}]}`
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, body)
	if w.Code != 429 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	w = do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, body)
	if w.Code != 503 || w.Header().Get("X-Switchyard-Attempts") != "0" {
		t.Fatalf("all cooling: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if ra := w.Header().Get("Retry-After"); ra == "" || ra > "30" || ra < "1" {
		t.Fatalf("Retry-After %q, want the shortest remaining cooldown (<= 30s)", ra)
	}
	// /admin/health shows both cooling with their streak state
	h := do(t, n.Handler(), "GET", "/admin/health", "admin-secret", "")
	var health struct {
		Node        string
		Deployments []struct {
			ID      string `json:"id"`
			Cooling bool   `json:"cooling"`
		}
	}
	if err := json.Unmarshal(h.Body.Bytes(), &health); err != nil || len(health.Deployments) == 0 {
		t.Fatalf("admin health: %v %s", err, h.Body)
	}
	cooling := 0
	for _, d := range health.Deployments {
		if (d.ID == "A" || d.ID == "B") && d.Cooling {
			cooling++
		}
	}
	if cooling != 2 {
		t.Fatalf("admin health must show A and B cooling: %s", h.Body)
	}
}
