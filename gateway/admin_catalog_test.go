package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/config"
)

const teamsYAML = `
admin: {key: admin-secret}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: a1, model: a, provider: sim}
  - {id: b1, model: b, provider: sim}
  - {id: e1, model: e, provider: sim, operations: [embeddings]}
models:
  - {name: a, strategy: least_busy}
teams:
  - {name: web, keys: ["sk-web"], models: [a, normal], rpm: 100}
smart_routing:
  routes: [{alias: normal, easy: a, hard: b}]
`

// lockedBuf is a log sink the test can read while the node writes.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func teamsNode(t *testing.T) (*Node, *lockedBuf) {
	t.Helper()
	cfg, err := config.Load([]byte(teamsYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = ""
	logs := &lockedBuf{}
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n, logs
}

func decodeJSON(t *testing.T, w *httptest.ResponseRecorder, v any) {
	t.Helper()
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
}

type apiErr struct {
	Error struct{ Message, Type, Code, Param string }
}

// wantErr asserts the status and that the error names the field.
func wantErr(t *testing.T, w *httptest.ResponseRecorder, status int, field string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d want %d: %s", w.Code, status, w.Body)
	}
	var e apiErr
	decodeJSON(t, w, &e)
	if e.Error.Message == "" || e.Error.Param != field {
		t.Fatalf("error must name field %q: %s", field, w.Body)
	}
}

func chat(t *testing.T, n *Node, key, model string) int {
	t.Helper()
	return do(t, n.Handler(), "POST", "/v1/chat/completions", key, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`).Code
}

func TestAdminCatalogNeedsAdminKey(t *testing.T) {
	n, _ := teamsNode(t)
	eps := [][2]string{
		{"GET", "/admin/models"}, {"PUT", "/admin/models/a"}, {"DELETE", "/admin/models/a"},
		{"GET", "/admin/teams"}, {"GET", "/admin/teams/web"}, {"PUT", "/admin/teams/web"}, {"DELETE", "/admin/teams/web"},
		{"GET", "/admin/teams/web/keys"}, {"POST", "/admin/teams/web/keys"}, {"GET", "/admin/teams/web/keys/x/usage"}, {"DELETE", "/admin/teams/web/keys/x"}, {"PATCH", "/admin/teams/web/keys/x"},
		{"GET", "/admin/teams/web/users/u"}, {"PUT", "/admin/teams/web/users/u"}, {"DELETE", "/admin/teams/web/users/u"},
		{"GET", "/admin/health"}, {"GET", "/admin/health?node=all"}, {"POST", "/admin/reload"}, {"GET", "/admin/teams/web/usage"}, {"GET", "/admin/requests"}, {"GET", "/admin/requests?team=web"},
	}
	for _, ep := range eps {
		for _, key := range []string{"", "sk-web", "admin-secreT"} {
			w := do(t, n.Handler(), ep[0], ep[1], key, `{"models":["*"],"strategy":"cost","name":"x"}`)
			if w.Code != 401 {
				t.Fatalf("%s %s with key %q: %d %s", ep[0], ep[1], key, w.Code, w.Body)
			}
		}
	}
	if chat(t, n, "sk-web", "a") != 200 {
		t.Fatal("unauthorized writes changed the team")
	}
}

func TestAdminModels(t *testing.T) {
	n, _ := teamsNode(t)
	var list struct {
		Version         int64
		DefaultStrategy string `json:"default_strategy"`
		Models          []modelView
	}
	decodeJSON(t, adm(t, n, "GET", "/admin/models", ""), &list)
	if len(list.Models) != 3 || list.DefaultStrategy != "simple_shuffle" {
		t.Fatalf("%+v", list)
	}
	if m := list.Models[0]; m.Name != "a" || m.Strategy != "least_busy" || m.Source != "catalog" || m.Deployments[0] != "a1" || m.Enabled != 1 || m.Operations[0] != "chat" {
		t.Fatalf("%+v", m)
	}
	if m := list.Models[1]; m.Name != "b" || m.Strategy != "simple_shuffle" || m.Source != "default" {
		t.Fatalf("%+v", m)
	}
	w := adm(t, n, "PUT", "/admin/models/b", `{"strategy":"adaptive","objective":"cost"}`)
	if w.Code != 200 {
		t.Fatal(w.Body)
	}
	if m := n.Catalog.Load().Model("b"); m.Strategy != "adaptive" || m.Objective != "cost" {
		t.Fatalf("strategy not live: %+v", m)
	}
	if chat(t, n, "sk-web", "normal") != 200 {
		t.Fatal("a model with a new strategy must serve")
	}
	cases := []struct {
		name, path, body string
		status           int
		field            string
	}{
		{"malformed", "/admin/models/a", `{"strategy":`, 400, ""},
		{"unknown field", "/admin/models/a", `{"strategy":"cost","weight":2}`, 400, "weight"},
		{"wrong type", "/admin/models/a", `{"strategy":5}`, 400, "strategy"},
		{"bad strategy", "/admin/models/a", `{"strategy":"fastest"}`, 422, "strategy"},
		{"bad objective", "/admin/models/a", `{"strategy":"adaptive","objective":"speed"}`, 422, "objective"},
		{"no deployment", "/admin/models/zz", `{"strategy":"cost"}`, 404, "name"},
		{"name differs", "/admin/models/a", `{"name":"b","strategy":"cost"}`, 400, "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, adm(t, n, "PUT", tc.path, tc.body), tc.status, tc.field)
			if n.Catalog.Load().Model("a").Strategy != "least_busy" {
				t.Fatal("a rejected write changed the model")
			}
		})
	}
	var del struct{ Model modelView }
	w = adm(t, n, "DELETE", "/admin/models/a", "")
	decodeJSON(t, w, &del)
	if w.Code != 200 || del.Model.Strategy != "simple_shuffle" || del.Model.Source != "default" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	wantErr(t, adm(t, n, "DELETE", "/admin/models/zz", ""), 404, "name")
}

func TestAdminTeams(t *testing.T) {
	n, _ := teamsNode(t)
	w := adm(t, n, "PUT", "/admin/teams/mobile", `{"models":["b","normal"],"rpm":2,"budget":{"usd":5,"period":"24h"}}`)
	if w.Code != 201 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	var got struct {
		Created bool
		Team    teamView
	}
	decodeJSON(t, w, &got)
	if !got.Created || got.Team.RPM != 2 || got.Team.Budget.Period.Every != 24*time.Hour || len(got.Team.Keys) != 0 {
		t.Fatalf("%s", w.Body)
	}
	var list struct{ Teams []teamView }
	decodeJSON(t, adm(t, n, "GET", "/admin/teams", ""), &list)
	if len(list.Teams) != 2 || list.Teams[0].Name != "mobile" || list.Teams[1].Name != "web" || len(list.Teams[1].Keys) != 1 {
		t.Fatalf("%+v", list)
	}
	if k := list.Teams[1].Keys[0]; k.Source != "config" || !strings.HasPrefix(k.Prefix, "sha256:") {
		t.Fatalf("config key view: %+v", k)
	}
	// replace: limits change live, keys stay
	if w := adm(t, n, "PUT", "/admin/teams/web", `{"models":["a"],"rpm":1}`); w.Code != 200 {
		t.Fatal(w.Body)
	}
	if chat(t, n, "sk-web", "a") != 200 || chat(t, n, "sk-web", "a") != 429 {
		t.Fatal("rpm 1 must admit one request and refuse the next")
	}
	if chat(t, n, "sk-web", "normal") == 200 {
		t.Fatal("normal was removed from web's allowlist")
	}
	cases := []struct {
		name, path, body string
		status           int
		field            string
	}{
		{"bad name", "/admin/teams/a%20b", `{"models":["*"]}`, 400, "name"},
		{"keys in body", "/admin/teams/web", `{"models":["*"],"keys":["sk-x"]}`, 400, "keys"},
		{"name differs", "/admin/teams/web", `{"name":"other","models":["*"]}`, 400, "name"},
		{"unknown field", "/admin/teams/web", `{"models":["*"],"burst":3}`, 400, "burst"},
		{"empty body", "/admin/teams/web", ``, 400, ""},
		{"no models", "/admin/teams/web", `{"rpm":3}`, 422, "models"},
		{"unknown model", "/admin/teams/web", `{"models":["a","zz"]}`, 422, "models[1]"},
		{"negative rpm", "/admin/teams/web", `{"models":["*"],"rpm":-1}`, 422, "rpm"},
		{"negative tpm", "/admin/teams/web", `{"models":["*"],"tpm":-1}`, 422, "tpm"},
		{"negative parallel", "/admin/teams/web", `{"models":["*"],"max_parallel":-1}`, 422, "max_parallel"},
		{"negative budget", "/admin/teams/web", `{"models":["*"],"budget":{"usd":-1}}`, 422, "budget.usd"},
		{"bad period", "/admin/teams/web", `{"models":["*"],"budget":{"usd":1,"period":"a month"}}`, 400, "budget.period"},
		{"rpm as string", "/admin/teams/web", `{"models":["*"],"rpm":"5"}`, 400, "rpm"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := n.Catalog.Load().Version
			wantErr(t, adm(t, n, "PUT", tc.path, tc.body), tc.status, tc.field)
			if n.Catalog.Load().Version != before {
				t.Fatal("a rejected write changed the catalog")
			}
		})
	}
	wantErr(t, adm(t, n, "GET", "/admin/teams/zz", ""), 404, "name")
	wantErr(t, adm(t, n, "DELETE", "/admin/teams/zz", ""), 404, "name")
	w = adm(t, n, "DELETE", "/admin/teams/web", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"keys_revoked":1`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if chat(t, n, "sk-web", "a") != 401 {
		t.Fatal("a deleted team's key must be 401")
	}
}

func TestAdminKeys(t *testing.T) {
	n, _ := teamsNode(t)
	w := adm(t, n, "POST", "/admin/teams/web/keys", `{"name":"ci"}`)
	if w.Code != 201 || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var k issuedKey
	decodeJSON(t, w, &k)
	if !strings.HasPrefix(k.Key, "sk-sy-") || len(k.Key) < 6+32 || !strings.HasPrefix(k.Key, k.Prefix) || k.ID == "" || k.Name != "ci" || k.CreatedAt.IsZero() || k.ExpiresAt != nil || k.Source != "api" {
		t.Fatalf("%s", w.Body)
	}
	if chat(t, n, k.Key, "a") != 200 {
		t.Fatal("a new key must work at once")
	}
	var list struct {
		Team string
		Keys []map[string]any
	}
	decodeJSON(t, adm(t, n, "GET", "/admin/teams/web/keys", ""), &list)
	if list.Team != "web" || len(list.Keys) != 2 {
		t.Fatalf("%+v", list)
	}
	for _, kv := range list.Keys {
		for _, f := range []string{"id", "name", "prefix", "created_at", "expires_at", "source"} {
			if _, ok := kv[f]; !ok {
				t.Fatalf("key listing lacks %s: %v", f, kv)
			}
		}
		if _, ok := kv["key"]; ok {
			t.Fatal("a listing must never carry the key")
		}
		if _, ok := kv["sha256"]; ok {
			t.Fatal("a listing must not carry the digest")
		}
	}
	cfgID := ""
	for _, kv := range list.Keys {
		if kv["source"] == "config" {
			cfgID = kv["id"].(string)
		}
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"no name", "POST", "/admin/teams/web/keys", `{}`, 422, "name"},
		{"bad expiry", "POST", "/admin/teams/web/keys", `{"name":"x","expires_at":"tomorrow"}`, 400, "expires_at"},
		{"past expiry", "POST", "/admin/teams/web/keys", `{"name":"x","expires_at":"2020-01-01T00:00:00Z"}`, 422, "expires_at"},
		{"unknown field", "POST", "/admin/teams/web/keys", `{"name":"x","key":"sk-mine"}`, 400, "key"},
		{"unknown team", "POST", "/admin/teams/zz/keys", `{"name":"x"}`, 404, "team"},
		{"list unknown team", "GET", "/admin/teams/zz/keys", ``, 404, "name"},
		{"revoke unknown key", "DELETE", "/admin/teams/web/keys/key_nope", ``, 404, "id"},
		{"revoke unknown team", "DELETE", "/admin/teams/zz/keys/" + k.ID, ``, 404, "team"},
		{"revoke config key", "DELETE", "/admin/teams/web/keys/" + cfgID, ``, 409, "id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, adm(t, n, tc.method, tc.path, tc.body), tc.status, tc.field) })
	}
	if w := adm(t, n, "DELETE", "/admin/teams/web/keys/"+k.ID, ""); w.Code != 200 {
		t.Fatal(w.Body)
	}
	if chat(t, n, k.Key, "a") != 401 || chat(t, n, "sk-web", "a") != 200 {
		t.Fatal("revoked key must be 401, the other key untouched")
	}

	// an expired key is 401: issue with a clock two hours behind, expiring
	// an hour ago by the real clock that authentication reads
	n.Admin.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	w = adm(t, n, "POST", "/admin/teams/web/keys", `{"name":"old","expires_at":"`+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)+`"}`)
	decodeJSON(t, w, &k)
	if w.Code != 201 || k.ExpiresAt == nil {
		t.Fatal(w.Body)
	}
	if chat(t, n, k.Key, "a") != 401 {
		t.Fatal("an expired key must be 401")
	}
}

// TestClearKeyNeverLeaks: after a key is issued and used, its clear text is
// in no log line, metric, audit entry or later API answer.
func TestClearKeyNeverLeaks(t *testing.T) {
	n, logs := teamsNode(t)
	var k issuedKey
	decodeJSON(t, adm(t, n, "POST", "/admin/teams/web/keys", `{"name":"leak-check"}`), &k)
	ok := do(t, n.Handler(), "POST", "/v1/chat/completions", k.Key, `{"model":"a","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "leak-1")
	bad := do(t, n.Handler(), "POST", "/v1/chat/completions", k.Key+"x", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "leak-2")
	if ok.Code != 200 || bad.Code != 401 {
		t.Fatal(ok.Code, bad.Code)
	}
	adm(t, n, "DELETE", "/admin/teams/web/keys/"+k.ID, "")
	secret := k.Key[len(k.Prefix):] // the part that is never shown again
	var seen []string
	for _, p := range []string{"/admin/teams", "/admin/teams/web", "/admin/teams/web/keys", "/admin/requests/leak-1", "/admin/requests/leak-2", "/admin/models", "/admin/deployments", "/admin/health", "/admin/cluster"} {
		seen = append(seen, adm(t, n, "GET", p, "").Body.String())
	}
	seen = append(seen, do(t, n.Handler(), "GET", "/metrics", "", "").Body.String(), logs.String(), ok.Body.String(), bad.Body.String())
	if st := n.Catalog.Load().State; st != nil {
		b, _ := json.Marshal(st)
		seen = append(seen, string(b))
	}
	for i, s := range seen {
		if strings.Contains(s, secret) {
			t.Fatalf("clear key found in output %d: %.300s", i, s)
		}
	}
	if !strings.Contains(logs.String(), "leak-1") {
		t.Fatal("the log sink saw no request line: the check above proves nothing")
	}
}

func TestAdminRemovingReferencedModelIsReported(t *testing.T) {
	n, _ := teamsNode(t)
	w := adm(t, n, "DELETE", "/admin/deployments/a1", "")
	var got struct{ Warnings []string }
	decodeJSON(t, w, &got)
	if w.Code != 200 || len(got.Warnings) != 2 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if !strings.Contains(strings.Join(got.Warnings, "|"), `teams[web].models[0]: "a" has no deployment`) {
		t.Fatalf("%v", got.Warnings)
	}
	w = adm(t, n, "DELETE", "/admin/deployments/e1", "")
	decodeJSON(t, w, &got)
	if len(got.Warnings) != 0 || !strings.Contains(w.Body.String(), `"warnings":[]`) {
		t.Fatalf("an unreferenced model reports nothing: %s", w.Body)
	}
}

type usageAnswer struct {
	Team     string
	Shared   bool
	RPM      struct{ Limit, Used int64 }
	TPM      struct{ Limit, Used int64 }
	Parallel struct {
		Limit    int64
		InFlight int64 `json:"in_flight"`
	}
	Budget struct {
		USD      float64
		Spent    float64
		Period   string
		ResetsAt *time.Time `json:"resets_at"`
	}
}

func TestAdminTeamUsage(t *testing.T) {
	n, _ := teamsNode(t)
	if w := adm(t, n, "PUT", "/admin/teams/web", `{"models":["*"],"rpm":100,"tpm":5000,"max_parallel":5,"budget":{"usd":10,"period":"daily"}}`); w.Code != 200 {
		t.Fatal(w.Body)
	}
	for i := 0; i < 3; i++ {
		if chat(t, n, "sk-web", "a") != 200 {
			t.Fatal("chat")
		}
	}
	var u usageAnswer
	w := adm(t, n, "GET", "/admin/teams/web/usage", "")
	decodeJSON(t, w, &u)
	if w.Code != 200 || u.Team != "web" || u.Shared || u.RPM.Limit != 100 || u.RPM.Used != 3 || u.TPM.Limit != 5000 || u.TPM.Used <= 0 || // 36 tokens take 430 ms to decay at 5,000 a minute

		u.Parallel.Limit != 5 || u.Parallel.InFlight != 0 || u.Budget.USD != 10 || u.Budget.Period != "daily" || u.Budget.ResetsAt == nil ||
		!u.Budget.ResetsAt.After(time.Now()) || u.Budget.ResetsAt.After(time.Now().Add(24*time.Hour)) {
		t.Fatalf("%s", w.Body)
	}
	for _, f := range []string{`"rpm":{"limit":100,"used":3}`, `"parallel":{"in_flight":0,"limit":5}`, `"resets_at":"`} {
		if !strings.Contains(w.Body.String(), f) {
			t.Fatalf("answer lacks %s: %s", f, w.Body)
		}
	}
	wantErr(t, adm(t, n, "GET", "/admin/teams/zz/usage", ""), 404, "name")
	if w := do(t, n.Handler(), "GET", "/admin/teams/web/usage", "sk-web", ""); w.Code != 401 {
		t.Fatal(w.Code)
	}
	// a team without a budget answers resets_at null
	adm(t, n, "PUT", "/admin/teams/web", `{"models":["*"]}`)
	w = adm(t, n, "GET", "/admin/teams/web/usage", "")
	if !strings.Contains(w.Body.String(), `"resets_at":null`) {
		t.Fatalf("%s", w.Body)
	}
}

func TestAdminRequestsList(t *testing.T) {
	n, _ := teamsNode(t)
	adm(t, n, "PUT", "/admin/teams/ops", `{"models":["b"]}`)
	var k issuedKey
	decodeJSON(t, adm(t, n, "POST", "/admin/teams/ops/keys", `{"name":"x"}`), &k)
	for i := 0; i < 4; i++ {
		chat(t, n, "sk-web", "a")
	}
	chat(t, n, k.Key, "b")
	chat(t, n, k.Key, "a") // 403: not allowed
	type list struct {
		Requests []struct {
			Team           string
			RequestedModel string `json:"requested_model"`
			Status         int
		}
		Count, Limit int
	}
	var l list
	decodeJSON(t, adm(t, n, "GET", "/admin/requests", ""), &l)
	if l.Count != 6 || l.Limit != 50 || l.Requests[0].Team != "ops" || l.Requests[0].Status != 403 {
		t.Fatalf("newest first, every entry: %+v", l)
	}
	cases := []struct {
		q    string
		want int
	}{{"team=web", 4}, {"team=ops&status=200", 1}, {"model=b", 1}, {"model=a&team=ops", 1}, {"status=403", 1}, {"limit=2", 2}, {"limit=9999", 6}, {"team=nobody", 0}}
	for _, tc := range cases {
		decodeJSON(t, adm(t, n, "GET", "/admin/requests?"+tc.q, ""), &l)
		if l.Count != tc.want || len(l.Requests) != tc.want {
			t.Fatalf("%s: %d entries, want %d", tc.q, l.Count, tc.want)
		}
	}
	decodeJSON(t, adm(t, n, "GET", "/admin/requests?limit=9999", ""), &l)
	if l.Limit != 500 {
		t.Fatalf("limit must be capped at 500, got %d", l.Limit)
	}
	for _, q := range []struct{ q, field string }{{"status=abc", "status"}, {"status=42", "status"}, {"limit=0", "limit"}, {"limit=x", "limit"}} {
		wantErr(t, adm(t, n, "GET", "/admin/requests?"+q.q, ""), 400, q.field)
	}
}

func TestAdminHealthNodeAllLocal(t *testing.T) {
	n, _ := teamsNode(t)
	self := n.Config.Server.NodeID
	w := adm(t, n, "GET", "/admin/health?node=all", "")
	var all struct {
		Nodes []NodeHealth
	}
	decodeJSON(t, w, &all)
	if w.Code != 200 || len(all.Nodes) != 1 || all.Nodes[0].Node != self || !strings.Contains(string(all.Nodes[0].Deployments), `"id":"a1"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := adm(t, n, "GET", "/admin/health?node="+self, ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"id":"b1"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	wantErr(t, adm(t, n, "GET", "/admin/health?node=ghost", ""), 404, "node")
	wantErr(t, adm(t, n, "GET", "/admin/health?node=", ""), 400, "node")
}

// TestAdminTeamsListBytes: GET /admin/teams, written a team at a time, is
// byte for byte the object c.JSON made of the whole list (keys in order,
// the same encoding), with teams and without.
func TestAdminTeamsListBytes(t *testing.T) {
	n, _ := teamsNode(t)
	if w := adm(t, n, "PUT", "/admin/teams/mob-ile.2", `{"models":["b"],"rpm":2}`); w.Code != 201 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	want := func() []byte {
		st := n.Server.Admin.holder.Load().State
		views := []teamView{}
		for _, tm := range st.Teams {
			views = append(views, viewTeam(tm))
		}
		b, err := json.Marshal(gin.H{"version": st.Version, "teams": views})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	w := adm(t, n, "GET", "/admin/teams", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json; charset=utf-8" || !bytes.Equal(w.Body.Bytes(), want()) {
		t.Fatalf("%d %q\n%s\nwant\n%s", w.Code, w.Header().Get("Content-Type"), w.Body, want())
	}
	for _, name := range []string{"mob-ile.2", "web"} {
		if w := adm(t, n, "DELETE", "/admin/teams/"+url.PathEscape(name), ""); w.Code != 200 {
			t.Fatalf("delete %s: %d %s", name, w.Code, w.Body)
		}
	}
	if w := adm(t, n, "GET", "/admin/teams", ""); !bytes.Equal(w.Body.Bytes(), want()) || !strings.HasPrefix(w.Body.String(), `{"teams":[]`) {
		t.Fatalf("no teams: %s", w.Body)
	}
}
