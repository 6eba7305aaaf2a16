package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/wire"
)

// geminiFuzzSeeds are the golden fixtures plus shapes at the edges of the
// Gemini parsers: blocked prompts, empty candidates, errors, odd usage.
func geminiFuzzSeeds(f *testing.F) {
	for _, name := range []string{"resp_text.json", "resp_tools.json", "resp_max_tokens.json", "resp_safety_partial.json", "stream_text.sse", "stream_tools.sse"} {
		b, err := os.ReadFile(filepath.Join(geminiDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"promptFeedback":{"blockReason":"SAFETY"}}`,
		`{"candidates":[{"finishReason":"SAFETY","index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":[1]}}]},"finishReason":"STOP","index":3}]}`,
		`{"candidates":[],"usageMetadata":{"promptTokenCount":-4,"candidatesTokenCount":1e30}}`,
		`{"error":{"code":400,"message":"The input token count (5) exceeds the maximum number of tokens allowed (4).","status":"INVALID_ARGUMENT"}}`,
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]},\"index\":0}]}\n\ndata: {\"error\":{\"status\":\"UNAVAILABLE\"}}\n\n",
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\",\"thought\":true}]},\"finishReason\":\"MAX_TOKENS\"}]}\n\n",
		"data: {}\n\n", "data: [DONE]\n\n", "", "{", "null",
	} {
		f.Add([]byte(s))
	}
}

// FuzzGeminiResponse feeds arbitrary bytes to every Gemini response reader
// and the error classifier: none may panic, a success must be valid JSON
// with clamped usage.
func FuzzGeminiResponse(f *testing.F) {
	geminiFuzzSeeds(f)
	rq := &wire.Responses{ID: "resp_fuzz"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, kind := range []string{KindGemini, KindVertex} {
			for _, status := range []int{0, 400, 401, 403, 404, 429, 500, 503, 504} {
				_ = Classify(kind, status, body)
			}
		}
		check := func(out []byte, u Usage, err error) {
			if err != nil {
				return
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON out of %q: %s", body, out)
			}
			if u.PromptTokens < 0 || u.PromptTokens > MaxUsageTokens || u.CompletionTokens < 0 || u.CompletionTokens > MaxUsageTokens ||
				u.CachedTokens < 0 || u.CachedTokens > u.PromptTokens {
				t.Fatalf("usage %+v out of %q", u, body)
			}
		}
		out, u, err := geminiToOpenAIResponse(body, "m", 1)
		check(out, u, err)
		out, u, err = geminiToAnthropicResponse(body, "m")
		check(out, u, err)
		out, u, err = geminiToResponses(body, rq, "m", 1, nil)
		check(out, u, err)
		// the request translators read client bodies
		_, _ = openAIToGeminiRequest(body, "gemini-2.5-flash")
		_, _ = anthropicToGeminiRequest(body, "gemini-2.5-flash")
		_ = geminiSchema(body)
	})
}

// FuzzGeminiStream feeds arbitrary bytes as a streamGenerateContent body
// through each client format's converter behind the SSE reader: none may
// panic or hang, and a stream that ends cleanly ends in its format's way.
func FuzzGeminiStream(f *testing.F) {
	geminiFuzzSeeds(f)
	rq := &wire.Responses{ID: "resp_fuzz"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for i, conv := range []converter{
			newGeminiStream("m", 1, true, nil),
			newGeminiStream("m", 1, false, nil),
			newGeminiToAnthropicStream("m", 1, 3),
			newGeminiToResponsesStream(rq, "m", 1, nil),
		} {
			resp := &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body))}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			r, err := startStream(ctx, resp, conv, time.Now(), nil)
			if err == nil {
				var all []byte
				clean := false
				for n := 0; n < 10000; n++ {
					ev, err := r.Stream.Next()
					if err == io.EOF {
						clean = true
						break
					}
					if err != nil {
						break
					}
					all = append(all, ev...)
				}
				if clean {
					end := map[int]string{0: "data: [DONE]\n\n", 1: "data: [DONE]\n\n", 2: "event: message_stop\n"}[i]
					if end != "" && !strings.Contains(string(all), end) {
						t.Fatalf("converter %d ended without %q: %q", i, end, all)
					}
				}
				if u := r.Stream.Usage(); u.PromptTokens < 0 || u.PromptTokens > MaxUsageTokens || u.CompletionTokens > MaxUsageTokens {
					t.Fatalf("usage %+v", u)
				}
				_ = r.Stream.Close()
			}
			cancel()
		}
	})
}
