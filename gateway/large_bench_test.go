package gateway

import (
	"bytes"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"switchyard/internal/agentturn"
)

// BenchmarkLargeRequest sends a 64 KiB conversation (an agent's turn deep
// into it: plain text with escaped line breaks and quotes) through the
// whole pipeline in each client format, on the simulated provider: what
// parsing and translating a large body costs beside the rest.
func BenchmarkLargeRequest(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"model":"m","max_tokens":16,"messages":[`)
	for i := 0; sb.Len() < 64<<10; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"role":"user","content":"` + strings.Repeat("Refactor the parser so that it reads each value once. ", 20) + `\n\"quoted\" line"}`)
	}
	for _, c := range []struct{ name, yml, path string }{{"openai", "", "/v1/chat/completions"}, {"anthropic", "", "/v1/messages"}, {"responses", "", "/v1/responses"}, {"openai-cache-on", "cache: {enabled: true}\n", "/v1/chat/completions"}} {
		b.Run(c.name, func(b *testing.B) {
			n := newTestNode(b, c.yml+simYAML)
			h := n.Handler()
			i := 0
			for b.Loop() {
				i++
				body := []byte(sb.String() + `,{"role":"user","content":"` + strconv.Itoa(i) + `"}]}`)
				if c.path == "/v1/responses" {
					body = bytes.Replace(body, []byte(`"messages":`), []byte(`"input":`), 1)
				}
				req := httptest.NewRequest("POST", c.path, bytes.NewReader(body))
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

// BenchmarkAgentRequest sends a coding agent's turn (internal/agentturn:
// 20 tools, 12 earlier tool calls and results, about 36 KB) through the
// whole pipeline as OpenAI chat, Anthropic Messages and Responses, with the cache
// off and on (the last user message differs each time: every one a miss).
func BenchmarkAgentRequest(b *testing.B) {
	for _, c := range []struct{ name, yml, path, body string }{
		{"openai", "", "/v1/chat/completions", agentturn.OpenAI()},
		{"openai-cache-on", "cache: {enabled: true}\n", "/v1/chat/completions", agentturn.OpenAI()},
		{"anthropic", "", "/v1/messages", agentturn.Anthropic()},
		{"anthropic-cache-on", "cache: {enabled: true}\n", "/v1/messages", agentturn.Anthropic()},
		{"responses", "", "/v1/responses", agentturn.Responses()},
		{"responses-cache-on", "cache: {enabled: true}\n", "/v1/responses", agentturn.Responses()},
		{"openai-stream", "", "/v1/chat/completions", streaming(agentturn.OpenAI())},
		{"openai-stream-cache-on", "cache: {enabled: true}\n", "/v1/chat/completions", streaming(agentturn.OpenAI())},
		{"anthropic-stream", "", "/v1/messages", streaming(agentturn.Anthropic())},
		{"anthropic-stream-cache-on", "cache: {enabled: true}\n", "/v1/messages", streaming(agentturn.Anthropic())},
		{"responses-stream", "", "/v1/responses", streaming(agentturn.Responses())},
		{"responses-stream-cache-on", "cache: {enabled: true}\n", "/v1/responses", streaming(agentturn.Responses())},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := newTestNode(b, c.yml+simYAML)
			h := n.Handler()
			head := c.body[:len(c.body)-2] // without "]}"
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				body := []byte(head + `,{"role":"user","content":"go on ` + strconv.Itoa(i) + `"}]}`) // a message or an input item alike
				req := httptest.NewRequest("POST", c.path, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				if c.path == "/v1/messages" {
					req.Header.Set("Anthropic-Version", "2023-06-01")
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// streaming is body asking for a stream.
func streaming(body string) string {
	return strings.Replace(body, `{"model":"m",`, `{"model":"m","stream":true,`, 1)
}
