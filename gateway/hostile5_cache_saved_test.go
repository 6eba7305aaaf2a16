package gateway

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// What a hit saved is what the answer it replays cost (SPEC 18: "the tokens
// and cost it saved"; SPEC 10.2: uncached input x input + cached input x
// cached_input + output x output). An answer whose prompt was mostly read
// from the provider's prompt cache cost far less than its prompt priced
// whole at input: the hit's saved USD was that larger figure.
func TestHostile5HitSavesWhatTheAnswerCost(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-up","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1000,"completion_tokens":10,"total_tokens":1010,"prompt_tokens_details":{"cached_tokens":800}}}`)
	}))
	defer up.Close()
	n := cacheNode(t, up.URL, ", price: {input: 10, cached_input: 1, output: 10}", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	chat := `{"model":"m","messages":[{"role":"user","content":"a long shared prefix"}]}`
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", chat, "X-Request-Id", "miss-1"); w.Header().Get("X-Switchyard-Cache") != "miss" {
		t.Fatalf("first: %d %v", w.Code, w.Header())
	}
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", chat, "X-Request-Id", "hit-1"); w.Header().Get("X-Switchyard-Cache") != "hit" || calls.Load() != 1 {
		t.Fatalf("repeat: %v calls=%d", w.Header(), calls.Load())
	}
	miss, _ := n.Audit.Lookup(t.Context(), "miss-1")
	hit, _ := n.Audit.Lookup(t.Context(), "hit-1")
	if len(miss) != 1 || len(hit) != 1 {
		t.Fatalf("audit: %d %d", len(miss), len(hit))
	}
	want := (200*10 + 800*1 + 10*10) / 1e6 // 0.0029
	if math.Abs(miss[0].CostUSD-want) > 1e-12 {
		t.Fatalf("the miss cost %v, want %v", miss[0].CostUSD, want)
	}
	if !hit[0].Cached || math.Abs(hit[0].SavedUSD-want) > 1e-12 {
		t.Fatalf("the hit saved %v USD, but the answer it replays cost %v", hit[0].SavedUSD, want)
	}
}
