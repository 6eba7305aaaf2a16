package bench

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkResponsesInProcess puts the Responses path next to the chat path
// on the same node and the same simulated upstream (16 output tokens, no
// waits): chat, Responses (parse, translation to chat, the simulated chat
// answer translated back, the store hand-off), Responses with store:false,
// and a follow-up that expands a stored turn through previous_response_id
// (local store). Compare ns/op and allocs/op between the sub-benchmarks of
// one run; the machine is shared and noisy.
func BenchmarkResponsesInProcess(b *testing.B) {
	h := node(b, "simple_shuffle")
	first := post(b, h, "/v1/responses", []byte(`{"model":"m","instructions":"You are helpful.","input":"hello there, how are you?"}`))
	var r struct{ ID string }
	_ = json.Unmarshal(first, &r)
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"hello there, how are you?"}]}`},
		{"responses", "/v1/responses", `{"model":"m","instructions":"You are helpful.","input":"hello there, how are you?"}`},
		{"responses-nostore", "/v1/responses", `{"model":"m","instructions":"You are helpful.","input":"hello there, how are you?","store":false}`},
		{"responses-followup", "/v1/responses", `{"model":"m","previous_response_id":"` + r.ID + `","input":"and then?","store":false}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				post(b, h, tc.path, body)
			}
		})
	}
}

func post(b *testing.B, h http.Handler, path string, body []byte) []byte {
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-bench")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
	return w.Body.Bytes()
}
