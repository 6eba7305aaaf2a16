package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"switchyard/edge"
)

// releaseWatch is the node's edge state, noting the Releases it is asked
// for with a context that has already ended.
type releaseWatch struct {
	edge.State
	calls, dead atomic.Int32
}

func (r *releaseWatch) Release(ctx context.Context, b *edge.Begun) {
	r.calls.Add(1)
	if ctx.Err() != nil {
		r.dead.Add(1)
	}
	r.State.Release(ctx, b)
}

// The slot was released with the request's own context, which on the
// request-timeout path has already expired: the Redis edge bounds its ZREM
// by that context, so the release failed at once and waited for the
// background writer, and the client that got its 504 and sent its next
// request at once (max_parallel: 1) could find its slot still held (SPEC 3:
// "a release is visible to the very next admission").
func TestHostile4PathReleaseOutlivesRequestDeadline(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done() // never answers
	}))
	defer up.Close()
	n := newTestNode(t, strings.ReplaceAll(`
server: {upstream_timeout: 5s, request_timeout: 200ms}
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"], max_parallel: 1}
`, "${UPSTREAM}", up.URL))
	watch := &releaseWatch{State: n.Edge}
	n.Edge = watch
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, body)
		if w.Code != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504: %s", w.Code, w.Body)
		}
	}
	if watch.calls.Load() == 0 || watch.dead.Load() != 0 {
		t.Fatalf("%d of %d slot releases were given a context that had already ended", watch.dead.Load(), watch.calls.Load())
	}
}
