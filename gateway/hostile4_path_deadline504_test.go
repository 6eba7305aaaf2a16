package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// When server.request_timeout passed before any upstream answered, the
// 504 was written under a write deadline equal to the request's deadline,
// which had passed: the write failed and the client got the connection
// closed without a response (SPEC 14: 504 on deadline). Tested over the
// production http.Server, where the deadlines are real.
func TestHostile4PathDeadline504Arrives(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done() // never answers
	}))
	defer up.Close()
	g := startGateway(t, `
server: {upstream_timeout: 10s, request_timeout: 300ms, write_timeout: 5s}
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`, up.URL)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		req, _ := http.NewRequest("POST", "http://"+g.addr+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer sk-test")
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Errorf("%s %s: no response: %v", tc.path, tc.body, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: %d %s (X-Request-Id %q), want a 504 with its request id", tc.path, resp.StatusCode, b, resp.Header.Get("X-Request-Id"))
		}
	}
}
