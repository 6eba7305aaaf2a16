package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"switchyard/gateway/console"
)

// dotPathYAML: an admin key, one team, one model.
const dotPathYAML = `
admin: {key: dot-admin-key}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: d1, model: m, provider: sim}
teams:
  - {name: t, keys: ["sk-dot-team"], models: ["*"]}
`

// dotPathScript builds each admin path the way the console's views do
// (api.js's adminPath; before it existed, a template of enc()'d values),
// and fetches it as the page does. Node's fetch resolves the path with the
// WHATWG URL parser, the browsers' own: "." and ".." segments, also as
// %2E, are removed before the request leaves.
const dotPathScript = `
import fs from 'node:fs';
const api = await import('data:text/javascript,' + encodeURIComponent(fs.readFileSync(process.env.API_JS, 'utf8')));
const build = api.adminPath ?? ((s, ...v) => String.raw({ raw: s }, ...v.map(api.enc)));
const out = [];
for (const c of JSON.parse(process.env.CASES)) {
  const p = c.kind === 'user' ? build` + "`/admin/teams/${c.team}/users/${c.name}`" + ` : build` + "`/admin/requests/${c.name}`" + `;
  const res = await fetch(new URL(p, process.env.BASE), { headers: { Authorization: 'Bearer ' + process.env.KEY } });
  out.push({ path: p, url: res.url, status: res.status, body: await res.text() });
}
console.log(JSON.stringify(out));
`

// An end user (any id a client sends, SPEC 3.1) or a request id (a
// client's X-Request-Id) may be "." or "..". The console put them in admin
// paths with encodeURIComponent, which leaves dots alone, and the browser
// resolved the dot segment away: the usage view's user ".." fetched
// /admin/teams/t/ (redirected to the team), the request ".." fetched
// /admin/ (404). The console now joins such a segment to the one before it
// by %2F, and the gateway decodes that back to the entity's name.
func TestHostile5ConsolePathNamesTheEntity(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the console's path helper is not run")
	}
	n := newTestNode(t, dotPathYAML)
	for _, id := range []string{"..", "."} {
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-dot-team",
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", id, "X-Switchyard-User", id)
		if w.Code != 200 {
			t.Fatalf("request %q: %d %s", id, w.Code, w.Body)
		}
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	type tcase struct {
		Kind string `json:"kind"`
		Team string `json:"team"`
		Name string `json:"name"`
	}
	cases := []tcase{
		{"user", "t", ".."}, {"user", "t", "."}, {"user", "t", "../usage"}, {"user", "t", "a/.."}, {"user", "t", "x.y"},
		{"request", "", ".."}, {"request", "", "."},
	}
	cj, _ := json.Marshal(cases)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--input-type=module", "-e", dotPathScript)
	apiJS, _ := filepath.Abs("console/static/js/api.js")
	cmd.Env = append(os.Environ(), "API_JS="+apiJS, "BASE="+srv.URL, "KEY=dot-admin-key", "CASES="+string(cj))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v %s", err, out)
	}
	var res []struct {
		Path, URL, Body string
		Status          int
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(cases) {
		t.Fatalf("node output %s: %v", out, err)
	}
	for i, c := range cases {
		r := res[i]
		var body map[string]any
		_ = json.Unmarshal([]byte(r.Body), &body)
		field := "user"
		if c.Kind == "request" {
			field = "request_id"
		}
		if r.Status != 200 || body[field] != c.Name {
			t.Errorf("%s %q: the console's path %s fetched %s: %d %s; want the %s named %q", c.Kind, c.Name, r.Path, r.URL, r.Status,
				r.Body, c.Kind, c.Name)
		}
	}
}

// Every view builds an admin path's segments with adminPath, never a
// template or concatenation of enc() (query values keep enc).
func TestHostile5ConsoleViewsBuildAdminPathsWithAdminPath(t *testing.T) {
	bad := regexp.MustCompile("(/admin/[^'\"`?]*\\$\\{(enc|encodeURIComponent)\\()|('/admin/[^'?]*' \\+ (enc|encodeURIComponent)\\()")
	for _, f := range consoleFiles(t) {
		if !strings.HasSuffix(f, ".js") {
			continue
		}
		b, err := fsReadConsole(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range bad.FindAllString(string(b), -1) {
			t.Errorf("%s builds an admin path segment with enc: %s", f, m)
		}
	}
}

func fsReadConsole(name string) ([]byte, error) {
	f, err := console.Files().Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return []byte(sb.String()), nil
}
