package cache

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"switchyard/wire"
)

var openAIChunkCases = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"a \"q\" \u00e9"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}},{"index":null,"function":{"arguments":"{\"a\""}}]},"finish_reason":"tool_calls"}],"usage":null}`,
	`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":2,"audio_tokens":0},"total_tokens":12}}`,
	`{"choices":[{"delta":{"content":null,"refusal":"no","audio":{"id":"x"}}}]}`, `{"error":{"message":"m"}}`, `{"error":null,"choices":null}`,
	`{"Choices":[]}`, `{"ch\u006fices":[]}`, `{"choices":[null]}`, `{"choices":[{"index":1.5}]}`, `{"choices":[{"index":1e2}]}`, `{"choices":[],"choices":[]}`,
	`{"choices":[{"finish_reason":"stop","finish_reason":null}]}`, `{"choices":[{"delta":{"content":"a","content":null}}]}`, `{"choices":[{"delta":{"tool_calls":[{"function":null}]}}]}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":null}}`, `{"choices":[{"delta":{"content":"\ud800"}}]}`, `[1]`, `"x"`, `{}`,
}

// checkFast holds a fast event reader to json.Unmarshal on data: when it
// reads the event at all, it reads what json.Unmarshal reads into a T.
func checkFast[T any](t *testing.T, data []byte, read func([]byte, *T) bool) bool {
	t.Helper()
	var fast T
	if !read(data, &fast) {
		return false
	}
	var slow T
	if err := json.Unmarshal(data, &slow); err != nil {
		t.Fatalf("%q: read fast, encoding/json: %v", data, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q:\nfast %+v\nslow %+v", data, fast, slow)
	}
	return true
}

// readsCases runs checkFast over cases and wants read to read at least
// the first min of them.
func readsCases[T any](t *testing.T, cases []string, read func([]byte, *T) bool, min int) {
	t.Helper()
	n := 0
	for _, c := range cases {
		if checkFast(t, []byte(c), read) {
			n++
		}
	}
	if n < min {
		t.Fatalf("the fast reader read %d of the cases, want the first %d at least", n, min)
	}
}

// fuzzReader fuzzes checkFast of read, seeded with cases.
func fuzzReader[T any](f *testing.F, cases []string, read func([]byte, *T) bool) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFast(t, data, read) })
}

// benchAccumulate runs the frames of one stream in format through a new
// accumulator per iteration.
func benchAccumulate(b *testing.B, format wire.Format, frames []byte) {
	b.SetBytes(int64(len(frames)))
	b.ReportAllocs()
	var ds []Delta
	for b.Loop() {
		a := NewAccumulator(format, 1<<20)
		ds = a.Add(frames, ds[:0])
		if !a.Ended() || !a.OK() {
			b.Fatal("stream not read")
		}
	}
}

func TestOpenAIChunkFast(t *testing.T) { readsCases(t, openAIChunkCases, openAIChunkFast, 6) }

func FuzzOpenAIChunkFast(f *testing.F) { fuzzReader(f, openAIChunkCases, openAIChunkFast) }

// BenchmarkAccumulateOpenAI is a streamed chat answer of 200 chunks (one
// token each, as upstreams send them) through the accumulator: what a
// streamed cacheable miss pays per event.
func BenchmarkAccumulateOpenAI(b *testing.B) {
	var frames []byte
	for i := range 200 {
		frames = append(frames, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"tok`...)
		frames = append(frames, byte('a'+i%26))
		frames = append(frames, ` "},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	frames = append(frames, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":200}}`+"\n\ndata: [DONE]\n\n"...)
	benchAccumulate(b, wire.FormatOpenAI, frames)
}

var anthropicEventCases = []string{
	`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":2,"output_tokens":1}}}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a \"q\" \u00e9"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`, `{"type":"message_stop"}`,
	`{"Type":"x"}`, `{"typ\u0065":"x"}`, `{"type":null,"index":null,"message":null,"delta":null}`, `{"index":1.5}`, `{"delta":{"text":1}}`,
	`{"delta":{},"delta":{}}`, `{"message":{"usage":null}}`, `{"message":{"usage":{"input_tokens":1},"usage":{"output_tokens":2}}}`, `{"delta":{"text":"\ud800"}}`, `[1]`, `{}`,
}

func TestAnthropicEventFast(t *testing.T) { readsCases(t, anthropicEventCases, anthropicEventFast, 6) }

func FuzzAnthropicEventFast(f *testing.F) { fuzzReader(f, anthropicEventCases, anthropicEventFast) }

// BenchmarkAccumulateAnthropic is BenchmarkAccumulateOpenAI for a Messages
// stream of 200 text deltas.
func BenchmarkAccumulateAnthropic(b *testing.B) {
	frames := []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range 200 {
		frames = append(frames, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"tok"...)
		frames = append(frames, byte('a'+i%26))
		frames = append(frames, " \"}}\n\n"...)
	}
	frames = append(frames, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":200}}\n\n"+
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
	benchAccumulate(b, wire.FormatAnthropic, frames)
}

// FuzzResponsesEventFast: when responsesEventFast reads an event at all, it
// reads what json.Unmarshal of the event's members reads, and the object
// responseMember finds.
func FuzzResponsesEventFast(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.output_text.delta","output_index":0,"delta":"a \"q\" \u00e9","sequence_number":3}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"c","name":"f","arguments":""}}`,
		`{"type":"response.completed","response":{"status":"completed","output":[],"tools":[{"type":"function","name":"f","parameters":{"a":[1,{"b":null}]}}]}}`,
		`{"type":"response.created","response":{"id":"r"},"response":null}`, `{"Type":"x"}`, `{"t\u0079pe":"x"}`, `{"type":null,"output_index":null,"item":null}`,
		`{"output_index":1e2}`, `{"output_index":-0}`, `{"item":{"Name":"n"}}`, `{"item":{"name":1}}`, `{"item":[]}`, `{"item":{},"item":{}}`, `[1]`, `"x"`, `{"delta":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast rsEvent
		obj, ok := responsesEventFast(data, &fast)
		if !ok {
			return
		}
		var slow rsEvent
		if err := json.Unmarshal(onlyMembers(data, responsesEventFields), &slow); err != nil {
			t.Fatalf("%q: read fast, encoding/json: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", data, fast, slow)
		}
		if want := responseMember(data); !bytes.Equal(obj, want) {
			t.Fatalf("%q: response %q, responseMember %q", data, obj, want)
		}
	})
}
