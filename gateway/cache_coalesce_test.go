package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/cache"
	"switchyard/catalog"
	"switchyard/config"
	"switchyard/edge"
	"switchyard/telemetry"
	"switchyard/wire"
)

// followEdge is the local edge state made to answer like a node whose
// Begin found another node's lease (SPEC 18): with follow set, a request
// that asks for the lease follows it, and Await answers entry or err. It
// records what the pipeline asked and how requests ended.
type followEdge struct {
	*edge.Local
	follow bool
	entry  string
	err    error

	mu     sync.Mutex
	asked  []edge.PinQuery
	ended  []edge.Outcome
	awaits int
}

func (f *followEdge) Begin(ctx context.Context, q *edge.Request) (edge.Begun, error) {
	b, err := f.Local.Begin(ctx, q)
	f.mu.Lock()
	f.asked = append(f.asked, q.Pins)
	f.mu.Unlock()
	if f.follow && q.Pins.Coalesce {
		b.Coalesce = edge.CoalesceFollow
	}
	return b, err
}

func (f *followEdge) Await(ctx context.Context, b *edge.Begun) (string, error) {
	f.mu.Lock()
	f.awaits++
	f.mu.Unlock()
	return f.entry, f.err
}

func (f *followEdge) Finish(b *edge.Begun, o *edge.Outcome) {
	f.mu.Lock()
	f.ended = append(f.ended, *o)
	f.mu.Unlock()
	f.Local.Finish(b, o)
}

func (f *followEdge) last() (edge.PinQuery, edge.Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[len(f.asked)-1], f.ended[len(f.ended)-1]
}

// followNode is cacheNode's node on a followEdge, with the cache section
// cacheSection.
func followNode(t *testing.T, upstream string, f *followEdge, cacheSection string) *Node {
	t.Helper()
	return edgeNode(t, cacheSection+`
providers:
  - {name: up, kind: openai, base_url: "`+upstream+`/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up, price: {input: 1000, output: 1000}}
teams:
  - {name: a, keys: ["sk-a"], models: ["*"], tpm: 100000}
`, func(ring *telemetry.Ring) edge.State { f.Local = edge.NewLocal(nil, ring); return f })
}

// edgeNode assembles the configuration yml on the edge state mk makes
// (given the node's audit ring), for tests that script the edge.
func edgeNode(t *testing.T, yml string, mk func(*telemetry.Ring) edge.State) *Node {
	t.Helper()
	cfg, err := config.Load([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = ""
	ring := telemetry.NewRing(100)
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1, Edge: mk(ring), Audit: ring})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// storedEntry is the encoded entry another node stored for answer.
func storedEntry(t *testing.T, answer string) string {
	t.Helper()
	body := `{"id":"x","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"` + answer +
		`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`
	e, err := cache.FromBody(catalog.OpChat, wire.FormatOpenAI, []byte(body), cache.Meta{Model: "m", Deployment: "d", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Encode(nil))
}

// SPEC 18 across nodes, the gateway's part: a request whose Begin found
// another node's lease does not call the upstream; the entry Await brings
// is served as a coalesced answer in the client's format and mode (sync
// and stream), accounted like a hit (metrics, audit, no charge); a leader
// that failed releases it to call the upstream itself. The pipeline asks
// for the lease only when the request may read and call an upstream.
func TestCrossNodeFollower(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"own call"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	}))
	defer up.Close()
	f := &followEdge{follow: true, entry: storedEntry(t, "the leader's answer")}
	n := followNode(t, up.URL, f, "cache: {enabled: true}")
	chat := `{"model":"m","messages":[{"role":"user","content":"herd"}]}`

	w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", chat, "X-Request-Id", "follow-1")
	if w.Code != 200 || w.Header().Get("X-Switchyard-Cache") != "coalesced" || w.Header().Get("X-Switchyard-Attempts") != "0" ||
		!strings.Contains(w.Body.String(), "the leader's answer") || calls.Load() != 0 {
		t.Fatalf("follower: %d %v calls=%d %s", w.Code, w.Header(), calls.Load(), w.Body)
	}
	q, o := f.last()
	if !q.Coalesce || q.Cache[0] == "" || !o.Cached || o.Served || o.CacheKey != "" {
		t.Fatalf("follower asked %+v, ended %+v: want the lease asked for, accounted as cached, nothing stored", q, o)
	}
	if es, _ := n.Audit.Lookup(t.Context(), "follow-1"); len(es) != 1 || !es[0].Cached || es[0].SavedUSD <= 0 {
		t.Fatalf("follower audit %+v", es)
	}
	if m := do(t, n.Handler(), "GET", "/metrics", "", ""); !strings.Contains(m.Body.String(), `switchyard_cache_requests_total{model="m",result="coalesced"} 1`) {
		t.Fatalf("coalesced not counted: %s", m.Body)
	}
	// an Anthropic stream follower replays the entry as events
	w = do(t, n.Handler(), "POST", "/v1/messages", "sk-a", `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"herd"}]}`)
	if w.Header().Get("X-Switchyard-Cache") != "coalesced" || !strings.Contains(w.Body.String(), "event: message_stop") || calls.Load() != 0 {
		t.Fatalf("stream follower: %v %s", w.Header(), w.Body)
	}

	// the leader failed: the follower calls the upstream itself, once
	f.entry, f.err = "", edge.ErrLeaderFailed
	w = do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", `{"model":"m","messages":[{"role":"user","content":"released"}]}`)
	if w.Code != 200 || w.Header().Get("X-Switchyard-Cache") != "miss" || !strings.Contains(w.Body.String(), "own call") || calls.Load() != 1 {
		t.Fatalf("released follower: %d %v calls=%d", w.Code, w.Header(), calls.Load())
	}
	if m := do(t, n.Handler(), "GET", "/metrics", "", ""); !strings.Contains(m.Body.String(), `switchyard_cache_followers_alone_total{reason="leader_failed",where="cluster"} 1`) {
		t.Fatalf("the released follower not counted alone: %s", m.Body)
	}
	// and, leading no lease, it still stores its answer for everyone
	if _, o := f.last(); o.CacheKey == "" {
		t.Fatal("a released follower did not store its answer")
	}

	// directives that forbid reading or calling an upstream ask for no lease
	before := f.awaits
	for _, cc := range []string{"only-if-cached", "no-cache", "no-store"} {
		do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", chat, "Cache-Control", cc)
		if q, _ := f.last(); q.Coalesce {
			t.Fatalf("Cache-Control %s asked for the lease", cc)
		}
	}
	if f.awaits != before {
		t.Fatal("a request that asked for no lease waited for one")
	}
}

// A leader (the edge said lead) stores its answer under the entry it
// leased, so its Finish ends the lease with the entry and wakes the
// followers; with coalescing off no lease is asked for.
func TestCrossNodeLeaderStoresLeasedEntry(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"led"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	}))
	defer up.Close()
	f := &followEdge{}
	n := followNode(t, up.URL, f, "cache: {enabled: true}")
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", `{"model":"m","messages":[{"role":"user","content":"lead"}]}`)
	q, o := f.last()
	if w.Header().Get("X-Switchyard-Cache") != "miss" || !q.Coalesce || o.CacheKey != q.Cache[0] || len(o.CacheValue) == 0 {
		t.Fatalf("leader: asked %+v, stored under %q", q, o.CacheKey)
	}

	off := &followEdge{follow: true}
	n = followNode(t, up.URL, off, "cache: {enabled: true, coalesce: false}")
	do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", `{"model":"m","messages":[{"role":"user","content":"off"}]}`)
	if q, _ := off.last(); q.Coalesce || off.awaits != 0 {
		t.Fatal("coalescing off asked for a lease")
	}
}
