package node

import (
	"strings"
	"sync"
	"testing"
)

// SPEC 3.1 across replicas on a real redis-server: a burst of concurrent
// requests spread over three gateways against a budget that covers five
// reservations admits exactly five (each reserves its highest possible
// cost, $1.00 here: 1,000 output tokens at $1,000 per million, input
// free), and the rest get 429 budget_exceeded. Before reservations, all of
// them were admitted.
func TestBudgetBurstAcrossReplicas(t *testing.T) {
	_, _, srvs := startCluster(t, 3, "500ms",
		"  - {id: s1, model: slowm, provider: slow}", "  - {id: s1, model: slowm, provider: slow}\n  - {id: b1, model: bm, provider: slow, price: {input: 0, output: 1000}}",
		"  - {name: open,", "  - {name: bud, keys: [\"sk-bud\"], models: [\"*\"], budget: {usd: 5, period: daily}}\n  - {name: open,")
	body := `{"model":"bm","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := post(t, srvs[i%3].URL+"/v1/chat/completions", "sk-bud", body)
			mu.Lock()
			defer mu.Unlock()
			if resp == nil {
				codes[0]++
				return
			}
			codes[resp.StatusCode]++
			if resp.StatusCode == 429 && !strings.Contains(b, "budget_exceeded") {
				t.Errorf("429 that is not budget_exceeded: %s", b)
			}
		}()
	}
	wg.Wait()
	if codes[200] != 5 || codes[429] != 25 {
		t.Fatalf("answers %v, want exactly 5 admitted against a budget covering 5", codes)
	}
}
