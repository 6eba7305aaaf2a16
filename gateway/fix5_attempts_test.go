package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// X-Switchyard-Attempts counts the attempts sent upstream (SPEC 12.3). An
// attempt the plan handed out but the gateway gave up before sending,
// because the retry_after wait before it would pass the request's deadline
// (SPEC 7.1), was counted, and the audit timeline showed it as a canceled
// attempt on a deployment that never saw the request.
func TestFix5AttemptsCountOnlySent(t *testing.T) {
	for _, tc := range []struct {
		name         string
		retryAfter   string
		wantAttempts string
		wantCalls    int
	}{
		{"wait fits the deadline", "10ms", "2", 2},
		{"wait would pass the deadline", "30s", "1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &scriptedUpstream{scripts: map[string][]int{"up-a": {503}, "up-b": {503}}, calls: map[string]int{}}
			srv := httptest.NewServer(up)
			defer srv.Close()
			g := startGateway(t, `
server: {read_header_timeout: 1s, read_timeout: 2s, write_timeout: 2s, idle_timeout: 2s, upstream_timeout: 5s, request_timeout: 10s}
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: k}
deployments:
  - {id: A, model: m, provider: up, upstream_model: up-a}
  - {id: B, model: m, provider: up, upstream_model: up-b}
models: [{name: m, strategy: round_robin}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
routing:
  retry_after: `+tc.retryAfter+`
  max_attempts: {chat: {sync: 2, stream: 2}}
`, srv.URL)
			id := "fix5-attempts-" + tc.retryAfter
			req, _ := http.NewRequest("POST", "http://"+g.addr+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer sk-test")
			req.Header.Set("X-Request-Id", id)
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				t.Fatalf("status %d %s, want the upstream's failure", resp.StatusCode, b)
			}
			up.mu.Lock()
			calls := up.calls["up-a"] + up.calls["up-b"]
			up.mu.Unlock()
			if calls != tc.wantCalls {
				t.Fatalf("%d upstream calls, want %d", calls, tc.wantCalls)
			}
			if got := resp.Header.Get("X-Switchyard-Attempts"); got != tc.wantAttempts {
				t.Errorf("X-Switchyard-Attempts %q with %d attempts sent upstream, want %s", got, calls, tc.wantAttempts)
			}
			es, _ := g.node.Audit.Lookup(context.Background(), id)
			if len(es) != 1 {
				t.Fatalf("%d audit entries for %s", len(es), id)
			}
			if got := timeline(es[0]); strings.Count(got, ":") != tc.wantCalls || strings.Contains(got, "canceled") {
				t.Errorf("audit timeline %q, want the %d attempts sent, each a server_error", got, tc.wantCalls)
			}
			for _, dep := range []string{"A", "B"} {
				if n := g.node.Router.State(dep).InFlight(); n != 0 {
					t.Errorf("%s in flight %d after the request, want 0", dep, n)
				}
			}
		})
	}
}
