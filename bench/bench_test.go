// Package bench holds Switchyard's performance measurements: a Go benchmark
// of the in-process request path here, the loopback overhead script
// (overhead.sh) and the brownout experiment (brownout/).
package bench

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"switchyard/config"
	"switchyard/gateway"
)

const benchYAML = `
data_dir: ""
providers: [{name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 0, output_tokens: 16}}]
deployments: [{id: a, model: m, provider: sim}, {id: b, model: m, provider: sim}]
models: [{name: m, strategy: STRATEGY}]
teams: [{name: t, keys: ["sk-bench"], models: ["*"], rpm: 100000000, tpm: 100000000000}]
smart_routing: {routes: [{alias: normal, easy: m, hard: m}]}
`

func node(b *testing.B, strategy string) http.Handler {
	b.Helper()
	cfg, err := config.Load(bytes.ReplaceAll([]byte(benchYAML), []byte("STRATEGY"), []byte(strategy)), nil)
	if err != nil {
		b.Fatal(err)
	}
	n, err := gateway.Assemble(cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Close(context.Background()) })
	return n.Handler()
}

func serve(b *testing.B, h http.Handler, body []byte) {
	req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-bench")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

// BenchmarkChatInProcess is the whole gateway path (parse, auth, limits,
// routing, simulated upstream, response) without a network.
func BenchmarkChatInProcess(b *testing.B) {
	for _, tc := range []struct{ name, strategy, model string }{
		{"shuffle", "simple_shuffle", "m"},
		{"adaptive", "adaptive", "m"},
		{"tier-alias", "adaptive", "normal"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := node(b, tc.strategy)
			body := []byte(`{"model":"` + tc.model + `","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"hello there, how are you?"}]}`)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				serve(b, h, body)
			}
		})
	}
}

// BenchmarkBaseline is the floor the in-process path is compared with: the
// same request and recorder through a handler that only writes a canned
// answer.
func BenchmarkBaseline(b *testing.B) {
	canned := []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(canned)
	})
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello there, how are you?"}]}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		serve(b, h, body)
	}
}
