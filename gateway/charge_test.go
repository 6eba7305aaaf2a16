package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"switchyard/wire"
)

func TestContentChars(t *testing.T) {
	cases := []struct {
		name   string
		format wire.Format
		stream bool
		in     string
		want   int64
	}{
		{"openai chunk", wire.FormatOpenAI, true, "data: {\"choices\":[{\"delta\":{\"content\":\"hello\"}}]}\n\n", 5},
		{"openai escapes and utf-8", wire.FormatOpenAI, true, `data: {"choices":[{"delta":{"content":"a\"b\u00e9ü"}}]}` + "\n\n", 5},
		{"openai tool args", wire.FormatOpenAI, true, `data: {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"x\":1}"}}]}}]}`, 7},
		{"openai framing only", wire.FormatOpenAI, true, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: [DONE]\n\n", 0},
		{"anthropic events", wire.FormatAnthropic, true, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hey\"}}\n\n", 3},
		{"responses counts deltas only", wire.FormatResponses, true,
			"event: response.output_text.delta\ndata: {\"delta\":\"abcd\"}\n\nevent: response.output_text.done\ndata: {\"text\":\"abcd\"}\n\n", 4},
		{"openai sync", wire.FormatOpenAI, false, `{"choices":[{"message":{"role":"assistant","content":"four"}}]}`, 4},
		{"unterminated string", wire.FormatOpenAI, true, `{"content":"abc\`, 4},
	}
	for _, c := range cases {
		if got := contentChars([]byte(c.in), contentFields(c.format, c.stream)); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// Issue 30 reproduction (finding 4): a stream whose upstream reports no
// usage was charged its SSE framing: 500 characters of content (about 125
// tokens) were charged as 4,304 output tokens with max_tokens 100. Now the
// charge is the content characters / 4, at most the output limit.
func TestChargeWithoutUsageCountsContent(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 100 { // 100 events of 5 characters: 500 characters, no usage chunk
			fmt.Fprint(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"abcde"},"finish_reason":null}]}`+"\n\n")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	g := startGateway(t, hostileServer+`
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`, up.URL)
	for _, tc := range []struct {
		maxTokens int
		want      int
	}{{1000, 125}, {100, 100}} {
		id := fmt.Sprintf("nousage-%d", tc.maxTokens)
		req, _ := http.NewRequest("POST", "http://"+g.addr+"/v1/chat/completions", strings.NewReader(
			fmt.Sprintf(`{"model":"m","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, tc.maxTokens)))
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("X-Request-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		var got int
		for i := 0; i < 500 && got == 0; i++ { // the audit entry is written by the background writer
			if es, _ := g.node.Audit.Lookup(context.Background(), id); len(es) > 0 {
				got = es[0].CompletionTokens
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if got != tc.want {
			t.Errorf("max_tokens %d: charged %d output tokens, want %d (500 content characters / 4, at most the limit)", tc.maxTokens, got, tc.want)
		}
	}
}
