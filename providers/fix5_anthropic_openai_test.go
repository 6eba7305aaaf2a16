package providers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"switchyard/routing"
	"switchyard/wire"
)

// fakeStrictOpenAI validates a chat request as OpenAI's Chat Completions
// reference documents it (platform.openai.com/docs/api-reference/chat/create):
// max_tokens is "deprecated in favor of max_completion_tokens, and is not
// compatible with o-series models" (gpt-5 rejects it too), and stop takes
// "up to 4 sequences" (help.openai.com/en/articles/5072263). A request it
// refuses gets the 400 OpenAI answers; one it accepts, syncChat. reasoning
// names the models that refuse max_tokens.
func fakeStrictOpenAI(t *testing.T, got *captured, reasoning map[string]bool) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		var in struct {
			Model     string          `json:"model"`
			MaxTokens json.RawMessage `json:"max_tokens"`
			Stop      []string        `json:"stop"`
		}
		_ = json.Unmarshal(got.body, &in)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case reasoning[in.Model] && len(in.MaxTokens) > 0:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`)
		case len(in.Stop) > 4:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"'stop': array too long. Expected an array with maximum length 4.","type":"invalid_request_error","param":"stop","code":"array_above_max_length"}}`)
		default:
			io.WriteString(w, syncChat)
		}
	}))
}

// TestFix5AnthropicClientOnOpenAIDeployment: an Anthropic client served by
// an OpenAI deployment gets an answer, not a 400 it did not cause: a
// reasoning model (o-series, gpt-5) gets max_completion_tokens, every other
// model max_tokens (the field every OpenAI-compatible server knows, still
// accepted by OpenAI's non-reasoning models); more than 4 stop_sequences
// are sent as their first 4.
func TestFix5AnthropicClientOnOpenAIDeployment(t *testing.T) {
	var got captured
	srv := fakeStrictOpenAI(t, &got, map[string]bool{"o3-mini": true, "o1": true, "gpt-5": true, "gpt-5-mini-2025-08-07": true, "o4-mini": true, "gpt-5.1": true})
	defer srv.Close()
	p := openAIProvider(srv.URL+"/v1", nil)
	a := newAdapter(t, p)
	for _, tc := range []struct {
		name, model, stop string
		wantField         string   // the output-limit field the upstream saw
		wantStop          []string // nil: no stop sent
	}{
		{name: "non-reasoning model keeps max_tokens", model: "gpt-4o-mini", wantField: "max_tokens"},
		{name: "self-hosted model keeps max_tokens", model: "Qwen/Qwen2.5-7B-Instruct", wantField: "max_tokens"},
		{name: "o-series", model: "o3-mini", wantField: "max_completion_tokens"},
		{name: "o1", model: "o1", wantField: "max_completion_tokens"},
		{name: "o4-mini", model: "o4-mini", wantField: "max_completion_tokens"},
		{name: "gpt-5", model: "gpt-5", wantField: "max_completion_tokens"},
		{name: "gpt-5 snapshot", model: "gpt-5-mini-2025-08-07", wantField: "max_completion_tokens"},
		{name: "gpt-5.1", model: "gpt-5.1", wantField: "max_completion_tokens"},
		{name: "not an o-series name", model: "omni-7b", wantField: "max_tokens"},
		{name: "four stop sequences pass", model: "gpt-4o-mini", stop: `["a","b","c","d"]`, wantField: "max_tokens", wantStop: []string{"a", "b", "c", "d"}},
		{name: "six stop sequences: the first four", model: "gpt-4o-mini", stop: `["a","b","c","d","e","f"]`, wantField: "max_tokens", wantStop: []string{"a", "b", "c", "d"}},
		{name: "reasoning model, six stops", model: "o3-mini", stop: `["1","2","3","4","5","6"]`, wantField: "max_completion_tokens", wantStop: []string{"1", "2", "3", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"claude","max_tokens":256,"messages":[{"role":"user","content":"Hi"}]}`
			if tc.stop != "" {
				body = `{"model":"claude","max_tokens":256,"stop_sequences":` + tc.stop + `,"messages":[{"role":"user","content":"Hi"}]}`
			}
			resp, err := a.Do(context.Background(), deployment(p, tc.model), chatReq(t, body, wire.FormatAnthropic))
			if err != nil {
				t.Fatalf("upstream %s refused %s: %v", tc.model, got.body, err)
			}
			if !strings.Contains(string(resp.Body), `"type":"message"`) {
				t.Fatalf("response %s", resp.Body)
			}
			var sent map[string]json.RawMessage
			if err := json.Unmarshal(got.body, &sent); err != nil {
				t.Fatal(err)
			}
			other := map[string]string{"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}[tc.wantField]
			if string(sent[tc.wantField]) != "256" || sent[other] != nil {
				t.Fatalf("upstream saw %s, want %s:256 and no %s", got.body, tc.wantField, other)
			}
			var stop []string
			if raw := sent["stop"]; raw != nil {
				if err := json.Unmarshal(raw, &stop); err != nil {
					t.Fatal(err)
				}
			}
			if strings.Join(stop, "|") != strings.Join(tc.wantStop, "|") {
				t.Fatalf("stop %q, want %q", stop, tc.wantStop)
			}
		})
	}
}

// TestFix5AnthropicMediaToOpenAI: Anthropic document blocks and the images
// and documents of a tool_result reach an OpenAI deployment instead of
// being dropped. OpenAI's chat reference takes a user content part of type
// "file" ({"file":{"filename","file_data"}}, file_data a data: URL) for a
// PDF and allows only text parts in a tool message
// (ChatCompletionRequestToolMessageContentPart), so a tool_result's images
// and documents follow the tool messages in a user message. A document
// OpenAI has no way to take (a url or Files API source) is a 400 naming it,
// so the gateway tries another deployment rather than answering without it.
func TestFix5AnthropicMediaToOpenAI(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{
			name: "base64 PDF document becomes a file part",
			in: `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQ="},"title":"report.pdf"},
				{"type":"text","text":"Summarize"}]}]}`,
			want: `{"model":"gpt-up","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"file","file":{"filename":"report.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQ="}},
				{"type":"text","text":"Summarize"}]}]}`,
		},
		{
			name: "untitled PDF gets a file name",
			in: `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}}]}]}`,
			want: `{"model":"gpt-up","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"file","file":{"filename":"document.pdf","file_data":"data:application/pdf;base64,JVBE"}}]}]}`,
		},
		{
			name: "plain-text document becomes text, with its title",
			in: `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The grass is green."},"title":"Facts"},
				{"type":"text","text":"Color?"}]}]}`,
			want: `{"model":"gpt-up","max_tokens":10,"messages":[{"role":"user","content":"Facts\n\nThe grass is green.\nColor?"}]}`,
		},
		{
			name: "content document: its text and image blocks",
			in: `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"document","source":{"type":"content","content":[{"type":"text","text":"chunk one"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}}]}]}`,
			want: `{"model":"gpt-up","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"text","text":"chunk one"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}]}`,
		},
		{
			name: "tool_result image follows the tool message in a user message",
			in: `{"model":"c","max_tokens":10,"messages":[
				{"role":"user","content":"Plot it"},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"plot","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[
					{"type":"text","text":"chart attached"},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]},
					{"type":"text","text":"Describe it"}]}]}`,
			want: `{"model":"gpt-up","max_tokens":10,"messages":[
				{"role":"user","content":"Plot it"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_01","type":"function","function":{"name":"plot","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"toolu_01","content":"chart attached"},
				{"role":"user","content":[
					{"type":"text","text":"Content of tool result toolu_01:"},
					{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},
					{"type":"text","text":"Describe it"}]}]}`,
		},
		{
			name: "image-only tool_results: tool messages first, then the attachments",
			in: `{"model":"c","max_tokens":10,"messages":[
				{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"b","name":"f","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"url","url":"https://x.test/a.png"}}]},
					{"type":"tool_result","tool_use_id":"b","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"b.pdf"}]}]}]}`,
			want: `{"model":"gpt-up","max_tokens":10,"messages":[
				{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"a","content":"(the result's content follows in the next user message)"},
				{"role":"tool","tool_call_id":"b","content":"(the result's content follows in the next user message)"},
				{"role":"user","content":[
					{"type":"text","text":"Content of tool result a:"},
					{"type":"image_url","image_url":{"url":"https://x.test/a.png"}},
					{"type":"text","text":"Content of tool result b:"},
					{"type":"file","file":{"filename":"b.pdf","file_data":"data:application/pdf;base64,JVBE"}}]}]}`,
		},
		{
			name: "tool_result text document stays in the tool message",
			in: `{"model":"c","max_tokens":10,"messages":[
				{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[
					{"type":"text","text":"found:"},
					{"type":"document","source":{"type":"text","media_type":"text/plain","data":"line"},"title":"T"}]}]}]}`,
			want: `{"model":"gpt-up","max_tokens":10,"messages":[
				{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"a","content":"found:\nT\n\nline"}]}`,
		},
		{
			name:    "url document: a 400 naming it, not a silent drop",
			in:      `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x.test/a.pdf"}},{"type":"text","text":"Summarize"}]}]}`,
			wantErr: "document",
		},
		{
			name:    "Files API document: a 400 naming it",
			in:      `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_01"}}]}]}`,
			wantErr: "document",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := anthropicToOpenAIRequest([]byte(tc.in), "gpt-up", false)
			if tc.wantErr != "" {
				e := wantClass(t, err, routing.ClassBadRequest)
				if !strings.Contains(e.Message, tc.wantErr) {
					t.Fatalf("error %q does not name %q", e.Message, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, tc.want)
			checkMarshalOpenAI(t, []byte(tc.in))
		})
	}
}

// anthropicToolID is the form of a tool_use id the Messages API accepts
// back in a request (tool_use.id: ^[a-zA-Z0-9_-]+$).
var anthropicToolID = regexp.MustCompile(`^toolu_[a-zA-Z0-9_-]+$`)

// TestFix5ToolCallWithoutID: an upstream that streams (or answers) a tool
// call without an id still gives the Anthropic client a tool_use block with
// one (Anthropic requires tool_use.id, and the client's next turn sends it
// back as tool_result.tool_use_id). The id derives from the completion id
// and the call's index, so a replay of the same answer names it the same.
func TestFix5ToolCallWithoutID(t *testing.T) {
	chunks := []string{
		`{"id":"chatcmpl-x1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-x1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-x1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-x1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`[DONE]`,
	}
	run := func() []string {
		c := newOpenAIToAnthropicStream("m", 5)
		var all []byte
		for _, ch := range chunks {
			out, _, err := c.event("", []byte(ch))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, out...)
		}
		var ids []string
		for _, ev := range parseSSE(t, all) {
			if ev.name != "content_block_start" {
				continue
			}
			var s struct {
				ContentBlock anBlock `json:"content_block"`
			}
			if err := json.Unmarshal([]byte(ev.data), &s); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, s.ContentBlock.ID)
		}
		return ids
	}
	ids := run()
	if len(ids) != 2 || !anthropicToolID.MatchString(ids[0]) || !anthropicToolID.MatchString(ids[1]) || ids[0] == ids[1] {
		t.Fatalf("stream tool_use ids %q: want two distinct ids of the form toolu_...", ids)
	}
	if again := run(); strings.Join(again, ",") != strings.Join(ids, ",") {
		t.Fatalf("ids not stable: %q then %q", ids, again)
	}
	// an upstream that does send ids keeps them
	c := newOpenAIToAnthropicStream("m", 5)
	out, _, err := c.event("", []byte(`{"id":"chatcmpl-x2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`))
	if err != nil || !strings.Contains(string(out), `"id":"call_abc"`) {
		t.Fatalf("upstream id lost: %s %v", out, err)
	}

	// the sync translation too
	for _, tc := range []struct{ name, in string }{
		{"completion id", `{"id":"chatcmpl-s1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}},{"type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
		{"no completion id", `{"object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}},{"type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := openAIToAnthropicResponse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var r anResponse
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Content) != 2 || !anthropicToolID.MatchString(r.Content[0].ID) || !anthropicToolID.MatchString(r.Content[1].ID) || r.Content[0].ID == r.Content[1].ID {
				t.Fatalf("sync tool_use blocks %s", body)
			}
		})
	}
}

// TestFix5AnthropicMediaToGemini: the Gemini translation goes through the
// same chat mapping, so an Anthropic document and a tool_result's image
// reach a Gemini deployment as inlineData (Gemini reads PDFs inline:
// ai.google.dev/gemini-api/docs/document-processing) instead of being
// dropped, and OpenAI's 4-sequence stop limit is not applied to Gemini,
// whose generationConfig.stopSequences takes up to 5.
func TestFix5AnthropicMediaToGemini(t *testing.T) {
	in := `{"model":"c","max_tokens":10,"stop_sequences":["1","2","3","4","5"],"messages":[
		{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"r.pdf"},{"type":"text","text":"Plot it"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"plot","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}]}]}`
	got, err := anthropicToGeminiRequest([]byte(in), "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `{"contents":[
		{"role":"user","parts":[{"inlineData":{"mimeType":"application/pdf","data":"JVBE"}},{"text":"Plot it"}]},
		{"role":"model","parts":[{"functionCall":{"name":"plot","args":{}}}]},
		{"role":"user","parts":[
			{"functionResponse":{"name":"plot","response":{"output":"(the result's content follows in the next user message)"}}},
			{"text":"Content of tool result toolu_01:"},
			{"inlineData":{"mimeType":"image/png","data":"iVBO"}}]}],
		"generationConfig":{"maxOutputTokens":10,"stopSequences":["1","2","3","4","5"]}}`)
}
