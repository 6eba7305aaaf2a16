package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SPEC 18 through the pipeline, node-local: a repeat is answered from the
// cache without an upstream call, in the client's own format and mode,
// with a fresh id; the directives, the team switch and team scoping hold;
// a hit is charged no tokens.
func TestResponseCacheThroughThePipeline(t *testing.T) {
	fc, up := newFakeChat(t)
	calls := &fc.calls
	n := cacheNode(t, up.URL, ", price: {input: 1000, output: 1000}", `  - {name: a, keys: ["sk-a"], models: ["*"], tpm: 100000}
  - {name: b, keys: ["sk-b"], models: ["*"]}
  - {name: off, keys: ["sk-off"], models: ["*"], cache: {enabled: false}}`)
	chat := `{"model":"m","messages":[{"role":"user","content":"what is it?"}]}`
	post := func(path, key, body string, hdr ...string) *httptest.ResponseRecorder {
		return do(t, n.Handler(), "POST", path, key, body, hdr...)
	}
	w := post("/v1/chat/completions", "sk-a", chat)
	if w.Code != 200 || w.Header().Get("X-Switchyard-Cache") != "miss" || calls.Load() != 1 {
		t.Fatalf("first: %d cache=%q calls=%d", w.Code, w.Header().Get("X-Switchyard-Cache"), calls.Load())
	}
	// the same request, keys reordered and spaced: a hit, no upstream call
	w = post("/v1/chat/completions", "sk-a", `{ "messages":[{"content":"what is it?","role":"user"}], "model":"m" }`, "X-Request-Id", "hit-1")
	var got struct {
		ID      string
		Choices []struct{ Message struct{ Content string } }
	}
	_ = json.Unmarshal(w.Body.Bytes(), &got)
	if w.Code != 200 || w.Header().Get("X-Switchyard-Cache") != "hit" || w.Header().Get("X-Switchyard-Attempts") != "0" ||
		w.Header().Get("Age") == "" || calls.Load() != 1 || len(got.Choices) != 1 || got.Choices[0].Message.Content != "the answer" || got.ID == "chatcmpl-up" {
		t.Fatalf("repeat: %d %v calls=%d %s", w.Code, w.Header(), calls.Load(), w.Body)
	}
	if es, _ := n.Audit.Lookup(t.Context(), "hit-1"); len(es) != 1 || !es[0].Cached || es[0].SavedUSD <= 0 {
		t.Fatalf("hit audit %+v", es)
	}
	// the same conversation as an Anthropic stream: a hit, replayed as events
	post("/v1/chat/completions", "sk-a", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"across formats"}]}`)
	c0 := calls.Load()
	w = post("/v1/messages", "sk-a", `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"across formats"}]}`)
	if w.Header().Get("X-Switchyard-Cache") != "hit" || calls.Load() != c0 || !strings.Contains(w.Body.String(), "event: message_stop") ||
		!strings.Contains(w.Body.String(), "the answer") {
		t.Fatalf("an Anthropic stream of an entry an OpenAI sync answer stored: cache=%q %s", w.Header().Get("X-Switchyard-Cache"), w.Body)
	}
	// a stream stores its answer once complete; a sync client replays it
	post("/v1/chat/completions", "sk-a", `{"model":"m","stream":true,"messages":[{"role":"user","content":"stream it"}]}`)
	c0 = calls.Load()
	w = post("/v1/chat/completions", "sk-a", `{"model":"m","messages":[{"role":"user","content":"stream it"}]}`)
	if w.Header().Get("X-Switchyard-Cache") != "hit" || calls.Load() != c0 || !strings.Contains(w.Body.String(), `"streamed answer"`) {
		t.Fatalf("a sync replay of a stored stream: cache=%q %s", w.Header().Get("X-Switchyard-Cache"), w.Body)
	}
	// another team never shares the entry; a team with the cache off gets no header
	if w = post("/v1/chat/completions", "sk-b", chat); w.Header().Get("X-Switchyard-Cache") != "miss" || calls.Load() < 2 {
		t.Fatalf("team b: cache=%q calls=%d", w.Header().Get("X-Switchyard-Cache"), calls.Load())
	}
	before := calls.Load()
	if w = post("/v1/chat/completions", "sk-off", chat); w.Header().Get("X-Switchyard-Cache") != "" || calls.Load() != before+1 {
		t.Fatalf("cache off: cache=%q", w.Header().Get("X-Switchyard-Cache"))
	}
	// directives
	before = calls.Load()
	if w = post("/v1/chat/completions", "sk-a", chat, "Cache-Control", "no-store"); w.Header().Get("X-Switchyard-Cache") != "bypass" || calls.Load() != before+1 {
		t.Fatalf("no-store: cache=%q", w.Header().Get("X-Switchyard-Cache"))
	}
	if w = post("/v1/chat/completions", "sk-a", chat, "Cache-Control", "no-cache"); w.Header().Get("X-Switchyard-Cache") != "miss" || calls.Load() != before+2 {
		t.Fatalf("no-cache: cache=%q", w.Header().Get("X-Switchyard-Cache"))
	}
	w = post("/v1/chat/completions", "sk-a", `{"model":"m","messages":[{"role":"user","content":"never asked"}]}`, "Cache-Control", "only-if-cached")
	if w.Code != http.StatusGatewayTimeout || !strings.Contains(w.Body.String(), "cache_miss") || calls.Load() != before+2 {
		t.Fatalf("only-if-cached miss: %d %s", w.Code, w.Body)
	}
	// a hit is charged no tokens
	u0, _ := n.Edge.Usage(t.Context(), n.Catalog.Load().Team("a"))
	post("/v1/chat/completions", "sk-a", chat)
	u1, _ := n.Edge.Usage(t.Context(), n.Catalog.Load().Team("a"))
	if u1.TPMUsed > u0.TPMUsed {
		t.Fatalf("a hit was charged tokens: %d -> %d", u0.TPMUsed, u1.TPMUsed)
	}
}

// DELETE /admin/cache purges a team's entries; GET /admin/cache/stats counts.
func TestCacheAdmin(t *testing.T) {
	n := newTestNode(t, "admin: {key: adm}\ncache: {enabled: true}\n"+simYAML)
	chat := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, chat)
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, chat); w.Header().Get("X-Switchyard-Cache") != "hit" {
		t.Fatalf("no hit: %v", w.Header())
	}
	w := do(t, n.Handler(), "GET", "/admin/cache/stats", "adm", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"entries":1`) || !strings.Contains(w.Body.String(), `"hits":1`) {
		t.Fatalf("stats: %d %s", w.Code, w.Body)
	}
	if m := do(t, n.Handler(), "GET", "/metrics", "", ""); !strings.Contains(m.Body.String(), "switchyard_cache_bytes ") ||
		strings.Contains(m.Body.String(), "switchyard_cache_bytes 0\n") || !strings.Contains(m.Body.String(), `switchyard_cache_requests_total{model="m",result="hit"} 1`) {
		t.Fatalf("cache metrics missing: %s", m.Body)
	}
	if w = do(t, n.Handler(), "DELETE", "/admin/cache?team=t", "adm", ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"removed":1`) {
		t.Fatalf("purge: %d %s", w.Code, w.Body)
	}
	if w = do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, chat); w.Header().Get("X-Switchyard-Cache") != "miss" {
		t.Fatalf("after the purge: %v", w.Header())
	}
	if w = do(t, n.Handler(), "DELETE", "/admin/cache?model=m", "adm", ""); w.Code != 400 {
		t.Fatalf("model without team: %d", w.Code)
	}
}

// SPEC 18 coalescing on one node: identical requests that arrive while the
// first is in flight follow its answer (X-Switchyard-Cache: coalesced, or
// hit once it is stored) instead of calling the upstream again; a leader
// that fails releases them to go on alone.
func TestCoalescedFollowersMakeOneUpstreamCall(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	fail := atomic.Bool{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-release
		if fail.Load() {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"message":"no","type":"invalid_request_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"once"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	defer up.Close()
	n := cacheNode(t, up.URL, "", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	for _, failing := range []bool{false, true} {
		fail.Store(failing)
		calls.Store(0)
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"herd %v"}]}`, failing)
		results := make(chan string, 8)
		codes := make(chan int, 8)
		for range 8 {
			go func() {
				w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", body)
				codes <- w.Code
				results <- w.Header().Get("X-Switchyard-Cache")
			}()
		}
		for calls.Load() == 0 {
			time.Sleep(time.Millisecond) // the leader reached the upstream
		}
		time.Sleep(50 * time.Millisecond) // let the others attach (a late one is a hit: no call either)
		close(release)
		got := map[string]int{}
		for range 8 {
			<-codes
			got[<-results]++
		}
		release = make(chan struct{})
		if !failing && (calls.Load() != 1 || got["miss"] != 1 || got["coalesced"]+got["hit"] != 7) {
			t.Fatalf("8 identical requests made %d upstream calls; cache headers %v", calls.Load(), got)
		}
		if failing && calls.Load() < 2 {
			t.Fatalf("a failed leader's followers did not go on alone: %d calls, %v", calls.Load(), got)
		}
		// and each that did is counted, by where its leader ran and why
		m := do(t, n.Handler(), "GET", "/metrics", "", "").Body.String()
		alone := regexp.MustCompile(`switchyard_cache_followers_alone_total\{reason="leader_failed",where="node"\} (\d+)`).FindStringSubmatch(m)
		switch {
		case !failing && alone != nil:
			t.Fatalf("followers of a leader that answered counted alone: %s", alone[0])
		case failing && (alone == nil || alone[1] == "0"):
			t.Fatalf("followers released by a failed leader not counted: %v", alone)
		}
	}
}

// Streaming followers get the leader's stream event by event, each in its
// own format (SPEC 18): one upstream call for an OpenAI stream leader and
// OpenAI and Anthropic stream followers.
func TestCoalescedStreamFollowers(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"first "}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"second"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	n := cacheNode(t, up.URL, "", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	type answer struct {
		cache, body string
	}
	out := make(chan answer, 4)
	send := func(path, body string) {
		w := do(t, n.Handler(), "POST", path, "sk-a", body)
		out <- answer{w.Header().Get("X-Switchyard-Cache"), w.Body.String()}
	}
	go send("/v1/chat/completions", `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"herd"}]}`)
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	go send("/v1/chat/completions", `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"herd"}]}`)
	go send("/v1/messages", `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"herd"}]}`)
	go send("/v1/responses", `{"model":"m","max_output_tokens":64,"stream":true,"input":"herd"}`)
	time.Sleep(50 * time.Millisecond) // the followers attach while the leader waits mid-stream
	close(release)
	got := map[string]int{}
	for range 4 {
		a := <-out
		got[a.cache]++
		if !strings.Contains(a.body, "second") || !(strings.Contains(a.body, "[DONE]") || strings.Contains(a.body, "message_stop") || strings.Contains(a.body, "response.completed")) {
			t.Fatalf("%s answer incomplete: %s", a.cache, a.body)
		}
	}
	if calls.Load() != 1 || got["miss"] != 1 || got["coalesced"]+got["hit"] != 3 {
		t.Fatalf("%d upstream calls, cache headers %v", calls.Load(), got)
	}
}

// fakeChat is an OpenAI-compatible upstream: "the answer" to a sync
// request, "streamed answer" in chunks with a usage chunk to a stream; it
// counts its calls and keeps the last body it received.
type fakeChat struct {
	calls atomic.Int64
	mu    sync.Mutex
	last  string
}

func newFakeChat(t *testing.T) (*fakeChat, *httptest.Server) {
	f := &fakeChat{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.last = string(b)
		f.mu.Unlock()
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"streamed "}}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"answer"},"finish_reason":"stop"}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-up","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"the answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	}))
	t.Cleanup(up.Close)
	return f, up
}

// lastBody is the body of the upstream's last call.
func (f *fakeChat) lastBody() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// cacheNode is a node with the cache on, one OpenAI-compatible deployment d
// of model m on upstream (with the price fields in price), and teams.
func cacheNode(t *testing.T, upstream, price, teams string) *Node {
	t.Helper()
	return newTestNode(t, cacheYAML(upstream, price, teams))
}

// cacheYAML is cacheNode's configuration.
func cacheYAML(upstream, price, teams string) string {
	return `
cache: {enabled: true}
providers:
  - {name: up, kind: openai, base_url: "` + upstream + `/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up` + price + `}
teams:
` + teams + "\n"
}
