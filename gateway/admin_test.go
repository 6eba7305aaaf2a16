package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"switchyard/catalog"
	"switchyard/config"
)

const adminKey = "admin-secret"

const adminYAML = `
admin: {key: admin-secret}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: a1, model: a, provider: sim}
  - {id: a2, model: a, provider: sim}
  - {id: b1, model: b, provider: sim}
  - {id: c1, model: c, provider: sim}
  - {id: e1, model: e, provider: sim, operations: [embeddings]}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
routing:
  fallbacks:
    - {primary: a, reason: general, models: [b, c]}
`

func adminNode(t *testing.T, store catalog.Store) *Node {
	t.Helper()
	cfg, err := config.Load([]byte(adminYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = ""
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

func adm(t *testing.T, n *Node, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	return do(t, n.Handler(), method, path, adminKey, body)
}

func fallbacks(t *testing.T, n *Node) []catalog.Chain {
	t.Helper()
	w := adm(t, n, "GET", "/admin/fallbacks", "")
	var out struct{ Fallbacks []catalog.Chain }
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	return out.Fallbacks
}

func TestAdminAuth(t *testing.T) {
	n := adminNode(t, nil)
	for _, key := range []string{"", "sk-test", "admin-secreT"} {
		w := do(t, n.Handler(), "PUT", "/admin/fallbacks", key, `{"primaryModel":"b","fallbackModels":["c"]}`)
		if w.Code != 401 {
			t.Fatalf("key %q: %d", key, w.Code)
		}
	}
	if got := fallbacks(t, n); len(got) != 1 {
		t.Fatalf("unauthorized write changed the catalog: %+v", got)
	}
}

func TestAdminFallbackValidationOverHTTP(t *testing.T) {
	n := adminNode(t, nil)
	cases := []struct {
		name, body string
		status     int
		field      string
	}{
		{"malformed", `{"primaryModel":`, 400, ""},
		{"unknown field", `{"primary":"a","fallbackModels":["b"]}`, 400, "primary"},
		{"empty body", ``, 400, ""},
		{"no targets", `{"primaryModel":"a","fallbackModels":[]}`, 422, "fallbackModels"},
		{"too many", `{"primaryModel":"a","fallbackModels":["b","c","e","x","y","z"]}`, 422, "fallbackModels"},
		{"duplicate", `{"primaryModel":"a","fallbackModels":["b","b"]}`, 422, "fallbackModels[1]"},
		{"self", `{"primaryModel":"a","fallbackModels":["a"]}`, 422, "fallbackModels[0]"},
		{"reason", `{"primaryModel":"a","reason":"slow","fallbackModels":["b"]}`, 400, "reason"},
		{"unknown primary", `{"primaryModel":"zz","fallbackModels":["b"]}`, 422, "primaryModel"},
		{"unknown target", `{"primaryModel":"a","fallbackModels":["zz"]}`, 422, "fallbackModels[0]"},
		{"no shared op", `{"primaryModel":"a","fallbackModels":["e"]}`, 422, "fallbackModels[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := adm(t, n, "PUT", "/admin/fallbacks", tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d want %d: %s", w.Code, tc.status, w.Body)
			}
			var e struct {
				Error struct{ Message, Param string }
			}
			_ = json.Unmarshal(w.Body.Bytes(), &e)
			if e.Error.Message == "" || (tc.field != "" && e.Error.Param != tc.field) {
				t.Fatalf("error must name field %q: %s", tc.field, w.Body)
			}
			if got := fallbacks(t, n); len(got) != 1 || len(got[0].FallbackModels) != 2 {
				t.Fatalf("rejected write changed the catalog: %+v", got)
			}
		})
	}
	w := adm(t, n, "PUT", "/admin/fallbacks", `{"primaryModel":"b","fallbackModels":["c"]}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := fallbacks(t, n); len(got) != 2 || got[1].Reason != "general" {
		t.Fatalf("%+v", got)
	}
	if w := adm(t, n, "DELETE", "/admin/fallbacks?primaryModel=b", ""); w.Code != 200 {
		t.Fatalf("delete: %d %s", w.Code, w.Body)
	}
	if w := adm(t, n, "DELETE", "/admin/fallbacks?primaryModel=b", ""); w.Code != 404 {
		t.Fatalf("delete again: %d", w.Code)
	}
}

func TestAdminLifecycleOverHTTP(t *testing.T) {
	n := adminNode(t, nil)
	if w := adm(t, n, "POST", "/admin/deployments/b1/disable", ""); w.Code != 200 {
		t.Fatalf("disable %d %s", w.Code, w.Body)
	}
	if got := fallbacks(t, n); len(got) != 1 || len(got[0].FallbackModels) != 2 {
		t.Fatalf("disable must keep chains: %+v", got)
	}
	// the disabled deployment serves nothing
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"b","messages":[{"role":"user","content":"x"}]}`); w.Code != 404 {
		t.Fatalf("disabled-only model must be 404, got %d", w.Code)
	}
	adm(t, n, "POST", "/admin/deployments/b1/enable", "")
	if w := adm(t, n, "DELETE", "/admin/deployments/a1", ""); w.Code != 200 || len(fallbacks(t, n)) != 1 {
		t.Fatalf("delete with another left keeps chains: %d %+v", w.Code, fallbacks(t, n))
	}
	if w := adm(t, n, "PUT", "/admin/deployments/b1", `{"model":"renamed","provider":"sim"}`); w.Code != 409 {
		t.Fatalf("rename of referenced last deployment: %d %s", w.Code, w.Body)
	}
	if w := adm(t, n, "DELETE", "/admin/deployments/c1", ""); w.Code != 200 {
		t.Fatal(w.Code)
	}
	if got := fallbacks(t, n); len(got) != 1 || strings.Join(got[0].FallbackModels, ",") != "b" {
		t.Fatalf("target removal: %+v", got)
	}
	if w := adm(t, n, "DELETE", "/admin/deployments/a2", ""); w.Code != 200 {
		t.Fatal(w.Code)
	}
	if got := fallbacks(t, n); len(got) != 0 {
		t.Fatalf("last primary deployment must delete its chains: %+v", got)
	}
	w := adm(t, n, "PUT", "/admin/deployments/n1", `{"model":"new","provider":"sim","price":{"input":1,"output":1}}`)
	if w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"new","messages":[{"role":"user","content":"x"}]}`); w.Code != 200 {
		t.Fatalf("new deployment must serve at once: %d %s", w.Code, w.Body)
	}
	if w := adm(t, n, "PUT", "/admin/deployments/n2", `{"model":"new","provider":"ghost"}`); w.Code != 422 {
		t.Fatalf("bad provider: %d", w.Code)
	}
	if w := adm(t, n, "PUT", "/admin/deployments/n2", `{"id":"other","model":"new","provider":"sim"}`); w.Code != 400 {
		t.Fatalf("id mismatch: %d", w.Code)
	}
}

func TestAdminPersistenceFileStore(t *testing.T) {
	dir := t.TempDir()
	fs, _ := catalog.NewFileStore(dir)
	n := adminNode(t, fs)
	if w := adm(t, n, "PUT", "/admin/fallbacks", `{"primaryModel":"b","reason":"context_window","fallbackModels":["c"]}`); w.Code != 200 {
		t.Fatal(w.Body)
	}
	adm(t, n, "DELETE", "/admin/deployments/a1", "")
	// "restart": a new node on the same directory reads the same catalog
	fs2, _ := catalog.NewFileStore(dir)
	n2 := adminNode(t, fs2)
	got := fallbacks(t, n2)
	if len(got) != 2 {
		t.Fatalf("restart lost admin changes: %+v", got)
	}
	if _, ok := n2.Catalog.Load().Deployments["a1"]; ok {
		t.Fatal("deleted deployment came back after restart (config must only seed once)")
	}
}

// TestAdminConcurrentWrites: parallel conflicting writes leave a catalog in
// which no chain points at a model without a deployment.
func TestAdminConcurrentWrites(t *testing.T) {
	n := adminNode(t, nil)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(3)
		go func(i int) {
			defer wg.Done()
			adm(t, n, "PUT", "/admin/fallbacks", fmt.Sprintf(`{"primaryModel":"b","fallbackModels":["c"],"reason":"%s"}`, []string{"general", "context_window"}[i%2]))
		}(i)
		go func(i int) {
			defer wg.Done()
			adm(t, n, "DELETE", "/admin/deployments/c1", "")
			adm(t, n, "PUT", "/admin/deployments/c1", `{"model":"c","provider":"sim"}`)
		}(i)
		go func(i int) {
			defer wg.Done()
			adm(t, n, "PUT", "/admin/fallbacks", `{"primaryModel":"a","fallbackModels":["c","b"]}`)
		}(i)
	}
	wg.Wait()
	if msg := n.Catalog.Load().State.Consistent(); msg != "" {
		t.Fatal(msg)
	}
}

// The cluster view names each node's build version (the console's Version column).
func TestAdminClusterNamesVersion(t *testing.T) {
	cfg, err := config.Load([]byte(adminYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = ""
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1, Version: "v9.9.9-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	w := adm(t, n, "GET", "/admin/cluster", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"version":"v9.9.9-test"`) {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
}
