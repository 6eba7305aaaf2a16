package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/cache/shared"
	"switchyard/edge"
	"switchyard/telemetry"
)

// gatedChat is an OpenAI-compatible upstream whose calls block, one by
// one, until the test lets them answer: entered receives each call as it
// arrives, and a value sent on release lets one answer.
type gatedChat struct {
	calls   atomic.Int64
	entered chan int64
	release chan struct{}
}

func newGatedChat(t *testing.T) (*gatedChat, *httptest.Server) {
	t.Helper()
	g := &gatedChat{entered: make(chan int64, 16), release: make(chan struct{})}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := g.calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		g.entered <- n
		select {
		case <-g.release:
		case <-r.Context().Done():
			return
		}
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"call `+fmt.Sprint(n)+`"},"finish_reason":"stop"}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"call `+fmt.Sprint(n)+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	}))
	t.Cleanup(func() {
		close(g.release)
		up.Close()
	})
	return g, up
}

// SPEC 18: DELETE /admin/cache purges the scope's entries; an answer whose
// upstream call began before the purge and that completes after it is an
// entry of before the purge, and must not be readable afterwards (it was
// stored with its completion time, after the purge, so nothing refused
// it).
func TestCachePurgeRefusesAnswerInFlight(t *testing.T) {
	for _, tc := range []struct {
		name, purge string
		stream      bool
	}{
		{"everything sync", "/admin/cache", false},
		{"team sync", "/admin/cache?team=a", false},
		{"team model stream", "/admin/cache?team=a&model=m", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, up := newGatedChat(t)
			n := newTestNode(t, "admin: {key: adm}"+cacheYAML(up.URL, "", `  - {name: a, keys: ["sk-a"], models: ["*"]}`))
			body := `{"model":"m","messages":[{"role":"user","content":"purged in flight"}]`
			if tc.stream {
				body += `,"stream":true`
			}
			body += `}`
			done := make(chan *httptest.ResponseRecorder)
			go func() { done <- do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", body) }()
			<-g.entered // the upstream call began before the purge
			if w := do(t, n.Handler(), "DELETE", tc.purge, "adm", ""); w.Code != 200 {
				t.Fatalf("purge: %d %s", w.Code, w.Body)
			}
			// an entry's stored time is in whole milliseconds: the answer
			// completes in a later one than the purge, as a real upstream
			// call (milliseconds to minutes) does
			for purged := time.Now().UnixMilli(); time.Now().UnixMilli() <= purged; {
				runtime.Gosched()
			}
			g.release <- struct{}{}
			if w := <-done; w.Code != 200 || !strings.Contains(w.Body.String(), "call 1") {
				t.Fatalf("the request in flight: %d %s", w.Code, w.Body)
			}
			go func() { done <- do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", body) }()
			select {
			case <-g.entered:
				g.release <- struct{}{}
				w := <-done
				if w.Header().Get("X-Switchyard-Cache") != "miss" {
					t.Fatalf("after the purge: %v", w.Header())
				}
			case w := <-done:
				t.Fatalf("an answer begun before the purge was served after it: %v %s", w.Header(), w.Body)
			}
		})
	}
}

// SPEC 18: the stats count the entries stored, and a purge resets them for
// its scope. A node's counts not sent yet when the purge came (it sends
// every cacheStatsEvery) must not bring the purged entries back.
func TestCacheStatsEntriesAfterPurge(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	f, up := newFakeChat(t)
	n := newTestNode(t, "admin: {key: adm}"+cacheYAML(up.URL, "", `  - {name: a, keys: ["sk-a"], models: ["*"]}
  - {name: b, keys: ["sk-b"], models: ["*"]}`))
	n.SetCacheShared(shared.New(rdb, shared.Config{Prefix: "sy:"}))
	for _, key := range []string{"sk-a", "sk-b"} {
		if w := do(t, n.Handler(), "POST", "/v1/chat/completions", key, `{"model":"m","messages":[{"role":"user","content":"x"}]}`); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	if f.calls.Load() != 2 {
		t.Fatalf("calls %d", f.calls.Load())
	}
	for _, tc := range []struct {
		purge     string
		a, b, all string
	}{
		{"/admin/cache?team=a", `"entries":0`, `"entries":1`, `"entries":1`},
		{"/admin/cache", `"entries":0`, `"entries":0`, `"entries":0`},
	} {
		if w := do(t, n.Handler(), "DELETE", tc.purge, "adm", ""); w.Code != 200 {
			t.Fatalf("purge %s: %d %s", tc.purge, w.Code, w.Body)
		}
		w := do(t, n.Handler(), "GET", "/admin/cache/stats", "adm", "")
		var v cacheStatsView
		decodeJSON(t, w, &v)
		if !v.Shared {
			t.Fatalf("stats not shared: %s", w.Body)
		}
		got := map[string]int64{"all": v.Entries}
		for _, s := range v.Teams {
			got[s.Team] = s.Entries
		}
		want := map[string]int64{"all": entriesOf(tc.all), "a": entriesOf(tc.a), "b": entriesOf(tc.b)}
		for k, n := range want {
			if got[k] != n {
				t.Fatalf("after %s: entries of %s = %d, want %d (%s)", tc.purge, k, got[k], n, w.Body)
			}
		}
	}
}

func entriesOf(s string) int64 {
	var n int64
	fmt.Sscanf(strings.TrimPrefix(s, `"entries":`), "%d", &n)
	return n
}

// splitEdge follows another node's lease for the first request that asks
// for one and leads for the others; its Await blocks until the wait it is
// given ends (the leader on the other node never answers).
type splitEdge struct {
	*edge.Local
	mu      sync.Mutex
	begun   int
	awaited chan struct{}
}

func (f *splitEdge) Begin(ctx context.Context, q *edge.Request) (edge.Begun, error) {
	b, err := f.Local.Begin(ctx, q)
	f.mu.Lock()
	f.begun++
	first := f.begun == 1
	f.mu.Unlock()
	if q.Pins.Coalesce {
		b.Coalesce = edge.CoalesceLead
		if first {
			b.Coalesce = edge.CoalesceFollow
		}
	}
	return b, err
}

// splitNode is followNode's node on a splitEdge.
func splitNode(t *testing.T, upstream string, f *splitEdge, cacheSection string) *Node {
	t.Helper()
	return edgeNode(t, cacheSection+`
providers:
  - {name: up, kind: openai, base_url: "`+upstream+`/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up}
teams:
  - {name: a, keys: ["sk-a"], models: ["*"]}
`, func(ring *telemetry.Ring) edge.State { f.Local = edge.NewLocal(nil, ring); return f })
}

func (f *splitEdge) Await(ctx context.Context, b *edge.Begun) (string, error) {
	f.awaited <- struct{}{}
	<-ctx.Done()
	return "", ctx.Err()
}

// SPEC 18: a follower waits at most coalesce_wait, then calls the upstream
// itself. One that waited out its whole coalesce_wait for a leader on
// another node must not then start a second coalesce_wait behind a leader
// that began on its own node meanwhile.
func TestCoalesceWaitIsOneBudget(t *testing.T) {
	const wait = time.Second
	g, up := newGatedChat(t)
	f := &splitEdge{awaited: make(chan struct{}, 1)}
	n := splitNode(t, up.URL, f, "cache: {enabled: true, coalesce_wait: 1s}")
	body := `{"model":"m","messages":[{"role":"user","content":"two waits"}]}`
	type res struct {
		w    *httptest.ResponseRecorder
		took time.Duration
	}
	follower := make(chan res, 1)
	start := time.Now()
	go func() {
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", body)
		follower <- res{w, time.Since(start)}
	}()
	<-f.awaited // the follower waits for the other node's leader
	leader := make(chan *httptest.ResponseRecorder, 1)
	go func() { leader <- do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", body) }()
	if c := <-g.entered; c != 1 {
		t.Fatalf("call %d", c)
	}
	// the local leader's call stays in flight; the follower, its
	// coalesce_wait over, must call the upstream itself now
	var own time.Duration
	select {
	case <-g.entered:
		own = time.Since(start)
		g.release <- struct{}{}
	case r := <-follower:
		t.Fatalf("follower answered without calling: %v", r.w.Header())
	}
	g.release <- struct{}{}
	<-leader
	r := <-follower
	if r.w.Code != 200 {
		t.Fatalf("follower: %d %s", r.w.Code, r.w.Body)
	}
	if own > wait+wait/2 {
		t.Fatalf("the follower called the upstream after %v: it waited more than coalesce_wait (%v)", own, wait)
	}
}
