package gateway

import (
	"strings"
	"testing"
)

// SPEC 3.1: a key's models narrow its team's allowlist on every endpoint.
// POST /v1/messages/count_tokens checked only the team's list, so a key
// narrowed to one model was answered for any model its team allows (while
// /v1/messages refuses it with 403).
func TestHostile2CountTokensHonoursKeyModels(t *testing.T) {
	n := newTestNode(t, strings.Replace(simYAML, `  - {name: t, keys: ["sk-test"], models: [m, e, i, normal]}`,
		`  - {name: t, models: [m, e, i, normal], keys: ["sk-test", {key: sk-narrow, name: ci-bot, models: [e]}]}`, 1))
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		key, path string
		want      int
	}{
		{"sk-test", "/v1/messages/count_tokens", 200},
		{"sk-narrow", "/v1/messages/count_tokens", 403},
		{"sk-narrow", "/v1/messages", 403},
	} {
		w := do(t, n.Handler(), "POST", tc.path, tc.key, body, "Anthropic-Version", "2023-06-01")
		if w.Code != tc.want {
			t.Errorf("%s with %s: %d %s, want %d", tc.path, tc.key, w.Code, w.Body, tc.want)
		}
	}
}
