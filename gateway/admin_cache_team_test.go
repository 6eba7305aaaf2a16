package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"switchyard/config"
)

// TestAdminTeamCacheSwitch: PUT /admin/teams/{name} takes the team's cache
// switch (SPEC 11, 18) and it applies to the team's next request, without
// a restart. The file's teams[].cache seeds it (GET shows it); a PUT
// without cache inherits cache.enabled; {"enabled": false} turns a team
// off under a global on, {"enabled": true} on under a global off. Before,
// the API ignored the field and the switch was the file's, read at start.
func TestAdminTeamCacheSwitch(t *testing.T) {
	for _, global := range []bool{true, false} {
		yaml := `
admin: {key: admin-secret}
cache: {enabled: ` + map[bool]string{true: "true", false: "false"}[global] + `}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: a1, model: a, provider: sim}
models:
  - {name: a, cache: {enabled: true}} # under a global off, a model must be on too
teams:
  - {name: web, keys: ["sk-web"], models: [a], cache: {enabled: ` + map[bool]string{true: "false", false: "true"}[global] + `}}
`
		cfg, err := config.Load([]byte(yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = ""
		n, err := Assemble(cfg, Options{Logger: slog.New(slog.DiscardHandler), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		cacheHeader := func() string {
			t.Helper()
			w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-web", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`)
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			return w.Header().Get("X-Switchyard-Cache")
		}
		view := func() *bool {
			t.Helper()
			var v struct{ Team teamView }
			decodeJSON(t, adm(t, n, "GET", "/admin/teams/web", ""), &v)
			return v.Team.Cache.Enabled
		}
		// seeded from the file: the team's switch is the opposite of the global one
		if e := view(); e == nil || *e == global {
			t.Fatalf("global %v: the file's team switch is not in the catalog: %v", global, e)
		}
		if h := cacheHeader(); (h != "") != !global {
			t.Fatalf("global %v, the file's team switch %v: cache header %q", global, !global, h)
		}
		steps := []struct {
			body string
			on   bool
		}{
			{`{"models":["a"],"cache":{"enabled":` + map[bool]string{true: "true", false: "false"}[global] + `}}`, global},
			{`{"models":["a"],"cache":{"enabled":` + map[bool]string{true: "false", false: "true"}[global] + `}}`, !global},
			{`{"models":["a"]}`, global}, // no switch of its own: cache.enabled
		}
		for _, s := range steps {
			if w := adm(t, n, "PUT", "/admin/teams/web", s.body); w.Code != http.StatusOK {
				t.Fatalf("PUT %s: %d %s", s.body, w.Code, w.Body)
			}
			if h := cacheHeader(); (h != "") != s.on {
				t.Fatalf("global %v, PUT %s: cache header %q, want cacheable %v", global, s.body, h, s.on)
			}
		}
		if e := view(); e != nil {
			t.Fatalf("a PUT without cache left the switch %v", *e)
		}
	}
}
