package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// On /v1/messages errors carry Anthropic's error types; a body over
// server.max_body_bytes said invalid_request_error where the Messages API
// says request_too_large (its 413), so a client that dispatches on
// error.type took an oversized request for a malformed one.
func TestHostile4PathAnthropicErrorTypes(t *testing.T) {
	n := newTestNode(t, simYAML+"server: {max_body_bytes: 2048}\n")
	big := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`
	for _, tc := range []struct {
		name, key, body string
		status          int
		typ             string
	}{
		{"too large", testKey, big, http.StatusRequestEntityTooLarge, "request_too_large"},
		{"bad key", "sk-nope", `{"model":"m","max_tokens":5,"messages":[]}`, http.StatusUnauthorized, "authentication_error"},
		{"not allowed", testKey, `{"model":"secret","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, http.StatusForbidden, "permission_error"},
	} {
		w := do(t, n.Handler(), "POST", "/v1/messages", tc.key, tc.body)
		var got struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != tc.status || got.Type != "error" || got.Error.Type != tc.typ {
			t.Errorf("%s: %d %s, want %d with error.type %q", tc.name, w.Code, w.Body, tc.status, tc.typ)
		}
	}
}
