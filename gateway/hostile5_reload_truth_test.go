package gateway

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestHostile5ReloadReportIsTruthful: a reload "applies providers,
// routing, smart routing and server limits live" and "never overwrites the
// admin-managed catalog (deployments, chains, models, teams, keys) once it
// is seeded" (SPEC 11); only the config keys of the catalog's teams follow
// the file. The report says so: what changed live is in applied (synced
// config keys as teams[].keys), what the file changed in the catalog's
// part goes to catalog_managed with the admin endpoint to use, logged at
// warn level once, and the catalog stays as it was. Before, a team's rpm
// was reported applied as "teams", a changed routing.fallbacks as
// "routing", and a changed deployment or model not at all.
func TestHostile5ReloadReportIsTruthful(t *testing.T) {
	cases := []struct {
		name     string
		old, new string // replaced in reloadYAML
		applied  []string
		managed  string // the catalog_managed field; "" = none
		endpoint string // named by its hint
	}{
		{name: "team fields", old: `models: ["*"]}`, new: `models: ["*"], rpm: 60, budget: {usd: 5}}`,
			applied: []string{}, managed: "teams", endpoint: "/admin/teams/"},
		{name: "routing.fallbacks", old: `data_dir: ""`, new: "data_dir: \"\"\nrouting: {fallbacks: [{primary: a, models: [slow]}]}",
			applied: []string{}, managed: "routing.fallbacks", endpoint: "/admin/fallbacks"},
		{name: "deployment", old: `{id: a2, model: a, provider: sim}`, new: `{id: a2, model: a, provider: sim, weight: 5}`,
			applied: []string{}, managed: "deployments", endpoint: "/admin/deployments/"},
		{name: "model strategy", old: `data_dir: ""`, new: "data_dir: \"\"\nmodels: [{name: a, strategy: least_busy}]",
			applied: []string{}, managed: "models", endpoint: "/admin/models/"},
		{name: "keys", old: `"sk-web", "sk-old"`, new: `"sk-web", "sk-new"`,
			applied: []string{"teams[].keys"}},
		// the global fallbacks and the default strategy are live: routing
		{name: "routing knobs", old: `data_dir: ""`, new: "data_dir: \"\"\nrouting: {default_strategy: least_busy, fallback_models: [slow]}",
			applied: []string{"routing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, path, logs := reloadNode(t, reloadYAML)
			sections := func() string { // what a reload must not touch, as the store writes it
				st := n.Catalog.Load().State
				b, err := json.Marshal([]any{st.Deployments, st.Fallbacks, st.Models, st.Teams})
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			before := sections()
			rewrite(t, path, strings.Replace(reloadYAML, tc.old, tc.new, 1))
			w := adm(t, n, "POST", "/admin/reload", "")
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if !strings.Contains(w.Body.String(), `"catalog_managed":`) {
				t.Fatalf("the report has no catalog_managed: %s", w.Body)
			}
			var rep ReloadReport
			decodeJSON(t, w, &rep)
			if !slices.Equal(rep.Applied, tc.applied) {
				t.Fatalf("applied %q, want %q", rep.Applied, tc.applied)
			}
			var fields []string
			for _, c := range rep.CatalogManaged {
				fields = append(fields, c.Field)
			}
			warned := strings.Count(logs.String(), `"level":"WARN","msg":"config reload: the file changed the admin-managed catalog`)
			if tc.managed == "" {
				if len(fields) != 0 || warned != 0 {
					t.Fatalf("catalog_managed %q (%d warnings), want none", fields, warned)
				}
				return
			}
			if len(rep.CatalogManaged) != 1 || fields[0] != tc.managed || !strings.Contains(rep.CatalogManaged[0].Hint, tc.endpoint) {
				t.Fatalf("catalog_managed %+v, want %s naming %s", rep.CatalogManaged, tc.managed, tc.endpoint)
			}
			if warned != 1 || !strings.Contains(logs.String(), tc.managed) {
				t.Fatalf("want one warn line naming %s; logs:\n%s", tc.managed, logs)
			}
			// the catalog is untouched: deployments, chains, models, teams
			if after := sections(); after != before {
				t.Fatalf("a reload changed the catalog:\n%s\n%s", before, after)
			}
			// the same file again changed nothing: no report, no warning
			w = adm(t, n, "POST", "/admin/reload", "")
			var again ReloadReport
			decodeJSON(t, w, &again)
			if len(again.Applied) != 0 || len(again.CatalogManaged) != 0 {
				t.Fatalf("the same file again: %+v", again)
			}
		})
	}
}
