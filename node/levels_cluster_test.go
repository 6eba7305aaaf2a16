package node

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// levelsTeam adds a team with key and user levels to clusterYAML (SPEC
// 3.1): key ci has 25 rpm, key dev none; every end user 10 rpm; the team
// itself 1,000. redis.pool_size 4 makes each burst larger than the pool.
var levelsEdits = []string{
	`expected_replicas: 3,`, `expected_replicas: 3, pool_size: 4,`,
	"  - {id: s1, model: slowm, provider: slow}", "  - {id: s1, model: slowm, provider: slow}\n  - {id: b1, model: bm, provider: slow, price: {input: 0, output: 1000}}",
	"  - {name: open,", `  - name: lv
    models: ["*"]
    rpm: 1000
    user_limits: {rpm: 10}
    keys:
      - {key: sk-lv-ci, name: ci, rpm: 25}
      - {key: sk-lv-dev, name: dev}
      - {key: sk-lv-bud, name: spender, budget: {usd: 3, period: daily}}
  - {name: open,`,
}

// levelBurst sends total concurrent requests over the replicas with key,
// and user(i) as the end user ("" = none); it returns the answers by
// status and, for 429s, by X-Switchyard-Limit-Level.
func levelBurst(t *testing.T, srvs []*httptest.Server, key, body string, total int, user func(i int) string) (codes map[int]int, levels map[string]int) {
	t.Helper()
	var mu sync.Mutex
	codes, levels = map[int]int{}, map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var hdr []string
			if u := user(i); u != "" {
				hdr = []string{"X-Switchyard-User", u}
			}
			resp, b := post(t, srvs[i%len(srvs)].URL+"/v1/chat/completions", key, body, hdr...)
			mu.Lock()
			defer mu.Unlock()
			if resp == nil {
				codes[0]++
				return
			}
			codes[resp.StatusCode]++
			if resp.StatusCode == 429 {
				lv := resp.Header.Get("X-Switchyard-Limit-Level")
				levels[lv]++
				if !strings.Contains(b, lv+" ") {
					t.Errorf("429 at level %s whose message does not name it: %s", lv, b)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	return codes, levels
}

// SPEC 3.1 on a real redis-server with three gateways: key and user limits
// are exact across replicas for bursts larger than the connection pool,
// and a level that refuses charges no other level.
func TestClusterKeyAndUserLevelsExact(t *testing.T) {
	_, _, srvs := startCluster(t, 3, "2s", levelsEdits...)
	// ann's 10 rpm binds: 40 tries, 10 admitted, 30 refused at the user level
	codes, levels := levelBurst(t, srvs, "sk-lv-ci", chatBody, 40, func(int) string { return "ann" })
	if codes[200] != 10 || codes[429] != 30 || levels["user"] != 30 {
		t.Fatalf("ann: answers %v levels %v, want 10 admitted and 30 refused at the user level", codes, levels)
	}
	// key ci has 25 - 10 = 15 left: ann's 30 refusals charged it nothing
	codes, levels = levelBurst(t, srvs, "sk-lv-ci", chatBody, 40, func(i int) string { return fmt.Sprintf("u%d", i) })
	if codes[200] != 15 || codes[429] != 25 || levels["key"] != 25 {
		t.Fatalf("key ci: answers %v levels %v, want 15 admitted and 25 refused at the key level", codes, levels)
	}
	// another key of the team: ann is still spent, bob is not
	if resp, b := post(t, srvs[0].URL+"/v1/chat/completions", "sk-lv-dev", chatBody, "X-Switchyard-User", "ann"); resp == nil || resp.StatusCode != 429 || resp.Header.Get("X-Switchyard-Limit-Level") != "user" {
		t.Fatalf("ann through key dev: %v %s, want 429 at the user level", resp, b)
	}
	if resp, b := post(t, srvs[1].URL+"/v1/chat/completions", "sk-lv-dev", chatBody, "X-Switchyard-User", "bob"); resp == nil || resp.StatusCode != 200 {
		t.Fatalf("bob through key dev: %v %s, want 200", resp, b)
	}
	// the team level counted only what was admitted: 10 + 15 + 1 + this
	// one of 1,000 (capacity returns at one per 60 ms meanwhile), not the
	// 55 refused
	resp, _ := post(t, srvs[2].URL+"/v1/chat/completions", "sk-lv-dev", chatBody)
	var rem int
	if resp != nil {
		fmt.Sscan(resp.Header.Get("X-Ratelimit-Remaining-Requests"), &rem)
	}
	if rem < 973 || rem > 990 {
		t.Fatalf("team remaining requests %d, want 973 and what returned since (27 admitted in all)", rem)
	}
}

// SPEC 3.1: a key's budget reserves each request's highest cost at
// admission across replicas: 20 concurrent requests against a key budget
// that covers 3 ($1.00 each) admit exactly 3.
func TestClusterKeyBudgetBurst(t *testing.T) {
	_, _, srvs := startCluster(t, 3, "2s", levelsEdits...)
	body := `{"model":"bm","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	codes, levels := levelBurst(t, srvs, "sk-lv-bud", body, 20, func(int) string { return "" })
	if codes[200] != 3 || codes[429] != 17 || levels["key"] != 17 {
		t.Fatalf("answers %v levels %v, want exactly 3 admitted against a key budget covering 3", codes, levels)
	}
}
