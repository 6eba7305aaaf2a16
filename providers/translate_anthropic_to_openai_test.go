package providers

import (
	"strings"
	"testing"

	"switchyard/routing"
)

func TestAnthropicToOpenAIRequest(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		stream bool
		want   string
	}{
		{
			name: "text with system, stop, metadata; top_k dropped",
			in: `{"model":"claude-x","max_tokens":256,"system":"Be brief.","temperature":0.2,"top_k":5,
				"stop_sequences":["END"],"metadata":{"user_id":"u-1"},
				"messages":[{"role":"user","content":"Hello"}]}`,
			want: `{"model":"gpt-up","max_tokens":256,"temperature":0.2,"stop":["END"],"user":"u-1",
				"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}]}`,
		},
		{
			name:   "system blocks, text blocks joined, stream asks for usage",
			stream: true,
			in: `{"model":"claude-x","max_tokens":100,"stream":true,
				"system":[{"type":"text","text":"A"},{"type":"text","text":"B","cache_control":{"type":"ephemeral"}}],
				"messages":[{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}]}`,
			want: `{"model":"gpt-up","max_tokens":100,"stream":true,"stream_options":{"include_usage":true},
				"messages":[{"role":"system","content":"A\nB"},{"role":"user","content":"one\ntwo"}]}`,
		},
		{
			name: "tools, tool_use and tool_result round trip",
			in: `{"model":"claude-x","max_tokens":512,
				"tools":[{"name":"get_weather","description":"Weather for a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
				"tool_choice":{"type":"any","disable_parallel_tool_use":true},
				"messages":[
					{"role":"user","content":"Weather in Paris?"},
					{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"18C, sunny"}]},{"type":"text","text":"Thanks"}]}
				]}`,
			want: `{"model":"gpt-up","max_tokens":512,
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
				"tool_choice":"required","parallel_tool_calls":false,
				"messages":[
					{"role":"user","content":"Weather in Paris?"},
					{"role":"assistant","content":"Checking.","tool_calls":[{"id":"toolu_01","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
					{"role":"tool","tool_call_id":"toolu_01","content":"18C, sunny"},
					{"role":"user","content":"Thanks"}
				]}`,
		},
		{
			name: "named tool choice, error result, assistant tool-only turn",
			in: `{"model":"claude-x","max_tokens":50,
				"tools":[{"name":"f","input_schema":{"type":"object"}}],
				"tool_choice":{"type":"tool","name":"f"},
				"messages":[
					{"role":"user","content":"go"},
					{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"boom"}]}
				]}`,
			want: `{"model":"gpt-up","max_tokens":50,
				"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
				"tool_choice":{"type":"function","function":{"name":"f"}},
				"messages":[
					{"role":"user","content":"go"},
					{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},
					{"role":"tool","tool_call_id":"t1","content":"Error: boom"}
				]}`,
		},
		{
			name: "image becomes a data URL part",
			in: `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
				{"type":"text","text":"What is this?"}]}]}`,
			want: `{"model":"gpt-up","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
				{"type":"text","text":"What is this?"}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := anthropicToOpenAIRequest([]byte(tt.in), "gpt-up", tt.stream)
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, tt.want)
		})
	}
	if _, err := anthropicToOpenAIRequest([]byte(`{"model":"x","max_tokens":1,"messages":[{"role":"user","content":7}]}`), "m", false); err == nil {
		t.Fatal("want an error for a numeric content")
	} else {
		wantClass(t, err, routing.ClassBadRequest)
	}
}

func TestOpenAIToAnthropicResponse(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{
			name: "text",
			in: `{"id":"chatcmpl-abc","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini-2024-07-18",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Hi there","refusal":null},"logprobs":null,"finish_reason":"stop"}],
				"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0}}}`,
			want: `{"id":"msg_abc","type":"message","role":"assistant","model":"gpt-4o-mini-2024-07-18",
				"content":[{"type":"text","text":"Hi there"}],"stop_reason":"end_turn","stop_sequence":null,
				"usage":{"input_tokens":12,"output_tokens":3}}`,
		},
		{
			name: "tool calls, truncated arguments become {}",
			in: `{"id":"chatcmpl-t","object":"chat.completion","created":1,"model":"m",
				"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"call_2","type":"function","function":{"name":"noop","arguments":"{\"cut"}}]},
				"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60}}`,
			want: `{"id":"msg_t","type":"message","role":"assistant","model":"m","content":[
				{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},
				{"type":"tool_use","id":"call_2","name":"noop","input":{}}],
				"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":20}}`,
		},
		{
			name: "length",
			in:   `{"id":"x1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"cut"},"finish_reason":"length"}]}`,
			want: `{"id":"x1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"cut"}],
				"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openAIToAnthropicResponse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, tt.want)
		})
	}
	_, err := openAIToAnthropicResponse([]byte(`not json`))
	wantClass(t, err, routing.ClassServerError)
}

// feed runs upstream events through a converter and parses what it relays.
func feed(t *testing.T, c converter, upstream []sseEvent) ([]sseEvent, bool) {
	t.Helper()
	var out []byte
	done := false
	for _, ev := range upstream {
		b, d, err := c.event(ev.name, []byte(ev.data))
		if err != nil {
			t.Fatalf("event %q: %v", ev.data, err)
		}
		out = append(out, b...)
		done = d
	}
	return parseSSE(t, out), done
}

func TestOpenAIToAnthropicStream(t *testing.T) {
	const head = `{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":`
	text := []sseEvent{
		{"", head + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{},"finish_reason":"stop"}]}`},
		{"", head + `[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`},
		{"", "[DONE]"},
	}
	c := newOpenAIToAnthropicStream("gpt-up", 8)
	got, done := feed(t, c, text)
	if !done {
		t.Fatal("[DONE] must end the stream")
	}
	assertEvents(t, got, []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_s1","type":"message","role":"assistant","model":"gpt-up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":0}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":2}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})
	if u := c.usage(); u != (Usage{PromptTokens: 9, CompletionTokens: 2}) {
		t.Fatalf("usage %+v", u)
	}

	tools := []sseEvent{
		{"", head + `[{"index":0,"delta":{"role":"assistant","content":"Let me check."},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"noop","arguments":"{}"}}]},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`},
		{"", "[DONE]"},
	}
	got, _ = feed(t, newOpenAIToAnthropicStream("gpt-up", 0), tools)
	assertEvents(t, got, []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_s1","type":"message","role":"assistant","model":"gpt-up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check."}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_a","name":"get_weather","input":{}}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":1}`},
		{"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_b","name":"noop","input":{}}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":2}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":0,"output_tokens":0}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})

	// A clean end without [DONE] after a finish reason still completes;
	// without a finish reason the stream was cut.
	c = newOpenAIToAnthropicStream("m", 0)
	feed(t, c, text[:4])
	if out, err := c.eof(); err != nil || len(parseSSE(t, out)) != 3 {
		t.Fatalf("eof after finish: %v %q", err, out)
	}
	c = newOpenAIToAnthropicStream("m", 0)
	feed(t, c, text[:2])
	if _, err := c.eof(); err == nil {
		t.Fatal("eof before finish must be an error")
	}
	_, _, err := newOpenAIToAnthropicStream("m", 0).event("", []byte(`{"error":{"message":"boom","type":"server_error"}}`))
	if e := wantClass(t, err, routing.ClassServerError); e.Message != "boom" {
		t.Fatalf("message %q", e.Message)
	}
}

func TestOpenAIToAnthropicStreamRepeatedToolIDs(t *testing.T) {
	const head = `{"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"m","choices":`
	got, _ := feed(t, newOpenAIToAnthropicStream("m", 0), []sseEvent{
		{"", head + `[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\""}}]},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"arguments":":1}"}}]},"finish_reason":null}]}`},
		{"", head + `[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
		{"", "[DONE]"},
	})
	var starts []string
	for _, e := range got {
		if e.name == "content_block_start" {
			starts = append(starts, e.data)
		}
	}
	if len(starts) != 2 || !strings.Contains(starts[0], `"call_a"`) || !strings.Contains(starts[1], `"call_b"`) {
		t.Fatalf("blocks:\n%s", dumpEvents(got))
	}
}
