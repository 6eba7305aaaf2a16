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
