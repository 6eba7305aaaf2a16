package gateway

import (
	"context"
	"net/http"
	"sync"
	"testing"
)

// Issue 26 reproduction: with a team budget of $0.50, 100 concurrent
// requests were all admitted and spent $2.60: the budget was checked at
// admission and charged after the response. Now admission reserves each
// request's highest possible cost, so the spend stays within the budget
// (it could pass it only by what the prompt estimate missed).
func TestConcurrentRequestsCannotOverspend(t *testing.T) {
	n := newTestNode(t, `
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 5ms, tokens_per_second: 100000, output_tokens: 16}}
deployments:
  - {id: d1, model: m, provider: sim, price: {input: 1000, output: 1000}}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"], budget: {usd: 0.50, period: daily}}
`)
	chat := `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hello there"}]}`
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-test", chat)
			mu.Lock()
			codes[w.Code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	u, err := n.Edge.Usage(context.Background(), n.Catalog.Load().Team("t"))
	if err != nil {
		t.Fatal(err)
	}
	if u.SpentUSD > 0.50+1e-9 || codes[http.StatusOK] == 0 || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 100 {
		t.Fatalf("spent $%.4f of a $0.50 budget; answers %v", u.SpentUSD, codes)
	}
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-test", chat)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("X-Switchyard-Limit-Level") != "team" || w.Header().Get("Retry-After") == "" {
		t.Fatalf("over the budget: %d level=%q retry-after=%q", w.Code, w.Header().Get("X-Switchyard-Limit-Level"), w.Header().Get("Retry-After"))
	}
	t.Logf("spent $%.4f with %d answered, %d refused", u.SpentUSD, codes[http.StatusOK], codes[http.StatusTooManyRequests])
}
