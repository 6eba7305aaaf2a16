package gateway

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"switchyard/gateway/console"
)

// consoleYAML uses names that appear nowhere in the console's files, so a
// test can tell that a response carries admin data.
const consoleYAML = `
admin: {key: console-admin-key}
providers:
  - {name: prov-quokka, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: dep-zebra-17, model: model-okapi, provider: prov-quokka}
  - {id: dep-zebra-18, model: model-okapi, provider: prov-quokka}
  - {id: dep-heron-3, model: model-tapir, provider: prov-quokka}
teams:
  - {name: team-narwhal, keys: ["sk-team-narwhal-secret"], models: ["*"]}
routing:
  fallbacks:
    - {primary: model-okapi, reason: general, models: [model-tapir]}
smart_routing:
  routes: [{alias: alias-gecko, easy: model-okapi, hard: model-tapir}]
`

var consoleSecrets = []string{"dep-zebra", "model-okapi", "model-tapir", "team-narwhal", "prov-quokka", "alias-gecko", "console-admin-key"}

func consoleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := fs.WalkDir(console.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) < 5 {
		t.Fatalf("embedded console files: %v %v", files, err)
	}
	return files
}

func TestConsoleIsOffWithoutTheAdminAPI(t *testing.T) {
	n := newTestNode(t, simYAML) // no admin.key
	paths := []string{"/ui", "/ui/", "/ui/index.html", "/ui/style.css", "/ui/js/app.js"}
	for _, f := range consoleFiles(t) {
		paths = append(paths, "/ui/"+f)
	}
	for _, p := range paths {
		w := do(t, n.Handler(), "GET", p, "", "")
		if w.Code != http.StatusNotFound {
			t.Errorf("GET %s with the admin API off: %d, want 404", p, w.Code)
		}
		if strings.Contains(w.Body.String(), "Switchyard console") {
			t.Errorf("GET %s with the admin API off served the console", p)
		}
	}
}

func TestConsoleServesItsFilesWithAStrictPolicyAndNoData(t *testing.T) {
	n := newTestNode(t, consoleYAML)
	w := do(t, n.Handler(), "GET", "/ui", "", "")
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d %q, want a redirect to /ui/", w.Code, w.Header().Get("Location"))
	}
	w = do(t, n.Handler(), "GET", "/ui/", "", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Switchyard console") {
		t.Fatalf("GET /ui/: %d %s", w.Code, w.Body)
	}
	csp := w.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy allows unsafe sources: %q", csp)
	}
	if w.Header().Get("X-Frame-Options") != "DENY" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("missing framing/sniffing headers: %v", w.Header())
	}
	inline := regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]|\sstyle=|\son[a-z]+=`)
	for _, f := range consoleFiles(t) {
		url := "/ui/" + f
		if f == "index.html" {
			url = "/ui/" // the file server sends /index.html to its folder
		}
		w := do(t, n.Handler(), "GET", url, "", "")
		if w.Code != http.StatusOK {
			t.Errorf("GET /ui/%s: %d", f, w.Code)
			continue
		}
		body := w.Body.String()
		for _, s := range consoleSecrets {
			if strings.Contains(body, s) {
				t.Errorf("/ui/%s carries admin data %q", f, s)
			}
		}
		if w.Header().Get("Content-Security-Policy") != console.Policy {
			t.Errorf("/ui/%s served without the console's policy", f)
		}
		if strings.HasSuffix(f, ".html") && inline.MatchString(body) {
			t.Errorf("%s has an inline script, style attribute or event handler (the policy would block it)", f)
		}
		if strings.HasSuffix(f, ".js") && strings.Contains(body, "innerHTML") {
			t.Errorf("%s writes innerHTML: build nodes with text instead (data from the API is not markup)", f)
		}
	}
	for _, p := range []string{"/ui/js/", "/ui/js", "/ui/nope.js", "/ui/../admin/cluster"} {
		if w := do(t, n.Handler(), "GET", p, "", ""); w.Code == http.StatusOK {
			t.Errorf("GET %s: 200 (%s), want no listing and no other file", p, w.Body)
		}
	}
}

// Every admin endpoint the console reads refuses a caller without the key
// and names nothing of the catalog.
func TestConsoleDataNeedsTheAdminKey(t *testing.T) {
	n := newTestNode(t, consoleYAML)
	reads := []string{"/admin/cluster", "/admin/health", "/admin/health?node=all", "/admin/deployments", "/admin/fallbacks",
		"/admin/smart-routing", "/admin/requests/x"}
	for _, key := range []string{"", "wrong-key", "sk-team-narwhal-secret"} {
		for _, p := range reads {
			w := do(t, n.Handler(), "GET", p, key, "")
			if w.Code != http.StatusUnauthorized {
				t.Errorf("GET %s with key %q: %d, want 401", p, key, w.Code)
			}
			for _, s := range consoleSecrets {
				if strings.Contains(w.Body.String(), s) {
					t.Errorf("GET %s with key %q leaks %q: %s", p, key, s, w.Body)
				}
			}
		}
	}
	if w := do(t, n.Handler(), "GET", "/admin/deployments", "console-admin-key", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "dep-zebra-17") {
		t.Fatalf("with the key: %d %s", w.Code, w.Body)
	}
}

func TestAdminSmartRoutingCountsByAlias(t *testing.T) {
	n := newTestNode(t, consoleYAML)
	send := func(body string) {
		t.Helper()
		if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-team-narwhal-secret", body); w.Code != http.StatusOK {
			t.Fatalf("chat: %d %s", w.Code, w.Body)
		}
	}
	send(`{"model":"alias-gecko","messages":[{"role":"user","content":"thanks!"}]}`)
	send(`{"model":"alias-gecko","messages":[{"role":"user","content":"hello there"}]}`)
	send(`{"model":"alias-gecko","reasoning_effort":"high","messages":[{"role":"user","content":"prove it"}]}`)
	w := do(t, n.Handler(), "GET", "/admin/smart-routing", "console-admin-key", "")
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var out struct {
		Threshold int
		Routes    []smartRoute
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Threshold != 4 || len(out.Routes) != 1 {
		t.Fatalf("answer %s", w.Body)
	}
	r := out.Routes[0]
	if r.Alias != "alias-gecko" || r.Easy != "model-okapi" || r.Hard != "model-tapir" || r.DefaultTier != "easy" {
		t.Errorf("route %+v", r)
	}
	if r.Requests["easy"] != 2 || r.Requests["hard"] != 1 {
		t.Errorf("split %v, want easy 2 hard 1", r.Requests)
	}
	if r.Scores.Count != 3 || len(r.Scores.Le) == 0 || len(r.Scores.Le) != len(r.Scores.Buckets) {
		t.Errorf("histogram %+v", r.Scores)
	}
	if r.Scores.Buckets[0] != 3 { // every score was 0: the first bucket (le 0) holds all three
		t.Errorf("cumulative buckets %v", r.Scores.Buckets)
	}
}
