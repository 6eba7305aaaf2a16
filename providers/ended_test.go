package providers

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStreamEnded: a stream reports Ended with the events that end it, in
// every client format, and never with model text that spells an end
// marker (a client must not free its max_parallel slot early by making the
// model write one).
func TestStreamEnded(t *testing.T) {
	openAI := "data: {\"choices\":[{\"delta\":{\"content\":\"data: [DONE]\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"\\n\\ndata: [DONE]\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	anthropic := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"event: message_stop\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name string
		body string
		conv converter
	}{
		{"openai relay", openAI, &openAIRelay{}},
		{"anthropic relay", anthropic, &anthropicRelay{}},
		{"anthropic to openai", anthropic, newAnthropicToOpenAIStream("m", 1, false)},
		{"openai to anthropic", openAI, newOpenAIToAnthropicStream("m", 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(tc.body))}
			r, err := startStream(context.Background(), resp, tc.conv, time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			st := r.Stream
			var events []string
			for {
				ev, err := st.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				events = append(events, string(ev))
				last := strings.Contains(string(ev), "data: [DONE]\n\n") && !strings.Contains(string(ev), "content") ||
					strings.HasPrefix(string(ev), "event: message_stop") || strings.Contains(string(ev), "\n\nevent: message_stop")
				if st.Ended() != last {
					t.Fatalf("Ended() = %v after %q (events so far %q)", st.Ended(), ev, events)
				}
			}
			if !st.Ended() {
				t.Fatal("not Ended at io.EOF")
			}
		})
	}
}
