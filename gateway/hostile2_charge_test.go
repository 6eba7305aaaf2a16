package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A stream cut after its upstream reported only the usage of its start
// (Anthropic's message_start: input tokens and output_tokens 1; the real
// output count comes with message_delta at the end) used to be charged
// that one output token, whatever it had relayed: a client, or an upstream
// failing mid-way, made a 500-character answer cost 1 output token (SPEC
// 10.2, 14). The charge of a stream that did not complete is now at least
// the content relayed / 4 (at most the output limit).
func TestHostile2StreamCutChargesRelayedOutput(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  string // what the upstream sends after the content
		want int
	}{
		{"error event mid-way", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", 125},
		{"connection cut mid-way", "", 125},
		{"complete stream: upstream usage wins", "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":90}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
				fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
				for range 100 { // 500 characters of content
					fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"abcde\"}}\n\n")
				}
				fmt.Fprint(w, tc.end)
			}))
			defer up.Close()
			n := newTestNode(t, `
providers: [{name: ant, kind: anthropic, base_url: "`+up.URL+`/v1", api_key: k}]
deployments: [{id: d, model: c, provider: ant, price: {input: 1, output: 1}}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
`)
			gw := httptest.NewServer(n.Handler())
			defer gw.Close()
			id := "cut-" + strings.ReplaceAll(tc.name, " ", "-")
			req, _ := http.NewRequest("POST", gw.URL+"/v1/messages", strings.NewReader(`{"model":"c","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("X-Request-Id", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Count(string(b), "abcde") != 100 {
				t.Fatalf("the 100 deltas were not relayed: %.300q", b)
			}
			e := auditOf(t, n, id) // written before the handler returned (the local edge state)
			if e.CompletionTokens != tc.want || e.PromptTokens != 10 {
				t.Fatalf("charged %d prompt and %d output tokens for 500 characters relayed, want 10 and %d", e.PromptTokens, e.CompletionTokens, tc.want)
			}
		})
	}
}
