package gateway

import (
	"bytes"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkCacheableMiss is SPEC 16's cacheable-miss figure in process: a
// different chat request each time (every one a miss, then stored), with
// the cache off and on, on the local edge state and the simulated
// provider. The difference per op is what the cache adds to a miss: the
// key, the lookup, the entry built and stored.
func BenchmarkCacheableMiss(b *testing.B) {
	for _, c := range []struct{ name, yml string }{{"cache-off", ""}, {"cache-on", "cache: {enabled: true}\n"}, {"cache-on-1MiB-local", "cache: {enabled: true, max_local_bytes: 1048576}\n"}} {
		b.Run(c.name, func(b *testing.B) {
			n := newTestNode(b, c.yml+simYAML)
			h := n.Handler()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello ` + strconv.Itoa(i) + `"}],"max_tokens":16}`)
				req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
