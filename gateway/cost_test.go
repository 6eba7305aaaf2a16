package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// costUpstream answers OpenAI chat (sync and stream) and Anthropic
// messages with usage that has cached and cache-write input, as each
// provider documents it.
func costUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,`+
				`"usage":{"input_tokens":100,"cache_creation_input_tokens":400,"cache_read_input_tokens":1000,"output_tokens":50}}`)
		case strings.Contains(string(body), `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-up\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n"+
				"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-up\",\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":300,\"total_tokens\":2300,\"prompt_tokens_details\":{\"cached_tokens\":1536}}}\n\n"+
				"data: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-up","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":2000,"completion_tokens":300,"total_tokens":2300,"prompt_tokens_details":{"cached_tokens":1536},"completion_tokens_details":{"reasoning_tokens":100}}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCostHeaderAndAudit: a sync answer carries X-Switchyard-Cost-Usd, the
// exact cost of its usage with cached and cache-write input at their own
// prices, and its audit entry carries the cached tokens and that cost; a
// client of the other format sees the usage in its own convention
// (SPEC 10.2, 12.2, 12.3).
func TestCostHeaderAndAudit(t *testing.T) {
	up := costUpstream(t)
	n := newTestNode(t, `
providers:
  - {name: oa, kind: openai, base_url: "`+up.URL+`/v1", api_key: k}
  - {name: ant, kind: anthropic, base_url: "`+up.URL+`/v1", api_key: k}
deployments:
  - {id: gpt, model: gpt, provider: oa, price: {input: 2.5, output: 10, cached_input: 1.25}}
  - {id: claude, model: claude, provider: ant, price: {input: 3, output: 15, cached_input: 0.3, cache_write: 3.75}}
  - {id: claude-plain, model: claude-plain, provider: ant, upstream_model: claude-up, price: {input: 3, output: 15}}
  - {id: free, model: free, provider: oa}
teams:
  - {name: t, keys: ["`+testKey+`"], models: ["*"]}
`)
	for _, tc := range []struct {
		name, path, body   string
		header             string
		cost               float64
		cached, cacheWrite int
		usage              string // a fragment of the client's body
	}{
		// (464 x 2.5 + 1536 x 1.25 + 300 x 10) / 1e6
		{"openai", "/v1/chat/completions", `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`,
			"0.00608", 0.00608, 1536, 0, `"prompt_tokens_details":{"cached_tokens":1536}`},
		// an Anthropic client of an OpenAI deployment: input_tokens without the cached tokens
		{"anthropic client of openai", "/v1/messages", `{"model":"gpt","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			"0.00608", 0.00608, 1536, 0, `"usage":{"input_tokens":464,"cache_read_input_tokens":1536,"output_tokens":300}`},
		// (100 x 3 + 1000 x 0.3 + 400 x 3.75 + 50 x 15) / 1e6
		{"openai client of anthropic", "/v1/chat/completions", `{"model":"claude","messages":[{"role":"user","content":"hi"}]}`,
			"0.00285", 0.00285, 1000, 400, `"usage":{"prompt_tokens":1500,"completion_tokens":50,"total_tokens":1550,"prompt_tokens_details":{"cached_tokens":1000}}`},
		// no cache prices: every input token at input
		{"anthropic, plain price", "/v1/messages", `{"model":"claude-plain","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			"0.00525", 0.00525, 1000, 400, `"cache_read_input_tokens":1000`},
		{"responses client of anthropic", "/v1/responses", `{"model":"claude","input":"hi","store":false}`,
			"0.00285", 0.00285, 1000, 400, `"input_tokens":1500,"input_tokens_details":{"cached_tokens":1000}`},
		{"no price", "/v1/chat/completions", `{"model":"free","messages":[{"role":"user","content":"hi"}]}`,
			"0", 0, 1536, 0, `"cached_tokens":1536`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "cost-" + strings.ReplaceAll(tc.name, " ", "-")
			w := do(t, n.Handler(), "POST", tc.path, testKey, tc.body, "X-Request-Id", id, "anthropic-version", "2023-06-01")
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if got := w.Header().Get("X-Switchyard-Cost-Usd"); got != tc.header {
				t.Errorf("X-Switchyard-Cost-Usd %q, want %q", got, tc.header)
			}
			if !strings.Contains(w.Body.String(), tc.usage) {
				t.Errorf("client usage lacks %s: %s", tc.usage, w.Body)
			}
			e := auditOf(t, n, id)
			if e.CachedTokens != tc.cached || e.CacheWriteTokens != tc.cacheWrite || math.Abs(e.CostUSD-tc.cost) > 1e-12 {
				t.Errorf("audit cached %d write %d cost %v, want %d %d %v", e.CachedTokens, e.CacheWriteTokens, e.CostUSD, tc.cached, tc.cacheWrite, tc.cost)
			}
			var line map[string]any
			if err := json.Unmarshal(e.AppendJSON(nil), &line); err != nil || line["cached_tokens"] != float64(tc.cached) {
				t.Errorf("audit JSON %v: %v", line["cached_tokens"], err)
			}
		})
	}

	// a stream carries no cost header (its usage comes after the headers);
	// its audit entry has the cost all the same
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "cost-stream")
	if w.Code != 200 || w.Header().Get("X-Switchyard-Cost-Usd") != "" {
		t.Fatalf("stream: %d cost header %q", w.Code, w.Header().Get("X-Switchyard-Cost-Usd"))
	}
	if e := auditOf(t, n, "cost-stream"); e.CachedTokens != 1536 || math.Abs(e.CostUSD-0.00608) > 1e-12 {
		t.Fatalf("stream audit: cached %d cost %v", e.CachedTokens, e.CostUSD)
	}
}

func TestHeaderUSD(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 0.0042: "0.0042", 12.5: "12.5", 3e-7: "0.0000003", 1e-11: "0", 1234567.25: "1234567.25", 2.5e21: "2500000000000000000000",
	} {
		var h headerBatch
		h.usd("X", v)
		hdr := http.Header{}
		h.flush(hdr)
		if got := hdr.Get("X"); got != want {
			t.Errorf("%v: %q, want %q", v, got, want)
		}
	}
}

// TestAdminDeploymentCachePrices: the admin API body takes cached_input and
// cache_write by their YAML names, refuses a negative one, and the new
// prices apply to the next answer at once.
func TestAdminDeploymentCachePrices(t *testing.T) {
	n := adminNode(t, nil)
	if w := adm(t, n, "PUT", "/admin/deployments/cp1", `{"model":"cp","provider":"sim","price":{"input":1,"output":1,"cached_input":-1}}`); w.Code != 422 || !strings.Contains(w.Body.String(), "cached_input") {
		t.Fatalf("negative cached_input: %d %s", w.Code, w.Body)
	}
	if w := adm(t, n, "PUT", "/admin/deployments/cp1", `{"model":"cp","provider":"sim","price":{"input":1,"output":2,"cached_input":0.1,"cache_write":1.25}}`); w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	w := adm(t, n, "GET", "/admin/deployments", "")
	if !strings.Contains(w.Body.String(), `"price":{"input":1,"output":2,"cached_input":0.1,"cache_write":1.25}`) {
		t.Fatalf("list: %s", w.Body)
	}
	d := n.Catalog.Load().Deployments["cp1"]
	if got := d.Cost(1000, 500, 100, 10); math.Abs(got-(400*1+500*0.1+100*1.25+10*2)/1e6) > 1e-15 {
		t.Fatalf("cost at the admin prices %v", got)
	}
}
