package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/edge"
)

// levelsYAML: two teams, a key name both teams use (ci-bot), two priced
// models, the response cache on.
const levelsYAML = `
admin: {key: admin-secret}
cache: {enabled: true}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 8}}
deployments:
  - {id: d1, model: m, provider: sim, price: {input: 1, output: 2}}
  - {id: d2, model: x, provider: sim, price: {input: 3, output: 4}}
teams:
  - {name: a, keys: ["sk-a", {key: sk-bot, name: ci-bot}], models: ["*"]}
  - {name: b, keys: [{key: sk-b, name: ci-bot}], models: ["*"]}
`

// usageSent is what the test sent and the gateway reported for it, per
// (team, key name, user, model).
type usageSent struct {
	requests, input, output, cached int64
	cost, saved                     float64
}

type levelsAnswer struct {
	Shared bool             `json:"shared"`
	Rows   []map[string]any `json:"rows"`
	Totals struct {
		Requests       int64   `json:"requests"`
		InputTokens    int64   `json:"input_tokens"`
		OutputTokens   int64   `json:"output_tokens"`
		CostUSD        float64 `json:"cost_usd"`
		CachedRequests int64   `json:"cached_requests"`
		SavedUSD       float64 `json:"saved_usd"`
	} `json:"totals"`
}

func getUsage(t *testing.T, n *Node, query string) levelsAnswer {
	t.Helper()
	w := do(t, n.Handler(), "GET", "/admin/usage"+query, adminKey, "")
	if w.Code != 200 {
		t.Fatalf("GET /admin/usage%s: %d %s", query, w.Code, w.Body)
	}
	var a levelsAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func num(v any) float64 { f, _ := v.(float64); return f }

// sendLevels sends chat requests over every (key, user, model) of the
// fixture, and one repeated (answered from the cache), and returns what the
// audit recorded of each, summed by group.
func sendLevels(t *testing.T, n *Node) map[[4]string]*usageSent {
	t.Helper()
	keys := [][2]string{{"sk-a", "a"}, {"sk-bot", "a"}, {"sk-b", "b"}}
	names := map[string]string{"sk-a": "config key 1", "sk-bot": "ci-bot", "sk-b": "ci-bot"}
	users := []string{"ann", "bo|b", ""}
	sent := map[[4]string]*usageSent{}
	i := 0
	send := func(key, team, user, model, content string) {
		t.Helper()
		id := fmt.Sprintf("lv-%d", i)
		i++
		body := `{"model":"` + model + `","messages":[{"role":"user","content":"` + content + `"}]}`
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", key, body, "X-Request-Id", id, "X-Switchyard-User", user)
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", id, w.Code, w.Body)
		}
		es, _ := n.Audit.Lookup(context.Background(), id)
		if len(es) != 1 {
			t.Fatalf("audit of %s: %+v", id, es)
		}
		e := es[0]
		g := [4]string{team, names[key], user, model}
		s := sent[g]
		if s == nil {
			s = &usageSent{}
			sent[g] = s
		}
		if e.Cached {
			s.cached++
			s.saved += e.SavedUSD
			return
		}
		s.requests++
		s.input += int64(e.PromptTokens)
		s.output += int64(e.CompletionTokens)
		s.cost += e.CostUSD
	}
	for _, k := range keys {
		for _, u := range users {
			for _, m := range []string{"m", "x"} {
				for r := range 2 {
					send(k[0], k[1], u, m, fmt.Sprintf("hello %s %s %s %d", k[0], u, m, r))
				}
			}
		}
	}
	send("sk-a", "a", "ann", "m", "hello sk-a ann m 0") // the same as one sent: a hit
	if s := sent[[4]string{"a", "config key 1", "ann", "m"}]; s.cached != 1 || s.saved <= 0 {
		t.Fatalf("the repeated request was not answered from the cache: %+v", s)
	}
	return sent
}

// TestAdminUsageLocal: usage by level over HTTP on a local-only node (the
// embedded default): totals equal what was sent, cached answers apart,
// group_by and filters select and sum (SPEC 3.1).
func TestAdminUsageLocal(t *testing.T) {
	n := newTestNode(t, levelsYAML)
	sent := sendLevels(t, n)
	type want struct {
		query  string
		groups []string
		match  func(g [4]string) bool
		key    func(g [4]string) string
	}
	all := func([4]string) bool { return true }
	today := time.Now().UTC().Format(time.DateOnly)
	cases := []want{
		{"", []string{"day"}, all, func([4]string) string { return today }},
		{"?group_by=model", []string{"model"}, all, func(g [4]string) string { return g[3] }},
		{"?group_by=team,user", []string{"team", "user"}, all, func(g [4]string) string { return g[0] + "/" + g[2] }},
		{"?group_by=key,user&team=a", []string{"key_name", "user"}, func(g [4]string) bool { return g[0] == "a" }, func(g [4]string) string { return g[1] + "/" + g[2] }},
		{"?group_by=user&user=bo%7Cb", []string{"user"}, func(g [4]string) bool { return g[2] == "bo|b" }, func(g [4]string) string { return g[2] }},
		{"?group_by=day,model&model=x&from=" + today + "&to=" + today, []string{"day", "model"}, func(g [4]string) bool { return g[3] == "x" }, func(g [4]string) string { return today + "/x" }},
		{"?group_by=key&team=a&key=ci-bot", []string{"key_name"}, func(g [4]string) bool { return g[0] == "a" && g[1] == "ci-bot" }, func([4]string) string { return "ci-bot" }},
		{"?team=b", []string{"day"}, func(g [4]string) bool { return g[0] == "b" }, func([4]string) string { return today }},
		{"?key=key_revoked0", []string{"day"}, func([4]string) bool { return false }, nil}, // an id the catalog no longer has: its (empty) history
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			exp := map[string]*usageSent{}
			var total usageSent
			for g, s := range sent {
				if !c.match(g) {
					continue
				}
				k := c.key(g)
				if exp[k] == nil {
					exp[k] = &usageSent{}
				}
				for _, e := range []*usageSent{exp[k], &total} {
					e.requests += s.requests
					e.input += s.input
					e.output += s.output
					e.cost += s.cost
					e.cached += s.cached
					e.saved += s.saved
				}
			}
			a := getUsage(t, n, c.query)
			if a.Shared {
				t.Fatal("a local node answered shared")
			}
			if len(a.Rows) != len(exp) {
				t.Fatalf("%d rows %v, want %d", len(a.Rows), a.Rows, len(exp))
			}
			for _, r := range a.Rows {
				var parts []string
				for _, g := range c.groups {
					parts = append(parts, r[g].(string))
				}
				e := exp[strings.Join(parts, "/")]
				if e == nil || int64(num(r["requests"])) != e.requests || int64(num(r["input_tokens"])) != e.input ||
					int64(num(r["output_tokens"])) != e.output || math.Abs(num(r["cost_usd"])-e.cost) > 1e-9 ||
					int64(num(r["cached_requests"])) != e.cached || math.Abs(num(r["saved_usd"])-e.saved) > 1e-9 {
					t.Fatalf("row %v, want %+v", r, e)
				}
			}
			if a.Totals.Requests != total.requests || a.Totals.InputTokens != total.input || a.Totals.CachedRequests != total.cached ||
				math.Abs(a.Totals.CostUSD-total.cost) > 1e-9 {
				t.Fatalf("totals %+v, want %+v", a.Totals, total)
			}
		})
	}
}

// TestAdminUsageErrors: every bad parameter is a 400 naming it.
func TestAdminUsageErrors(t *testing.T) {
	n := newTestNode(t, levelsYAML)
	now := time.Now().UTC()
	old, today, yesterday := now.AddDate(0, 0, -91).Format(time.DateOnly), now.Format(time.DateOnly), now.AddDate(0, 0, -1).Format(time.DateOnly)
	for _, c := range []struct{ query, param, says string }{
		{"?from=yesterday", "from", "YYYY-MM-DD"},
		{"?to=2026-13-01", "to", "YYYY-MM-DD"},
		{"?from=" + old, "from", "90 days"},
		{"?from=" + today + "&to=" + yesterday, "from", "after to"},
		{"?group_by=week", "group_by", "not one of"},
		{"?group_by=day,model,user", "group_by", "at most two"},
		{"?group_by=user,user", "group_by", "twice"},
		{"?team=nope", "team", "no team"},
		{"?key=nope", "key", "no key"},
		{"?key=ci-bot", "key", "add team="},
	} {
		t.Run(c.query, func(t *testing.T) {
			w := do(t, n.Handler(), "GET", "/admin/usage"+c.query, adminKey, "")
			var e struct {
				Error struct{ Param, Message string }
			}
			_ = json.Unmarshal(w.Body.Bytes(), &e)
			if w.Code != 400 || e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.says) {
				t.Fatalf("%d %s, want 400 on %s saying %q", w.Code, w.Body, c.param, c.says)
			}
		})
	}
	if w := do(t, n.Handler(), "GET", "/admin/usage", "sk-a", ""); w.Code != 401 {
		t.Fatalf("a team key on the admin API: %d", w.Code)
	}
}

// TestGroupUsage: rows are summed by their group values; grouped by day
// first they run oldest day first, otherwise the largest spend first.
func TestGroupUsage(t *testing.T) {
	rows := []edge.UsageRow{
		{Team: "a", Day: "2026-03-02", Model: "m", Key: "k1", User: "u1", UsageSums: edge.UsageSums{Requests: 1, CostUSD: 1}},
		{Team: "a", Day: "2026-03-01", Model: "x", Key: "k1", User: "u2", UsageSums: edge.UsageSums{Requests: 2, CostUSD: 5}},
		{Team: "b", Day: "2026-03-01", Model: "m", Key: "k2", User: "u1", UsageSums: edge.UsageSums{Requests: 1, CostUSD: 0.5, CachedRequests: 3, SavedUSD: 2}},
	}
	for _, c := range []struct {
		groups []string
		want   []string // group values, in order
		reqs   []int64
	}{
		{[]string{"day"}, []string{"2026-03-01", "2026-03-02"}, []int64{3, 1}},
		{[]string{"user"}, []string{"u2", "u1"}, []int64{2, 2}},
		{[]string{"key", "model"}, []string{"k1/x", "k1/m", "k2/m"}, []int64{2, 1, 1}},
		{[]string{"day", "team"}, []string{"2026-03-01/a", "2026-03-01/b", "2026-03-02/a"}, []int64{2, 1, 1}},
	} {
		out, total := groupUsage(rows, c.groups)
		var got []string
		var reqs []int64
		for _, o := range out {
			g := o.group[0]
			if len(c.groups) == 2 {
				g += "/" + o.group[1]
			}
			got, reqs = append(got, g), append(reqs, o.Requests)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") || fmt.Sprint(reqs) != fmt.Sprint(c.reqs) {
			t.Fatalf("group_by %v: %v %v, want %v %v", c.groups, got, reqs, c.want, c.reqs)
		}
		if total.Requests != 4 || total.CachedRequests != 3 || total.CostUSD != 6.5 || total.SavedUSD != 2 {
			t.Fatalf("totals %+v", total)
		}
	}
}

// TestUsageRowOutBytes: a row encodes to the bytes the map of its fields
// (the earlier encoding) gave, for every grouping: encoding/json sorts a
// map's keys, and usageRowOut's fields are in that order.
func TestUsageRowOutBytes(t *testing.T) {
	sums := edge.UsageSums{Requests: 3, InputTokens: 10, CachedTokens: 4, OutputTokens: 7, CostUSD: 0.125, CachedRequests: 1, SavedUSD: 1e-7}
	for _, groups := range [][]string{nil, {"day"}, {"model", "key"}, {"user", "team"}, {"key", "user"}, {"team", "day"}} {
		vals := [2]string{"a<&>\u2028", ""}
		h := gin.H{"requests": sums.Requests, "input_tokens": sums.InputTokens, "cached_tokens": sums.CachedTokens,
			"output_tokens": sums.OutputTokens, "cost_usd": sums.CostUSD, "cached_requests": sums.CachedRequests, "saved_usd": sums.SavedUSD}
		o := usageRowOut{Requests: sums.Requests, InputTokens: sums.InputTokens, CachedTokens: sums.CachedTokens,
			OutputTokens: sums.OutputTokens, CostUSD: sums.CostUSD, CachedRequests: sums.CachedRequests, SavedUSD: sums.SavedUSD}
		for i, g := range groups {
			v := &vals[i]
			h[g] = *v
			switch g {
			case "day":
				o.Day = v
			case "model":
				o.Model = v
			case "key":
				name := "name-" + *v
				h["key_name"] = name
				o.Key, o.KeyName = v, &name
			case "user":
				o.User = v
			case "team":
				o.Team = v
			}
		}
		want, _ := json.Marshal(h)
		got, _ := json.Marshal(o)
		if string(got) != string(want) {
			t.Errorf("group_by %v:\n got %s\nwant %s", groups, got, want)
		}
	}
}
