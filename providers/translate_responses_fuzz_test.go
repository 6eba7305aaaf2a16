package providers

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/wire"
)

// FuzzResponsesTranslators feeds arbitrary upstream bytes through the
// Responses translators (sync and stream, both pairs) and arbitrary client
// bodies through the request translations. None may panic or hang; every
// stream that reports completion has handed its response to the store hook.
func FuzzResponsesTranslators(f *testing.F) {
	for _, name := range []string{"chat_stream_text.sse", "chat_stream_tools.sse", "anthropic_stream_tools.sse", "chat_tools.json", "anthropic_tools.json", "req_tools.json", "req_images_schema.json"} {
		b, err := readFixtureF(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"x\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\nevent: message_stop\ndata: {}\n\n"))
	base, _ := wire.Parse([]byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}]}`), catalog.OpChat, wire.FormatResponses)
	f.Fuzz(func(t *testing.T, body []byte) {
		rq := base.Responses
		_, _, _ = chatToResponses(body, rq, 1, nil)
		_, _, _ = anthropicToResponses(body, rq, 1, nil)
		if r, err := wire.Parse(body, catalog.OpChat, wire.FormatResponses); err == nil {
			_, _ = responsesToChatBody(r.Responses, "m", true)
			_, _ = responsesToAnthropicBody(r.Responses, "m", false)
		}
		for i := range 2 {
			var stored []byte
			done := func(b []byte, _ []wire.Item) { stored = b }
			var conv converter = newChatToResponsesStream(rq, "m", 1, done)
			if i == 1 {
				conv = newAnthropicToResponsesStream(rq, "m", 1, done)
			}
			resp := &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body))}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			r, err := startStream(ctx, resp, conv, time.Now(), nil)
			if err == nil {
				var all []byte
				for range 10000 {
					ev, err := r.Stream.Next()
					if err != nil {
						break
					}
					all = append(all, ev...)
				}
				if bytes.Contains(all, []byte("event: response.completed")) && stored == nil {
					t.Fatal("a completed stream must hand its response to the store")
				}
				_ = r.Stream.Close()
			}
			cancel()
		}
	})
}

func readFixtureF(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(goldenDir, name))
}
