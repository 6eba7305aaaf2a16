package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/config"
)

// keyList reads GET /admin/teams/{team}/keys.
func keyList(t *testing.T, n *Node, team string) map[string]catalog.KeyView {
	t.Helper()
	var list struct{ Keys []catalog.KeyView }
	w := adm(t, n, "GET", "/admin/teams/"+team+"/keys", "")
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	decodeJSON(t, w, &list)
	out := map[string]catalog.KeyView{}
	for _, k := range list.Keys {
		out[k.ID] = k
	}
	return out
}

func TestAdminKeyLimits(t *testing.T) {
	n, _ := teamsNode(t)
	w := adm(t, n, "POST", "/admin/teams/web/keys", `{"name":"bot","rpm":5,"tpm":100000,"max_parallel":2,"budget":{"usd":3,"period":"daily"},"models":["a"]}`)
	if w.Code != 201 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var k issuedKey
	decodeJSON(t, w, &k)
	if k.RPM != 5 || k.MaxParallel != 2 || k.Budget == nil || k.Budget.Period.Calendar != "daily" || strings.Join(k.Models, ",") != "a" {
		t.Fatalf("the issue answer shows the key's level: %s", w.Body)
	}
	listed := keyList(t, n, "web")[k.ID]
	if listed.RPM != 5 || listed.TPM != 100000 || listed.Budget.USD != 3 || strings.Join(listed.Models, ",") != "a" {
		t.Fatalf("list: %+v", listed)
	}
	for _, kv := range keyList(t, n, "web") {
		if kv.Source == "config" && (kv.Models != nil || kv.RPM != 0 || kv.Budget != nil) {
			t.Fatalf("a plain config key has no level: %+v", kv)
		}
	}
	if chat(t, n, k.Key, "a") != 200 || chat(t, n, k.Key, "normal") != 403 {
		t.Fatal("a key's models narrow its team's allowlist")
	}

	// PATCH: merge semantics, seen in the list and in what a request
	// authenticates as
	w = adm(t, n, "PATCH", "/admin/teams/web/keys/"+k.ID, `{"rpm":9,"tpm":0,"budget":{"usd":4},"models":null,"name":"robot"}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var got struct {
		Version int64
		Key     catalog.KeyView
	}
	decodeJSON(t, w, &got)
	if got.Version != n.Catalog.Load().Version || got.Key.RPM != 9 || got.Key.Name != "robot" {
		t.Fatalf("%s", w.Body)
	}
	listed = keyList(t, n, "web")[k.ID]
	if listed.Name != "robot" || listed.RPM != 9 || listed.TPM != 0 || listed.MaxParallel != 2 || listed.Budget.USD != 4 ||
		listed.Budget.Period.Calendar != "daily" || listed.Models != nil {
		t.Fatalf("list after patch: %+v", listed)
	}
	_, info := n.Catalog.Load().AuthenticateKey(k.Key, time.Now())
	if info == nil || info.Level() == nil || info.Name != "robot" || info.Level().RPM != 9 || info.Level().TPM != 0 || info.Level().MaxParallel != 2 ||
		info.Level().Budget.USD != 4 || info.Models != nil {
		t.Fatalf("the request's KeyInfo: %+v", info)
	}
	if chat(t, n, k.Key, "normal") != 200 {
		t.Fatal("models null gives the key its team's allowlist back")
	}
	// clearing every limit leaves the key without a level
	if w := adm(t, n, "PATCH", "/admin/teams/web/keys/"+k.ID, `{"rpm":0,"max_parallel":null,"budget":null}`); w.Code != 200 {
		t.Fatal(w.Body)
	}
	if _, info := n.Catalog.Load().AuthenticateKey(k.Key, time.Now()); info.Level() != nil {
		t.Fatalf("no limits left: %+v", info.Level())
	}

	cfgID := ""
	for id, kv := range keyList(t, n, "web") {
		if kv.Source == "config" {
			cfgID = id
		}
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"issue: models not a subset", "POST", "/admin/teams/web/keys", `{"name":"x","models":["a","b"]}`, 422, "models[1]"},
		{"issue: negative rpm", "POST", "/admin/teams/web/keys", `{"name":"x","rpm":-1}`, 422, "rpm"},
		{"issue: negative budget", "POST", "/admin/teams/web/keys", `{"name":"x","budget":{"usd":-1}}`, 422, "budget.usd"},
		{"issue: unknown field", "POST", "/admin/teams/web/keys", `{"name":"x","burst":3}`, 400, "burst"},
		{"issue: rpm as string", "POST", "/admin/teams/web/keys", `{"name":"x","rpm":"5"}`, 400, "rpm"},
		{"patch: config key", "PATCH", "/admin/teams/web/keys/" + cfgID, `{"rpm":1}`, 409, "id"},
		{"patch: unknown key", "PATCH", "/admin/teams/web/keys/key_nope", `{"rpm":1}`, 404, "id"},
		{"patch: unknown team", "PATCH", "/admin/teams/zz/keys/" + k.ID, `{"rpm":1}`, 404, "team"},
		{"patch: negative rpm", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"rpm":-1}`, 422, "rpm"},
		{"patch: models not a subset", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"models":["b"]}`, 422, "models[0]"},
		{"patch: unknown field", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"burst":1}`, 400, "burst"},
		{"patch: unknown budget member", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"budget":{"usd":1,"cap":2}}`, 400, "cap"},
		{"patch: bad period", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"budget":{"usd":1,"period":"a month"}}`, 400, "budget.period"},
		{"patch: rpm as string", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"rpm":"5"}`, 400, "rpm"},
		{"patch: null name", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"name":null}`, 422, "name"},
		{"patch: bad expiry", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"expires_at":"tomorrow"}`, 400, "expires_at"},
		{"patch: past expiry", "PATCH", "/admin/teams/web/keys/" + k.ID, `{"expires_at":"2020-01-01T00:00:00Z"}`, 422, "expires_at"},
		{"patch: empty body", "PATCH", "/admin/teams/web/keys/" + k.ID, ``, 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := n.Catalog.Load().Version
			wantErr(t, adm(t, n, tc.method, tc.path, tc.body), tc.status, tc.field)
			if n.Catalog.Load().Version != before {
				t.Fatal("a rejected write changed the catalog")
			}
		})
	}
	if w := do(t, n.Handler(), "PATCH", "/admin/teams/web/keys/"+k.ID, "sk-web", `{"rpm":1}`); w.Code != 401 {
		t.Fatalf("PATCH needs the admin key: %d", w.Code)
	}
}

type userAnswer struct {
	Team, User string
	Override   bool
	Own        *catalog.UserSpec
	Created    bool
	Limits     struct {
		RPM, TPM    int64
		MaxParallel int64 `json:"max_parallel"`
		Budget      *struct {
			USD    float64
			Period string
		}
	}
	RPM      struct{ Limit, Used int64 }
	TPM      struct{ Limit, Used int64 }
	Parallel struct{ Limit int64 }
	Budget   struct {
		USD    float64
		Period string
	}
}

func TestAdminUsers(t *testing.T) {
	n, _ := teamsNode(t)
	w := adm(t, n, "PUT", "/admin/teams/web", `{"models":["a"],"user_limits":{"rpm":10,"tpm":5000,"budget":{"usd":2,"period":"weekly"}}}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"user_limits":{"rpm":10,"tpm":5000,"budget":{"usd":2,"period":"weekly","alert_at":0.8}}`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// an id with a '/' travels path-escaped
	user := "org/alice@example.com"
	path := "/admin/teams/web/users/" + url.PathEscape(user)
	var u userAnswer
	decodeJSON(t, adm(t, n, "GET", path, ""), &u)
	if u.User != user || u.Override || u.Own != nil || u.RPM.Limit != 10 || u.TPM.Limit != 5000 || u.Budget.USD != 2 || u.Budget.Period != "weekly" {
		t.Fatalf("a user without limits of their own has the team's: %+v", u)
	}

	w = adm(t, n, "PUT", path, `{"rpm":3,"max_parallel":1}`)
	if w.Code != 201 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	decodeJSON(t, w, &u)
	if !u.Created || !u.Override || u.Limits.RPM != 3 || u.Limits.TPM != 5000 || u.Limits.MaxParallel != 1 || u.Limits.Budget.USD != 2 {
		t.Fatalf("omitted fields keep the team's user_limits: %s", w.Body)
	}
	w = adm(t, n, "GET", path, "")
	decodeJSON(t, w, &u)
	if w.Code != 200 || !u.Override || u.Own == nil || *u.Own.RPM != 3 || u.Own.TPM != nil || u.RPM.Limit != 3 || u.TPM.Limit != 5000 || u.Parallel.Limit != 1 {
		t.Fatalf("%s", w.Body)
	}
	for _, f := range []string{`"shared":false`, `"rpm":{"limit":3,"used":0}`, `"resets_at":"`} {
		if !strings.Contains(w.Body.String(), f) {
			t.Fatalf("answer lacks %s: %s", f, w.Body)
		}
	}
	if l := n.Catalog.Load().Team("web").UserLevel(user); l == nil || l.RPM != 3 || l.TPM != 5000 {
		t.Fatalf("the snapshot's user level: %+v", l)
	}
	// replacing: 200, and a team PUT keeps the override
	if w := adm(t, n, "PUT", path, `{"rpm":0}`); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := adm(t, n, "PUT", "/admin/teams/web", `{"models":["a"],"user_limits":{"rpm":20}}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"user_overrides":1`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	decodeJSON(t, adm(t, n, "GET", path, ""), &u)
	if !u.Override || u.RPM.Limit != 0 || u.TPM.Limit != 0 {
		t.Fatalf("rpm 0 lifts the team's rpm for this user: %+v", u)
	}

	if w := adm(t, n, "DELETE", path, ""); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	decodeJSON(t, adm(t, n, "GET", path, ""), &u)
	if u.Override || u.RPM.Limit != 20 {
		t.Fatalf("back to the team default: %+v", u)
	}
	wantErr(t, adm(t, n, "DELETE", path, ""), 404, "user")

	long := "/admin/teams/web/users/" + strings.Repeat("u", 129)
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"put: 129-byte user", "PUT", long, `{"rpm":1}`, 400, "user"},
		{"get: 129-byte user", "GET", long, ``, 400, "user"},
		{"delete: 129-byte user", "DELETE", long, ``, 400, "user"},
		{"put: empty user", "PUT", "/admin/teams/web/users/", `{"rpm":1}`, 400, "user"},
		{"put: negative rpm", "PUT", path, `{"rpm":-1}`, 422, "rpm"},
		{"put: negative budget", "PUT", path, `{"budget":{"usd":-1}}`, 422, "budget.usd"},
		{"put: unknown field", "PUT", path, `{"rpm":1,"burst":2}`, 400, "burst"},
		{"put: unknown team", "PUT", "/admin/teams/zz/users/bob", `{"rpm":1}`, 404, "team"},
		{"get: unknown team", "GET", "/admin/teams/zz/users/bob", ``, 404, "name"},
		{"delete: unknown team", "DELETE", "/admin/teams/zz/users/bob", ``, 404, "team"},
		{"team: negative user_limits", "PUT", "/admin/teams/web", `{"models":["a"],"user_limits":{"tpm":-1}}`, 422, "user_limits.tpm"},
		{"team: user_overrides echoed", "PUT", "/admin/teams/web", `{"models":["a"],"user_overrides":1}`, 400, "user_overrides"},
		{"team: unknown user_limits field", "PUT", "/admin/teams/web", `{"models":["a"],"user_limits":{"burst":1}}`, 400, "burst"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := n.Catalog.Load().Version
			wantErr(t, adm(t, n, tc.method, tc.path, tc.body), tc.status, tc.field)
			if n.Catalog.Load().Version != before {
				t.Fatal("a rejected write changed the catalog")
			}
		})
	}
	if w := adm(t, n, "PUT", "/admin/teams/web/users/"+strings.Repeat("u", 128), `{}`); w.Code != 201 {
		t.Fatalf("a 128-byte user is valid: %d %s", w.Code, w.Body)
	}
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		if w := do(t, n.Handler(), m, path, "sk-web", `{}`); w.Code != 401 {
			t.Fatalf("%s needs the admin key: %d", m, w.Code)
		}
	}
}

// keyUsageAnswer is GET /admin/teams/{team}/keys/{id}/usage.
type keyUsageAnswer struct {
	Team, Key string
	KeyName   string `json:"key_name"`
	RPM       struct{ Limit, Used int64 }
	Budget    struct {
		USD, Spent float64
		Period     string
		Alerted    bool
	}
}

// TestAdminKeyUsage: a key's live usage against its own limits, by id or
// name, with the budget alert the console marks (SPEC 3.1).
func TestAdminKeyUsage(t *testing.T) {
	cfg, err := config.Load([]byte(`
admin: {key: admin-secret}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: a1, model: a, provider: sim, price: {input: 1, output: 2}}
teams:
  - name: web
    models: [a]
    keys:
      - sk-plain
      - {key: sk-ci, name: ci, rpm: 50, budget: {usd: 5, period: daily, alert_at: 0.000001}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = ""
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })

	var u keyUsageAnswer
	decodeJSON(t, adm(t, n, "GET", "/admin/teams/web/keys/ci/usage", ""), &u)
	if u.KeyName != "ci" || u.RPM.Limit != 50 || u.RPM.Used != 0 || u.Budget.USD != 5 || u.Budget.Period != "daily" || u.Budget.Alerted {
		t.Fatalf("before any request: %+v", u)
	}
	id := u.Key
	if chat(t, n, "sk-ci", "a") != 200 {
		t.Fatal("the ci key's request failed")
	}
	w := adm(t, n, "GET", "/admin/teams/web/keys/"+id+"/usage", "")
	decodeJSON(t, w, &u)
	if w.Code != 200 || u.Key != id || u.RPM.Used != 1 || u.Budget.Spent <= 0 || !u.Budget.Alerted {
		t.Fatalf("after one request, by id: %s", w.Body)
	}
	// the plain key meets the team's level alone: no limits, no usage of its own
	if chat(t, n, "sk-plain", "a") != 200 {
		t.Fatal("the plain key's request failed")
	}
	var plain keyUsageAnswer
	for id, k := range keyList(t, n, "web") {
		if k.Name != "ci" {
			decodeJSON(t, adm(t, n, "GET", "/admin/teams/web/keys/"+id+"/usage", ""), &plain)
		}
	}
	if plain.Key == "" || plain.RPM.Limit != 0 || plain.RPM.Used != 0 || plain.Budget.USD != 0 || plain.Budget.Period != "" {
		t.Fatalf("a key without a level: %+v", plain)
	}
	wantErr(t, adm(t, n, "GET", "/admin/teams/web/keys/nope/usage", ""), 404, "id")
	wantErr(t, adm(t, n, "GET", "/admin/teams/zz/keys/ci/usage", ""), 404, "name")
}
