package gateway

import (
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A panic after a stream's first event reached the client (a translator
// bug on a later event) recorded the request as not served: its whole token
// reservation was refunded and nothing was charged, although content was
// relayed. It is now charged like any stream cut before its end: the
// upstream's usage so far, with the output at least the content relayed / 4
// (SPEC 10.2, 14).
func TestFix5PanicMidStreamCharges(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			g := startGateway(t, `
server: {read_header_timeout: 1s, read_timeout: 2s, write_timeout: 2s, idle_timeout: 2s, upstream_timeout: 5s, request_timeout: 10s}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 8}}
deployments:
  - {id: d, model: m, provider: sim, price: {input: 1000, output: 1000}}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"], budget: {usd: 100, period: daily}}
`, "")
			withPanicAdapter(g.node, true)
			id := "fix5-panic" + strings.ReplaceAll(tc.path, "/", "-")
			req, _ := http.NewRequest("POST", "http://"+g.addr+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer sk-test")
			req.Header.Set("X-Request-Id", id)
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want the stream's 200", resp.StatusCode)
			}
			es, _ := g.node.Audit.Lookup(context.Background(), id)
			if len(es) != 1 {
				t.Fatalf("%d audit entries for %s", len(es), id)
			}
			e := es[0]
			if e.PromptTokens <= 0 || e.CompletionTokens <= 0 || e.CostUSD <= 0 || e.Deployment != "d" {
				t.Errorf("audit: %d prompt, %d completion tokens, $%g on %q after content was relayed, want a charge on d",
					e.PromptTokens, e.CompletionTokens, e.CostUSD, e.Deployment)
			}
			u, err := g.node.Edge.Usage(context.Background(), g.node.Catalog.Load().Team("t"))
			if err != nil {
				t.Fatal(err)
			}
			if u.SpentUSD <= 0 || math.Abs(u.SpentUSD-e.CostUSD) > 1e-9 {
				t.Errorf("team spent $%g, want the charge of the relayed part ($%g)", u.SpentUSD, e.CostUSD)
			}
			if got := g.node.Router.State("d").InFlight(); got != 0 {
				t.Errorf("deployment in-flight %d after the stream ended, want 0", got)
			}
		})
	}
}
