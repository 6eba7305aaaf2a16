package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/config"
)

const reloadYAML = `
admin: {key: admin-secret}
data_dir: ""
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
  - {name: slow, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 20, output_tokens: 10}}
deployments:
  - {id: a1, model: a, provider: sim}
  - {id: a2, model: a, provider: sim}
  - {id: s1, model: slow, provider: slow}
teams:
  - {name: web, keys: ["sk-web", "sk-old"], models: ["*"]}
smart_routing:
  routes: [{alias: normal, easy: a, hard: slow}]
`

func reloadNode(t *testing.T, yml string) (*Node, string, *lockedBuf) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.yaml")
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuf{}
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Seed: 1, ConfigPath: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n, path, logs
}

func rewrite(t *testing.T, path, yml string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReloadAppliesLive(t *testing.T) {
	n, path, _ := reloadNode(t, reloadYAML)
	// live scoring state before the reload
	st := n.router().State("a1")
	old := n.router()
	oldAdapter := n.adapters()["sim"]
	before := n.router().Health(time.Now())

	yml := strings.NewReplacer(
		`data_dir: ""`, "data_dir: \"\"\nserver: {max_body_bytes: 200}\nrouting: {default_strategy: least_busy}",
		`{name: slow, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 20, output_tokens: 10}}`,
		`{name: slow, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 3}}`,
		`routes: [{alias: normal, easy: a, hard: slow}]`, `routes: [{alias: normal, easy: slow, hard: a}, {alias: fast, easy: a, hard: a}]`,
		`"sk-web", "sk-old"`, `"sk-web", "sk-new"`,
	).Replace(reloadYAML)
	rewrite(t, path, yml)
	w := adm(t, n, "POST", "/admin/reload", "")
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var rep ReloadReport
	decodeJSON(t, w, &rep)
	if strings.Join(rep.Applied, ",") != "server,providers,routing,smart_routing,teams[].keys" || len(rep.NotApplied) != 0 ||
		len(rep.CatalogManaged) != 0 {
		t.Fatalf("%+v", rep)
	}
	// routing: new knobs, same deployment state objects
	if n.router() == old || n.router().State("a1") != st {
		t.Fatal("the router must be reconfigured and keep each deployment's state")
	}
	if len(n.router().Health(time.Now())) != len(before) {
		t.Fatal("deployment states lost")
	}
	var models struct {
		DefaultStrategy string `json:"default_strategy"`
		Models          []modelView
	}
	decodeJSON(t, adm(t, n, "GET", "/admin/models", ""), &models)
	if models.DefaultStrategy != "least_busy" || models.Models[0].Strategy != "least_busy" {
		t.Fatalf("default strategy not live: %+v", models)
	}
	// providers: the unchanged one keeps its adapter, the changed one is new
	if n.adapters()["sim"] != oldAdapter {
		t.Fatal("an unchanged provider must keep its adapter")
	}
	// server limits: the body limit is live
	big := `{"model":"a","messages":[{"role":"user","content":"` + strings.Repeat("x", 300) + `"}]}`
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-web", big); w.Code != 413 {
		t.Fatalf("server.max_body_bytes 200 not live: %d", w.Code)
	}
	// smart routing: the easy target of normal is now slow, and fast exists
	w = do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-web", `{"model":"normal","messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != 200 || w.Header().Get("X-Switchyard-Tier-Target") != "slow" {
		t.Fatalf("%d target %q", w.Code, w.Header().Get("X-Switchyard-Tier-Target"))
	}
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-web", `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`); w.Code != 200 {
		t.Fatalf("new route: %d %s", w.Code, w.Body)
	}
	// config keys follow the file; the catalog's teams are not reseeded
	if chat(t, n, "sk-old", "a") != 401 || chat(t, n, "sk-new", "a") != 200 || chat(t, n, "sk-web", "a") != 200 {
		t.Fatal("config keys must follow the file on reload")
	}
}

// The running configuration keeps a fingerprint of the file's teams, not
// the teams (the catalog holds them): a reload of the same file reports no
// section, one that changes a team's fields but not its keys applies
// nothing and reports "teams" as catalog-managed (SPEC 11: the catalog's
// teams are not overwritten), and the running configuration still holds no
// team.
func TestReloadTeamsByFingerprint(t *testing.T) {
	n, path, _ := reloadNode(t, reloadYAML)
	if teams := n.Server.cfg().Teams; teams != nil {
		t.Fatalf("the running configuration keeps %d teams", len(teams))
	}
	reload := func() ReloadReport {
		t.Helper()
		w := adm(t, n, "POST", "/admin/reload", "")
		if w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		var rep ReloadReport
		decodeJSON(t, w, &rep)
		return rep
	}
	if rep := reload(); len(rep.Applied) != 0 {
		t.Fatalf("the same file applied %v", rep.Applied)
	}
	rewrite(t, path, strings.Replace(reloadYAML, `models: ["*"]}`, `models: ["*"], rpm: 60}`, 1))
	if rep := reload(); len(rep.Applied) != 0 || len(rep.CatalogManaged) != 1 || rep.CatalogManaged[0].Field != "teams" {
		t.Fatalf("a team's rpm changed: applied %v, catalog_managed %+v", rep.Applied, rep.CatalogManaged)
	}
	if rep := reload(); len(rep.Applied) != 0 || len(rep.CatalogManaged) != 0 || n.Server.cfg().Teams != nil {
		t.Fatalf("the same file again applied %v, catalog_managed %+v", rep.Applied, rep.CatalogManaged)
	}
}

func TestReloadRestartOnlyFieldsReported(t *testing.T) {
	n, path, logs := reloadNode(t, reloadYAML)
	rewrite(t, path, strings.Replace(reloadYAML, `admin: {key: admin-secret}`, "admin: {key: admin-secret}\nserver: {listen: \":9999\", node_id: other}", 1))
	rep, err := n.Reloader.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.NotApplied, ",") != "server.listen,server.node_id" {
		t.Fatalf("%+v", rep)
	}
	if n.cfg().Server.Listen != ":8080" || !strings.Contains(logs.String(), "needs a restart") {
		t.Fatal("a restart-only field must keep its running value and be logged")
	}
}

func TestReloadBrokenFileChangesNothing(t *testing.T) {
	n, path, logs := reloadNode(t, reloadYAML)
	snap, lc := n.Catalog.Load(), n.Live.Load()
	cases := []struct {
		name, yml string
		want      []string
	}{
		{"invalid", strings.NewReplacer("kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 20", "kind: bogus, simulate: {ttfb: 0s, tokens_per_second: 20",
			"routes: [{alias: normal, easy: a, hard: slow}]", "routes: [{alias: normal, easy: a, hard: nowhere}]").Replace(reloadYAML),
			[]string{"providers[1].kind", "smart_routing.routes[0].hard"}},
		{"not yaml", "providers: [\n", []string{"yaml"}},
		{"provider removed under a stored deployment", strings.Replace(strings.Replace(strings.Replace(reloadYAML,
			"  - {name: slow, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 20, output_tokens: 10}}\n", "", 1),
			"  - {id: s1, model: slow, provider: slow}\n", "", 1), "hard: slow", "hard: a", 1), []string{`deployment "s1" in the catalog uses provider "slow"`}},
		{"missing file", "", []string{"no such file"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "missing file" {
				_ = os.Remove(path)
			} else {
				rewrite(t, path, tc.yml)
			}
			w := adm(t, n, "POST", "/admin/reload", "")
			if w.Code != 422 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			var out struct {
				Error  struct{ Code string }
				Report ReloadReport
			}
			decodeJSON(t, w, &out)
			got := strings.Join(out.Report.Problems, "\n")
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Fatalf("problems lack %q:\n%s", want, got)
				}
				esc, _ := json.Marshal(want) // the log is JSON
				if !strings.Contains(logs.String(), strings.Trim(string(esc), `"`)) {
					t.Fatalf("every problem must be logged; %q is not", want)
				}
			}
			if n.Catalog.Load() != snap || n.Live.Load() != lc {
				t.Fatal("a rejected file changed the running configuration")
			}
			if chat(t, n, "sk-old", "a") != 200 {
				t.Fatal("the running config must keep serving")
			}
		})
	}
}

func TestReloadDemoHasNoFile(t *testing.T) {
	n, _ := teamsNode(t)
	if w := adm(t, n, "POST", "/admin/reload", ""); w.Code != 409 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestReloadDuringStream: a stream in flight across a reload completes, on
// the adapter and plan it started with, while new requests see the new file.
func TestReloadDuringStream(t *testing.T) {
	n, path, _ := reloadNode(t, reloadYAML)
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"tell me"}]}`))
	req.Header.Set("Authorization", "Bearer sk-web")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil { // the stream has started
		t.Fatal(err)
	}
	// the reload replaces the slow provider (a new adapter) and the router
	rewrite(t, path, strings.Replace(reloadYAML, "tokens_per_second: 20, output_tokens: 10", "tokens_per_second: 30, output_tokens: 10", 1))
	if _, err := n.Reloader.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rd)
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the stream across the reload did not complete: %v %q", err, rest)
	}
}
