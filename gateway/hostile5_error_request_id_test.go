package gateway

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// docs.claude.com/en/api/errors, "Error shapes": an Anthropic error body
// carries the request's id as a top-level request_id beside type and
// error (the official Go SDK's ErrorResponse declares it required). Every
// gateway response has the id as request-id and X-Request-Id (SPEC 10),
// but the Anthropic-shaped error bodies had no request_id: an SDK user
// logging the decoded body lost the id the gateway's message tells them to
// quote. Each way an error reaches a /v1/messages client is covered: the
// pipeline (401, 400), count_tokens (teamOf) and the catch-all 404.
func TestHostile5AnthropicErrorBodyHasRequestID(t *testing.T) {
	n := newTestNode(t, simYAML)
	for _, tc := range []struct {
		name, method, path, key, body, clientID string
		status                                  int
	}{
		{"unknown key", "POST", "/v1/messages", "sk-nope", `{}`, "", 401},
		{"malformed JSON", "POST", "/v1/messages", testKey, `{`, "", 400},
		{"client id echoed", "POST", "/v1/messages", testKey, `{`, "my-req-7", 400},
		{"count_tokens unknown key", "POST", "/v1/messages/count_tokens", "sk-nope", `{}`, "", 401},
		{"unknown path", "POST", "/v1/messages/batches", testKey, `{}`, "", 404},
	} {
		var hdr []string
		if tc.clientID != "" {
			hdr = []string{"X-Request-Id", tc.clientID}
		}
		w := do(t, n.Handler(), tc.method, tc.path, tc.key, tc.body, hdr...)
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, w.Code, tc.status, w.Body)
			continue
		}
		id := w.Header().Get("Request-Id")
		if id == "" || id != w.Header().Get("X-Request-Id") || (tc.clientID != "" && id != tc.clientID) {
			t.Errorf("%s: request-id %q, X-Request-Id %q", tc.name, id, w.Header().Get("X-Request-Id"))
		}
		var er anthropic.ErrorResponse
		if err := json.Unmarshal(w.Body.Bytes(), &er); err != nil || er.Error.Type == "" {
			t.Errorf("%s: the SDK cannot decode %s: %v", tc.name, w.Body, err)
			continue
		}
		if !er.JSON.RequestID.Valid() || er.RequestID != id {
			t.Errorf("%s: body %s: request_id %q, want %q (the request-id header)", tc.name, w.Body, er.RequestID, id)
		}
	}
	// the OpenAI shape has no request_id and gets none
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-nope", `{}`)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil || w.Code != http.StatusUnauthorized {
		t.Fatalf("OpenAI 401: %d %s", w.Code, w.Body)
	}
	if _, ok := raw["request_id"]; ok {
		t.Errorf("OpenAI error body %s gained a request_id", w.Body)
	}
}
