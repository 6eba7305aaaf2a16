package providers

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// FuzzUpstreamBodies feeds arbitrary upstream bytes through every parser
// that reads what a provider sends: the error classifier, the sync
// translators and each stream converter behind the SSE reader. None may
// panic or hang, whatever an upstream (or a man in the middle) sends.
func FuzzUpstreamBodies(f *testing.F) {
	for _, s := range []string{
		`{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"id":"msg","type":"message","role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}`,
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\nevent: message_stop\ndata: {}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\"}}]}}]}\n\n",
		":\n\nretry: 10\n\ndata: \n\n", "", "{", "data: [DONE]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, kind := range []string{KindOpenAI, KindAnthropic, KindSimulated} {
			for _, status := range []int{400, 404, 413, 429, 500, 529} {
				_ = Classify(kind, status, body)
			}
		}
		_, _ = openAIToAnthropicResponse(body)
		_, _, _ = anthropicToOpenAIResponse(body, 1)
		_, _ = anthropicToOpenAIRequest(body, "m", true)
		_, _ = openAIToAnthropicRequest(body, "m", true)
		for _, conv := range []converter{
			&openAIRelay{wantUsage: false},
			newOpenAIToAnthropicStream("m", 3),
			newAnthropicToOpenAIStream("m", 1, true),
		} {
			resp := &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body))}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			r, err := startStream(ctx, resp, conv, time.Now(), nil)
			if err == nil {
				for i := 0; i < 10000; i++ {
					if _, err := r.Stream.Next(); err != nil {
						break
					}
				}
				_ = r.Stream.Usage()
				_ = r.Stream.Close()
			}
			cancel()
		}
	})
}
