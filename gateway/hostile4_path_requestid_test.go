package gateway

import "testing"

// GET /v1/models (on success and on its 401) and the 404 of an unknown
// path (a mistyped endpoint) answered without X-Request-Id and request-id,
// where every other client endpoint carries both (SPEC 10: every response
// carries request-id equal to X-Request-Id; 12.2).
func TestHostile4PathModelsListCarriesRequestID(t *testing.T) {
	n := newTestNode(t, simYAML)
	for _, tc := range []struct{ method, path, key string }{
		{"GET", "/v1/models", testKey}, {"GET", "/v1/models", "sk-nope"}, {"GET", "/v1/models", ""},
		{"POST", "/v1/chat/completion", testKey},
	} {
		key := tc.method + " " + tc.path + " " + tc.key
		w := do(t, n.Handler(), tc.method, tc.path, tc.key, "", "X-Request-Id", "list-1")
		if w.Header().Get("X-Request-Id") != "list-1" || w.Header().Get("Request-Id") != "list-1" {
			t.Errorf("%s: status %d, X-Request-Id %q, request-id %q; want both \"list-1\"",
				key, w.Code, w.Header().Get("X-Request-Id"), w.Header().Get("Request-Id"))
		}
	}
}
