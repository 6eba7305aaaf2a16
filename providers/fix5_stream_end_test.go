package providers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"switchyard/routing"
	"switchyard/wire"
)

// TestFix5AnthropicRelayDone: Anthropic's streaming reference
// (docs.claude.com/en/docs/build-with-claude/streaming) defines the event
// flow message_start, content blocks, message_delta, message_stop, plus
// ping and error events: no "[DONE]". An Anthropic-kind upstream (a proxy
// in front of the API) that sends OpenAI's data: [DONE] never has it
// relayed to an Anthropic client: after the stop_reason it completes the
// message with message_stop; before it, the stream was cut.
func TestFix5AnthropicRelayDone(t *testing.T) {
	head := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	delta := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"
	stop := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	done := "data: [DONE]\n\n"
	for _, tc := range []struct {
		name, body string
		wantLast   string        // name of the last event relayed
		wantErr    routing.Class // ClassOK when the stream ends cleanly
	}{
		{name: "message_stop then [DONE]", body: head + delta + stop + done, wantLast: "message_stop"},
		{name: "[DONE] in place of message_stop", body: head + delta + done, wantLast: "message_stop"},
		{name: "[DONE] before the stop reason: cut", body: head + done, wantErr: routing.ClassNetwork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			p := anthropicProvider(srv.URL + "/v1")
			a := newAdapter(t, p)
			resp, err := a.Do(context.Background(), deployment(p, "claude-up"), chatReq(t, `{"model":"claude","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatAnthropic))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Stream.Close()
			all, err := drain(t, resp.Stream)
			if strings.Contains(string(all), "[DONE]") {
				t.Fatalf("[DONE] relayed to an Anthropic client:\n%s", all)
			}
			if tc.wantErr != routing.ClassOK {
				wantClass(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("stream error %v after:\n%s", err, all)
			}
			evs := parseSSE(t, all)
			if len(evs) == 0 || evs[len(evs)-1].name != tc.wantLast || evs[len(evs)-1].data != `{"type":"message_stop"}` || !resp.Stream.Ended() {
				t.Fatalf("relayed:\n%s", dumpEvents(evs))
			}
			if u := resp.Stream.Usage(); u.PromptTokens != 7 || u.CompletionTokens != 2 {
				t.Fatalf("usage %+v", u)
			}
		})
	}
}

// TestFix5GeminiStreamErrorClass: Gemini's error reference
// (ai.google.dev/gemini-api/docs/troubleshooting, "Backend error codes")
// gives 429 RESOURCE_EXHAUSTED for a rate limit or quota, 500 INTERNAL,
// 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED; streamGenerateContent can report
// one as an SSE event after its 200. Arriving as the first event (before
// any byte reaches the client) it is classified as the HTTP error would be
// (SPEC 10 gemini, 7.4): RESOURCE_EXHAUSTED rate_limited with status 429
// and Gemini's RetryInfo delay, so the gateway fails over and cools the
// deployment as for a 429; a server error stays one.
func TestFix5GeminiStreamErrorClass(t *testing.T) {
	quota := `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"12s"}]}}`
	clients := []struct {
		name   string
		format wire.Format
		body   string
	}{
		{"openai", wire.FormatOpenAI, `{"model":"g","stream":true,"messages":[{"role":"user","content":"Hi"}]}`},
		{"anthropic", wire.FormatAnthropic, `{"model":"g","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`},
		{"responses", wire.FormatResponses, `{"model":"g","stream":true,"input":"Hi"}`},
	}
	for _, tc := range []struct {
		name, event string
		want        routing.Class
		wantStatus  int
	}{
		{name: "RESOURCE_EXHAUSTED", event: quota, want: routing.ClassRateLimited, wantStatus: 429},
		{name: "status only", event: `{"error":{"message":"quota","status":"RESOURCE_EXHAUSTED"}}`, want: routing.ClassRateLimited, wantStatus: 429},
		{name: "UNAVAILABLE", event: `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, want: routing.ClassServerError, wantStatus: 503},
		{name: "INTERNAL", event: `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`, want: routing.ClassServerError, wantStatus: 500},
		{name: "unnamed", event: `{"error":{"message":"something broke"}}`, want: routing.ClassServerError},
	} {
		for _, cl := range clients {
			t.Run(tc.name+"/"+cl.name, func(t *testing.T) {
				var got captured
				srv := fakeGemini(t, &got, "", "data: "+tc.event+"\n\n")
				defer srv.Close()
				p := geminiProvider(srv.URL)
				a := newAdapter(t, p)
				req := chatReq(t, cl.body, cl.format)
				_, err := a.Do(context.Background(), deployment(p, "gemini-2.5-flash"), req)
				e := wantClass(t, err, tc.want)
				if e.Status != tc.wantStatus {
					t.Fatalf("status %d, want %d (%+v)", e.Status, tc.wantStatus, e)
				}
				if tc.name == "RESOURCE_EXHAUSTED" && (e.RetryAfter.Seconds() != 12 || e.Code != "resource_exhausted") {
					t.Fatalf("retry after %s, code %q: want 12s and resource_exhausted as for an HTTP 429", e.RetryAfter, e.Code)
				}
			})
		}
	}
	// a 2xx generateContent body that is an error is classified the same way
	_, _, err := geminiToOpenAIResponse([]byte(quota), "m", 1)
	wantClass(t, err, routing.ClassRateLimited)
}
