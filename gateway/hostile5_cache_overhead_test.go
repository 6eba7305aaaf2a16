package gateway

import (
	"strconv"
	"testing"
)

// Every routed answer carries X-Switchyard-Overhead-Ms (SPEC 12.3: the
// time spent in the gateway itself, what benchmarks read), and a cache hit
// is routed (its plan was built: 404 and 403 come first) and answered by
// the gateway alone. The hit's sync body and its replayed stream had none.
func TestHostile5HitCarriesOverheadHeader(t *testing.T) {
	_, up := newFakeChat(t)
	n := cacheNode(t, up.URL, "", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	chat := `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"overhead"}]}`
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", chat); w.Header().Get("X-Switchyard-Overhead-Ms") == "" {
		t.Fatalf("the miss has no overhead header: %v", w.Header())
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", chat},
		{"/v1/chat/completions", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"overhead"}]}`},
		{"/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"overhead"}]}`},
	} {
		w := do(t, n.Handler(), "POST", c.path, "sk-a", c.body)
		if w.Header().Get("X-Switchyard-Cache") != "hit" {
			t.Fatalf("%s: not a hit: %v", c.body, w.Header())
		}
		v := w.Header().Get("X-Switchyard-Overhead-Ms")
		if ms, err := strconv.ParseFloat(v, 64); err != nil || ms < 0 {
			t.Errorf("%s %s: hit X-Switchyard-Overhead-Ms = %q", c.path, c.body, v)
		}
	}
}
