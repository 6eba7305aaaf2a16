package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDegradedStreamLeaderReleasesFollowers: a coalescing leader whose
// stream is served by a fallback model (degraded: never stored, SPEC 18)
// has nothing its followers may share, so they go on alone at once, not
// when its stream ends. Before, a follower waited for the leader's whole
// stream (or coalesce_wait, 30 s by default) and only then called the
// upstream itself.
func TestDegradedStreamLeaderReleasesFollowers(t *testing.T) {
	var fbCalls atomic.Int64
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		if strings.Contains(string(buf[:n]), `"up-primary"`) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"down","type":"server_error"}}`)
			return
		}
		c := fbCalls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"first "}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		if c == 1 {
			<-release // the leader's stream stays open
		}
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"second"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	defer close(release)
	n := newTestNode(t, `
cache: {enabled: true, coalesce_wait: 30s}
providers:
  - {name: up, kind: openai, base_url: "`+up.URL+`/v1", api_key: k}
deployments:
  - {id: p, model: m, provider: up, upstream_model: up-primary}
  - {id: f, model: fb, provider: up, upstream_model: up-fallback}
routing:
  fallbacks: [{primary: m, reason: general, models: [fb]}]
teams:
  - {name: a, keys: ["sk-a"], models: ["*"]}
`)
	body := `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"degraded herd"}]}`
	out := make(chan *httptest.ResponseRecorder, 2)
	go func() { out <- do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", body) }()
	for fbCalls.Load() == 0 { // the leader streams from the fallback, held mid-way
		time.Sleep(time.Millisecond)
	}
	go func() { out <- do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", body) }()
	select {
	case w := <-out: // the follower, on its own call, while the leader is still held
		if w.Code != 200 || !strings.Contains(w.Body.String(), "second") || w.Header().Get("X-Switchyard-Degraded") != "true" {
			t.Fatalf("follower: %d %v %s", w.Code, w.Header(), w.Body)
		}
		if got := fbCalls.Load(); got != 2 {
			t.Fatalf("%d calls to the fallback, want the leader's and the follower's own", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the follower still waits for a degraded leader's stream after 5 s")
	}
}
