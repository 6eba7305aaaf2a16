package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/providers"
)

// panicAdapter is an adapter with a bug: Do panics, or (midStream) the
// stream's second event does, as a translator meeting an event it does
// not expect would.
type panicAdapter struct {
	providers.Adapter
	midStream bool
}

func (a panicAdapter) Do(ctx context.Context, d *catalog.Deployment, req *providers.Request) (*providers.Response, error) {
	if !a.midStream {
		panic("adapter bug")
	}
	resp, err := a.Adapter.Do(ctx, d, req)
	if err == nil && resp.Stream != nil {
		resp.Stream = &panicStream{EventStream: resp.Stream}
	}
	return resp, err
}

type panicStream struct {
	providers.EventStream
	n int
}

func (s *panicStream) Next() ([]byte, error) {
	if s.n++; s.n == 2 {
		panic("translator bug")
	}
	return s.EventStream.Next()
}

// withPanicAdapter makes the node's provider "sim" a panicAdapter.
func withPanicAdapter(n *Node, midStream bool) {
	lc := *n.Live.Load()
	lc.Adapters = map[string]providers.Adapter{"sim": panicAdapter{Adapter: lc.Adapters["sim"], midStream: midStream}}
	n.Live.p.Store(&lc)
}

const panicYAML = `
server: {read_header_timeout: 1s, read_timeout: 2s, write_timeout: 2s, idle_timeout: 2s, upstream_timeout: 5s, request_timeout: 10s}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 8}}
deployments:
  - {id: d, model: m, provider: sim}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"], max_parallel: 1}
`

// A panic in an attempt (a gateway bug met on some upstream answer) left
// the deployment's in-flight count raised for good (the attempt was never
// Done: least_busy and adaptive shunned it, a probe slot stayed taken),
// and the 500 was in the OpenAI shape on /v1/messages, without the
// X-Request-Id its message tells the client to quote.
func TestHostile4PathPanicBeforeAnswer(t *testing.T) {
	n := newTestNode(t, panicYAML)
	withPanicAdapter(n, false)
	for i := 0; i < 2; i++ { // the slot came back too: a second request is served the same way
		w := do(t, n.Handler(), "POST", "/v1/messages", testKey,
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "req-panic-1")
		if w.Code != http.StatusInternalServerError {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		if !strings.Contains(w.Body.String(), `"type":"error"`) {
			t.Errorf("the 500 on /v1/messages is not in the Anthropic shape: %s", w.Body)
		}
		if got := w.Header().Get("X-Request-Id"); got != "req-panic-1" {
			t.Errorf("X-Request-Id %q on the 500, want the client's id", got)
		}
	}
	if got := n.Router.State("d").InFlight(); got != 0 {
		t.Errorf("deployment in-flight %d after the panicking attempts ended, want 0", got)
	}
}

// A panic after the stream's first event was relayed: gin's recovery wrote
// a bare JSON error after the events and the response ended cleanly, so an
// SDK saw a short answer that looked complete. Now the stream ends with an
// error event in the client's stream format (SPEC 7.1), and the attempt's
// in-flight count is released.
func TestHostile4PathPanicMidStream(t *testing.T) {
	for _, tc := range []struct{ path, body, errEvent string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: {\"error\":"},
		{"/v1/messages", `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "event: error\n"},
	} {
		g := startGateway(t, panicYAML, "")
		withPanicAdapter(g.node, true)
		req, _ := http.NewRequest("POST", "http://"+g.addr+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer sk-test")
		resp, err := (&http.Client{}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil && !strings.Contains(string(b), tc.errEvent) {
			t.Errorf("%s: a stream cut by a panic ended cleanly without an error event: %q", tc.path, b)
		}
		if got := g.node.Router.State("d").InFlight(); got != 0 {
			t.Errorf("%s: deployment in-flight %d after the stream ended, want 0", tc.path, got)
		}
	}
}
