package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// Issue 30 (finding 8): /metrics was on the client listener without
// authentication, showing every team's name, tokens and spend to any
// client. With server.metrics_listen it is served only by MetricsServer.
func TestMetricsListen(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, server string
		onMain       bool
	}{
		{"default: main listener", "", true},
		{"metrics_listen set", "server: {metrics_listen: \"127.0.0.1:0\"}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, tc.server+simYAML)
			if w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, chat); w.Code != 200 {
				t.Fatalf("chat: %d %s", w.Code, w.Body)
			}
			w := do(t, n.Handler(), "GET", "/metrics", "", "")
			if got := w.Code == 200 && strings.Contains(w.Body.String(), "switchyard_requests_total"); got != tc.onMain {
				t.Fatalf("/metrics on the main listener: %d (served=%v, want %v)", w.Code, got, tc.onMain)
			}
			ms := n.MetricsServer()
			if (ms != nil) == tc.onMain {
				t.Fatalf("MetricsServer = %v with metrics_listen %q", ms, n.Config.Server.MetricsListen)
			}
			if ms != nil {
				rec := httptest.NewRecorder()
				ms.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				if rec.Code != 200 || !strings.Contains(rec.Body.String(), "switchyard_requests_total") {
					t.Fatalf("metrics listener: %d", rec.Code)
				}
				rec = httptest.NewRecorder()
				ms.Handler.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(chat)))
				if rec.Code != 404 && rec.Code != 405 {
					t.Fatalf("the metrics listener serves more than /metrics: %d", rec.Code)
				}
			}
		})
	}
}
