package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every attempt ran into server.upstream_timeout (no first byte): the
// attempt's context was canceled with the timeout as its cause, so the
// adapter reported "request canceled by the client", and the client got a
// 502 saying it had canceled itself. It is a timeout: 504, and the message
// says the upstream did not answer in time.
func TestHostile4PathUpstreamTimeoutIs504(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server sees the gateway hang up
		<-r.Context().Done()      // never answers
	}))
	defer up.Close()
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		n := newTestNode(t, strings.ReplaceAll(`
server: {upstream_timeout: 100ms, request_timeout: 10s}
routing: {max_attempts: {chat: {sync: 1, stream: 1}}}
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`, "${UPSTREAM}", up.URL))
		w := do(t, n.Handler(), "POST", tc.path, testKey, tc.body)
		if w.Code != http.StatusGatewayTimeout {
			t.Errorf("%s %s: status %d, want 504: %s", tc.path, tc.body, w.Code, w.Body)
		}
		if strings.Contains(w.Body.String(), "canceled by the client") || !json.Valid(w.Body.Bytes()) {
			t.Errorf("%s: the client is told it canceled, or the body is not JSON: %s", tc.path, w.Body)
		}
	}
}
