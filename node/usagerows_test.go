package node

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestUsageByLevelThroughRedisOutage: usage by (team, key, user, model,
// day) over real HTTP on a Redis node (miniredis): what a node served
// before, during and after an outage (miniredis closed, then restarted with
// its data) is in Redis once its writer has sent it, exactly, and another
// replica reads it (SPEC 3.1, 9). While Redis is gone the node answers
// from its own rows, unshared.
func TestUsageByLevelThroughRedisOutage(t *testing.T) {
	m := miniredis.RunT(t)
	yml := func(node string) string {
		return strings.NewReplacer("${REDIS}", "redis://"+m.Addr()+"/0", "${NODE}", node, "${TIMEOUT}", "50ms").Replace(clusterYAML)
	}
	n1 := assemble(t, yml("lv-1"), 1)
	srv := httptest.NewServer(n1.Handler())
	defer srv.Close()
	type sums struct {
		req, in, out int64
		usd          float64
	}
	sent := map[string]*sums{} // by user
	i := 0
	send := func(key, user string) {
		t.Helper()
		id := fmt.Sprintf("lvr-%d", i)
		i++
		resp, body := post(t, srv.URL+"/v1/chat/completions", key, chatBody, "X-Request-Id", id, "X-Switchyard-User", user)
		if resp == nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %s", id, resp, body)
		}
		var r struct {
			Usage struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		usd, err := strconv.ParseFloat(resp.Header.Get("X-Switchyard-Cost-Usd"), 64)
		if err != nil {
			t.Fatalf("%s: cost header %q", id, resp.Header.Get("X-Switchyard-Cost-Usd"))
		}
		s := sent[user]
		if s == nil {
			s = &sums{}
			sent[user] = s
		}
		s.req++
		s.in += r.Usage.Prompt
		s.out += r.Usage.Completion
		s.usd += usd
	}
	users := []string{"ann", "bo|b|req", ""}
	for j := range 9 {
		send("sk-budget", users[j%3])
	}
	m.Close()
	for j := range 9 {
		send([]string{"sk-open", "sk-budget"}[j%2], users[j%3]) // the budget team's admissions find Redis gone
	}
	var local struct {
		Shared bool `json:"shared"`
		Totals struct {
			Requests int64 `json:"requests"`
		} `json:"totals"`
	}
	if code, body := adminReq(t, "GET", srv.URL+"/admin/usage", ""); code != 200 || json.Unmarshal([]byte(body), &local) != nil || local.Shared || local.Totals.Requests != 18 {
		t.Fatalf("during the outage: %d %s, want this node's 18 requests, unshared", code, body)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	waitUntilTrue(t, "the node back on shared state", func() bool { return n1.RedisState() == "up" })
	for j := range 3 {
		send("sk-open", users[j])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n1.Close(ctx); err != nil { // the writer sends what it holds
		t.Fatal(err)
	}
	n2 := assemble(t, yml("lv-2"), 2)
	t.Cleanup(func() { _ = n2.Close(context.Background()) })
	srv2 := httptest.NewServer(n2.Handler())
	defer srv2.Close()
	code, body := adminReq(t, "GET", srv2.URL+"/admin/usage?group_by=user", "")
	var a struct {
		Shared bool             `json:"shared"`
		Rows   []map[string]any `json:"rows"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &a) != nil || !a.Shared {
		t.Fatalf("another replica: %d %s", code, body)
	}
	if len(a.Rows) != len(sent) {
		t.Fatalf("rows %v, sent %v", a.Rows, sent)
	}
	for _, r := range a.Rows {
		s := sent[r["user"].(string)]
		f := func(k string) float64 { v, _ := r[k].(float64); return v }
		if s == nil || int64(f("requests")) != s.req || int64(f("input_tokens")) != s.in || int64(f("output_tokens")) != s.out ||
			math.Abs(f("cost_usd")-s.usd) > 1e-9 {
			t.Fatalf("row %v, sent %+v", r, s)
		}
	}
	// by team: the budget team's 9 were served before the outage
	code, body = adminReq(t, "GET", srv2.URL+"/admin/usage?team=budget&key=sk-budget", "")
	if code != 400 || !strings.Contains(body, `"param":"key"`) {
		t.Fatalf("a clear key is not an id or a name: %d %s", code, body)
	}
}
