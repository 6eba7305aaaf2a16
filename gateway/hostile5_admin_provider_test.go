package gateway

import (
	"context"
	"strconv"
	"testing"

	"switchyard/catalog"
	"switchyard/config"
)

// TestHostile5AdminStoredDeploymentOfUnknownProvider: the catalog lives in
// the store (SPEC 11), the providers in each node's file. A stored
// deployment may name a provider this node's file does not have: the
// operator removed it and restarted (a reload refuses that, a restart
// does not look), or another replica with a newer file created it through
// the admin API. Such a deployment cannot be served here; it must be
// skipped like a disabled one ("at runtime missing or incompatible targets
// are skipped"), never turn a request into a 500 from a nil provider
// (SPEC 14: the gateway never panics on input).
func TestHostile5AdminStoredDeploymentOfUnknownProvider(t *testing.T) {
	cfg, err := config.Load([]byte(adminYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := catalog.SeedState(cfg)
	st.Deployments = append(st.Deployments,
		config.Deployment{ID: "a3", Model: "a", Provider: "gone", Operations: []string{"chat"}, Weight: 1},
		config.Deployment{ID: "g1", Model: "g", Provider: "gone", Operations: []string{"chat"}, Weight: 1})
	store := &catalog.MemoryStore{}
	if err := store.Save(context.Background(), 0, st); err != nil {
		t.Fatal(err)
	}
	n := adminNode(t, store)
	// model a: a1 and a2 serve; a3 must never be picked
	for i := range 30 {
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-test", `{"model":"a","messages":[{"role":"user","content":"hi `+strconv.Itoa(i)+`"}]}`)
		if w.Code != 200 {
			t.Fatalf("request %d for a (two servable deployments, one of an unknown provider): %d %s", i, w.Code, w.Body)
		}
	}
	// model g: nothing here can serve it; an answer, not an internal error
	for _, stream := range []string{"false", "true"} {
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-test", `{"model":"g","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`)
		if w.Code == 500 {
			t.Fatalf("stream %s: a deployment of an unknown provider made a 500: %s", stream, w.Body)
		}
	}
	// the admin view says it is not serving
	w := adm(t, n, "GET", "/admin/models", "")
	var out struct {
		Models []struct {
			Name    string
			Enabled int
		}
	}
	decodeJSON(t, w, &out)
	for _, m := range out.Models {
		if m.Name == "a" && m.Enabled != 2 {
			t.Fatalf("model a counts %d enabled deployments, want 2 (a3's provider is not configured here)", m.Enabled)
		}
	}
}
