package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// SPEC 3.1: the end user is the first present of X-Switchyard-User,
// safety_identifier, user and metadata.user_id, at most 128 bytes; a team
// with require_user refuses a request that names none.
func TestEndUser(t *testing.T) {
	n := newTestNode(t, strings.Replace(simYAML, "teams:\n", "teams:\n  - {name: strict, keys: [\"sk-strict\"], models: [\"*\"], require_user: true}\n", 1))
	long := strings.Repeat("u", 129)
	cases := []struct {
		name, path, key, body, header string
		status                        int
		param, user                   string
	}{
		{"header wins", "/v1/chat/completions", testKey, `{"model":"m","user":"body-u","messages":[{"role":"user","content":"hi"}]}`, "hdr-u", 200, "", "hdr-u"},
		{"safety_identifier before user", "/v1/chat/completions", testKey, `{"model":"m","safety_identifier":"safe-u","user":"body-u","messages":[{"role":"user","content":"hi"}]}`, "", 200, "", "safe-u"},
		{"openai user", "/v1/chat/completions", testKey, `{"model":"m","user":"body-u","messages":[{"role":"user","content":"hi"}]}`, "", 200, "", "body-u"},
		{"anthropic metadata.user_id", "/v1/messages", testKey, `{"model":"m","max_tokens":8,"metadata":{"user_id":"an-u"},"messages":[{"role":"user","content":"hi"}]}`, "", 200, "", "an-u"},
		{"responses safety_identifier", "/v1/responses", testKey, `{"model":"m","safety_identifier":"resp-u","input":"hi"}`, "", 200, "", "resp-u"},
		{"none", "/v1/chat/completions", testKey, `{"model":"m","user":"","messages":[{"role":"user","content":"hi"}]}`, "", 200, "", ""},
		{"129 bytes in the body", "/v1/chat/completions", testKey, `{"model":"m","user":"` + long + `","messages":[{"role":"user","content":"hi"}]}`, "", 400, "user", ""},
		{"129 bytes in the header", "/v1/chat/completions", testKey, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, long, 400, "X-Switchyard-User", ""},
		{"required and missing", "/v1/chat/completions", "sk-strict", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "", 400, "user", ""},
		{"required and named", "/v1/chat/completions", "sk-strict", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "u1", 200, "", "u1"},
		// a credential is never stored as an end user (audit, usage rows, console)
		{"the request's own key", "/v1/chat/completions", testKey, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, testKey, 400, "X-Switchyard-User", ""},
		{"a key-shaped user", "/v1/chat/completions", testKey, `{"model":"m","user":"sk-proj-AbCdEfGhIjKlMnOpQrStUv12","messages":[{"role":"user","content":"hi"}]}`, "", 400, "user", ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "eu-" + string(rune('a'+i))
			hdr := []string{"X-Request-Id", id}
			if c.header != "" {
				hdr = append(hdr, "X-Switchyard-User", c.header)
			}
			w := do(t, n.Handler(), "POST", c.path, c.key, c.body, hdr...)
			if w.Code != c.status {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, c.status)
			}
			if c.status != 200 {
				var e struct{ Error struct{ Param, Code string } }
				_ = json.Unmarshal(w.Body.Bytes(), &e)
				if e.Error.Param != c.param {
					t.Fatalf("param %q, want %q: %s", e.Error.Param, c.param, w.Body)
				}
				return
			}
			es, _ := n.Audit.Lookup(context.Background(), id)
			if len(es) != 1 || es[0].User != c.user {
				t.Fatalf("audit user of %+v, want %q", es, c.user)
			}
		})
	}
}

// SPEC 3.1: a key object's models narrow its team's allowlist (403
// model_not_allowed outside them, and /v1/models lists only them); an
// expired config key is 401; the audit names the key by id.
func TestKeyObjectModelsAndExpiry(t *testing.T) {
	n := newTestNode(t, strings.Replace(simYAML, `  - {name: t, keys: ["sk-test"], models: [m, e, i, normal]}`,
		`  - {name: t, models: [m, e, i, normal], keys: ["sk-test", {key: sk-narrow, name: ci-bot, models: [e]}, {key: sk-old, expires_at: "2020-01-01T00:00:00Z"}]}`, 1))
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-test", chat); w.Code != 200 {
		t.Fatalf("team key: %d %s", w.Code, w.Body)
	}
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-narrow", chat); w.Code != 403 || !strings.Contains(w.Body.String(), "model_not_allowed") {
		t.Fatalf("narrowed key on a model outside its list: %d %s", w.Code, w.Body)
	}
	if w := do(t, n.Handler(), "POST", "/v1/embeddings", "sk-narrow", `{"model":"e","input":"x"}`, "X-Request-Id", "narrow-1"); w.Code != 200 {
		t.Fatalf("narrowed key on its model: %d %s", w.Code, w.Body)
	}
	if es, _ := n.Audit.Lookup(context.Background(), "narrow-1"); len(es) != 1 || !strings.HasPrefix(es[0].Key, "cfg_") {
		t.Fatalf("audit key of %+v", es)
	}
	if w := do(t, n.Handler(), "GET", "/v1/models", "sk-narrow", ""); w.Code != 200 || strings.Contains(w.Body.String(), `"m"`) || !strings.Contains(w.Body.String(), `"e"`) {
		t.Fatalf("models of a narrowed key: %s", w.Body)
	}
	if w := do(t, n.Handler(), "GET", "/v1/models/m", "sk-narrow", ""); w.Code != 404 {
		t.Fatalf("a narrowed key sees model m: %d", w.Code)
	}
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-old", chat); w.Code != 401 {
		t.Fatalf("expired config key: %d", w.Code)
	}
}
