package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const walkthroughYAML = `
server: {listen: "${ADDR}"}
admin: {key: ${SWITCHYARD_ADMIN_KEY}}
data_dir: ""
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: mini-a, model: gpt-4o-mini, provider: sim}
  - {id: mini-b, model: gpt-4o-mini, provider: sim}
teams:
  - {name: web, keys: ["sk-web"], models: ["*"]}
routing:
  default_strategy: simple_shuffle
`

// walkthrough returns the README's operations walkthrough: the sh block
// between the walkthrough markers.
func walkthrough(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- walkthrough:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- walkthrough:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md lost its walkthrough markers")
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```sh")
	block = strings.TrimSuffix(block, "```")
	return block
}

// TestREADMEWalkthrough runs the README's operations walkthrough, line by
// line as written, with bash against a real gateway, then checks what it
// did: team, keys (the old one revoked, the new one working), the strategy,
// and the reloaded file.
func TestREADMEWalkthrough(t *testing.T) {
	for _, bin := range []string{"bash", "curl", "sed"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed: the README walkthrough needs it", bin)
		}
	}
	const adminKey = "walkthrough-admin"
	addr := freeAddr(t)
	path := filepath.Join(t.TempDir(), "switchyard.yaml")
	yml := strings.NewReplacer("${ADDR}", addr, "${SWITCHYARD_ADMIN_KEY}", adminKey).Replace(walkthroughYAML)
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := serveForTest(t, path)
	gw := "http://" + addr

	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	cmd := exec.CommandContext(sctx, "bash", "-euo", "pipefail", "-c", walkthrough(t))
	cmd.Env = append(os.Environ(), "GW="+gw, "SWITCHYARD_ADMIN_KEY="+adminKey, "CONFIG="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README walkthrough failed: %v\n%s", err, out)
	}

	get := func(p string) string {
		req, _ := http.NewRequest("GET", gw+p, nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	keys := get("/admin/teams/mobile/keys")
	if strings.Count(keys, `"id":`) != 1 || !strings.Contains(keys, `"name":"ios-app-2"`) {
		t.Fatalf("after the rotation the team holds only the successor: %s", keys)
	}
	models := get("/admin/models")
	if !strings.Contains(models, `"default_strategy":"least_busy"`) || !strings.Contains(models, `"strategy":"adaptive"`) {
		t.Fatalf("strategy change or reload missing: %s", models)
	}
	if !strings.Contains(string(out), `"rpm":{"limit":600,"used":1}`) {
		t.Fatalf("the usage step must show the request just sent:\n%s", out)
	}
}
