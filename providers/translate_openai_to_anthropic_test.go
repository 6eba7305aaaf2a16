package providers

import (
	"testing"

	"switchyard/routing"
)

func TestOpenAIToAnthropicRequest(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		stream bool
		want   string
	}{
		{
			name: "system and developer join, default max_tokens, temperature clamped, stop string",
			in: `{"model":"gpt-4o","temperature":1.5,"stop":"END","user":"u-9","n":1,
				"messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":[{"type":"text","text":"No emojis."}]},{"role":"user","content":"Hello"}]}`,
			want: `{"model":"claude-up","max_tokens":4096,"temperature":1,"stop_sequences":["END"],"metadata":{"user_id":"u-9"},
				"system":"Be brief.\nNo emojis.",
				"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`,
		},
		{
			name:   "max_completion_tokens wins, stream",
			stream: true,
			in:     `{"model":"gpt-4o","max_tokens":10,"max_completion_tokens":300,"stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"Hi"}]}`,
			want:   `{"model":"claude-up","max_tokens":300,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
		},
		{
			name: "tool calls and consecutive tool results merge into one user turn",
			in: `{"model":"gpt-4o","max_tokens":512,"tool_choice":"required","parallel_tool_calls":false,
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
				"messages":[
					{"role":"user","content":"Paris and Rome?"},
					{"role":"assistant","content":null,"tool_calls":[
						{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
						{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},
					{"role":"tool","tool_call_id":"call_1","content":"18C"},
					{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"24C"}]},
					{"role":"user","content":"Which is warmer?"}
				]}`,
			want: `{"model":"claude-up","max_tokens":512,
				"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
				"tool_choice":{"type":"any","disable_parallel_tool_use":true},
				"messages":[
					{"role":"user","content":[{"type":"text","text":"Paris and Rome?"}]},
					{"role":"assistant","content":[
						{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},
						{"type":"tool_use","id":"call_2","name":"get_weather","input":{"city":"Rome"}}]},
					{"role":"user","content":[
						{"type":"tool_result","tool_use_id":"call_1","content":"18C"},
						{"type":"tool_result","tool_use_id":"call_2","content":"24C"},
						{"type":"text","text":"Which is warmer?"}]}
				]}`,
		},
		{
			name: "named tool choice, tool without parameters",
			in: `{"model":"gpt-4o","tool_choice":{"type":"function","function":{"name":"ping"}},
				"tools":[{"type":"function","function":{"name":"ping"}}],
				"messages":[{"role":"user","content":"ping"}]}`,
			want: `{"model":"claude-up","max_tokens":4096,
				"tools":[{"name":"ping","input_schema":{"type":"object","properties":{}}}],
				"tool_choice":{"type":"tool","name":"ping"},
				"messages":[{"role":"user","content":[{"type":"text","text":"ping"}]}]}`,
		},
		{
			name: "images: data URL and https URL",
			in: `{"model":"gpt-4o","messages":[{"role":"user","content":[
				{"type":"text","text":"Compare"},
				{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ","detail":"low"}},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`,
			want: `{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":[
				{"type":"text","text":"Compare"},
				{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}},
				{"type":"image","source":{"type":"url","url":"https://example.com/cat.png"}}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openAIToAnthropicRequest([]byte(tt.in), "claude-up", tt.stream)
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, tt.want)
		})
	}
	for _, bad := range []string{
		`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`,
		`{"model":"m","messages":[{"role":"narrator","content":"x"}]}`,
		`{"model":"m","tool_choice":"sometimes","messages":[{"role":"user","content":"x"}]}`,
	} {
		_, err := openAIToAnthropicRequest([]byte(bad), "m", false)
		wantClass(t, err, routing.ClassBadRequest)
	}
}

func TestAnthropicToOpenAIResponse(t *testing.T) {
	tests := []struct {
		name, in, want string
		usage          Usage
	}{
		{
			name: "text with cache usage",
			in: `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-20250514",
				"content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn","stop_sequence":null,
				"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":20,"output_tokens":6}}`,
			want: `{"id":"chatcmpl-01XFDUDYJgAACzvnptvVoYEL","object":"chat.completion","created":1700000000,"model":"claude-sonnet-4-20250514",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":132,"completion_tokens":6,"total_tokens":138,"prompt_tokens_details":{"cached_tokens":20}}}`,
			usage: Usage{PromptTokens: 132, CompletionTokens: 6, CachedTokens: 20, CacheWriteTokens: 100},
		},
		{
			name: "tool use, thinking dropped",
			in: `{"id":"msg_2","type":"message","role":"assistant","model":"claude-x","content":[
				{"type":"thinking","thinking":"hmm","signature":"sig"},
				{"type":"text","text":"Checking."},
				{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],
				"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":30}}`,
			want: `{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"claude-x",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","tool_calls":[
					{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],
				"usage":{"prompt_tokens":50,"completion_tokens":30,"total_tokens":80}}`,
			usage: Usage{PromptTokens: 50, CompletionTokens: 30},
		},
		{
			name: "max_tokens and refusal map to length and content_filter",
			in:   `{"id":"msg_3","type":"message","role":"assistant","model":"c","content":[],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}`,
			want: `{"id":"chatcmpl-3","object":"chat.completion","created":1700000000,"model":"c",
				"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"content_filter"}],
				"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`,
			usage: Usage{PromptTokens: 1, CompletionTokens: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, u, err := anthropicToOpenAIResponse([]byte(tt.in), 1700000000)
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, tt.want)
			if u != tt.usage {
				t.Fatalf("usage %+v, want %+v", u, tt.usage)
			}
		})
	}
}

// A real Anthropic stream (text then a tool call), as sent by the API.
var anthropicToolStream = []sseEvent{
	{"message_start", `{"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}`},
	{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
	{"ping", `{"type": "ping"}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", checking."}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":0}`},
	{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":1}`},
	{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`},
	{"message_stop", `{"type":"message_stop"}`},
}

func TestAnthropicToOpenAIStream(t *testing.T) {
	const head = `"id":"chatcmpl-014p7gG3wDgGV9EUtLvnow3U","object":"chat.completion.chunk","created":7,"model":"claude-sonnet-4-20250514"`
	for _, wantUsage := range []bool{false, true} {
		c := newAnthropicToOpenAIStream("claude-up", 7, wantUsage)
		got, done := feed(t, c, anthropicToolStream)
		if !done {
			t.Fatal("message_stop must end the stream")
		}
		want := []sseEvent{
			{"", `{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`},
			{"", `{` + head + `,"choices":[{"index":0,"delta":{"content":"Okay"},"finish_reason":null}]}`},
			{"", `{` + head + `,"choices":[{"index":0,"delta":{"content":", checking."},"finish_reason":null}]}`},
			{"", `{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`},
			{"", `{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]},"finish_reason":null}]}`},
			{"", `{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"San Francisco, CA\"}"}}]},"finish_reason":null}]}`},
			{"", `{` + head + `,"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`},
		}
		if wantUsage {
			want = append(want, sseEvent{"", `{` + head + `,"choices":[],"usage":{"prompt_tokens":472,"completion_tokens":89,"total_tokens":561}}`})
		}
		want = append(want, sseEvent{"", "[DONE]"})
		assertEvents(t, got, want)
		if u := c.usage(); u != (Usage{PromptTokens: 472, CompletionTokens: 89}) {
			t.Fatalf("usage %+v", u)
		}
	}

	c := newAnthropicToOpenAIStream("m", 1, false)
	feed(t, c, anthropicToolStream[:4])
	if _, err := c.eof(); err == nil {
		t.Fatal("a stream cut before message_stop must fail")
	}
	_, _, err := c.event("error", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	if e := wantClass(t, err, routing.ClassServerError); e.Type != "overloaded_error" {
		t.Fatalf("type %q", e.Type)
	}
}
