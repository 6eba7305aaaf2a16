package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

var meta = Meta{Tier: "easy", Model: "m", Deployment: "d", Now: t0}

func TestFromBody(t *testing.T) {
	cases := []struct {
		name   string
		op     catalog.Operation
		format wire.Format
		body   string
		want   string // fmt of text|calls|finish|usage, or "" for not storable
	}{
		{"openai text", catalog.OpChat, wire.FormatOpenAI,
			`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2}}}`,
			`hi|[]|stop|{5 1 2}`},
		{"openai tool calls", catalog.OpChat, wire.FormatOpenAI,
			`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`,
			`|[{c f {"a":1}}]|tool_calls|{0 0 0}`},
		{"openai content_filter", catalog.OpChat, wire.FormatOpenAI, `{"choices":[{"message":{"content":"x"},"finish_reason":"content_filter"}]}`, ""},
		{"openai n=2", catalog.OpChat, wire.FormatOpenAI, `{"choices":[{"message":{"content":"x"},"finish_reason":"stop"},{"index":1,"message":{"content":"y"},"finish_reason":"stop"}]}`, ""},
		{"openai audio", catalog.OpChat, wire.FormatOpenAI, `{"choices":[{"message":{"content":null,"audio":{"id":"a","data":"AAA"}},"finish_reason":"stop"}]}`, ""},
		{"openai annotations", catalog.OpChat, wire.FormatOpenAI, `{"choices":[{"message":{"content":"x","annotations":[{"type":"url_citation"}]},"finish_reason":"stop"}]}`, ""},
		{"openai empty annotations", catalog.OpChat, wire.FormatOpenAI, `{"choices":[{"message":{"content":"x","annotations":[]},"finish_reason":"stop"}]}`, `x|[]|stop|{0 0 0}`},
		{"openai refusal", catalog.OpChat, wire.FormatOpenAI, `{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}`, ""},
		{"anthropic", catalog.OpChat, wire.FormatAnthropic,
			`{"type":"message","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"tool_use","id":"t","name":"f","input":{ "x" : 1 }}],"stop_reason":"tool_use","usage":{"input_tokens":3,"cache_read_input_tokens":4,"cache_creation_input_tokens":1,"output_tokens":2}}`,
			`ab|[{t f {"x":1}}]|tool_calls|{8 2 4}`},
		{"anthropic max_tokens", catalog.OpChat, wire.FormatAnthropic, `{"content":[{"type":"text","text":"a"}],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":1}}`, `a|[]|length|{1 1 0}`},
		{"anthropic thinking", catalog.OpChat, wire.FormatAnthropic, `{"content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"a"}],"stop_reason":"end_turn"}`, ""},
		{"anthropic refusal", catalog.OpChat, wire.FormatAnthropic, `{"content":[{"type":"text","text":"a"}],"stop_reason":"refusal"}`, ""},
		{"responses", catalog.OpChat, wire.FormatResponses,
			`{"status":"completed","output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":9,"output_tokens":1,"input_tokens_details":{"cached_tokens":3}}}`,
			`ok|[]|stop|{9 1 3}`},
		{"responses failed", catalog.OpChat, wire.FormatResponses, `{"status":"failed","output":[]}`, ""},
		{"responses refusal", catalog.OpChat, wire.FormatResponses, `{"status":"completed","output":[{"type":"message","content":[{"type":"refusal","refusal":"no"}]}]}`, ""},
		{"images", catalog.OpImages, wire.FormatOpenAI, `{"data":[{"url":"x"}]}`, ""},
		{"garbage", catalog.OpChat, wire.FormatOpenAI, `{"choices":`, ""},
		{"embeddings out of order", catalog.OpEmbeddings, wire.FormatOpenAI,
			`{"data":[{"index":1,"embedding":[2]},{"index":0,"embedding":[1]}],"usage":{"prompt_tokens":2,"total_tokens":2}}`, `|[]||{2 0 0}`},
		{"embeddings gap", catalog.OpEmbeddings, wire.FormatOpenAI, `{"data":[{"index":1,"embedding":[2]}]}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := FromBody(c.op, c.format, []byte(c.body), meta)
			if c.want == "" {
				if !errors.Is(err, ErrNotStorable) {
					t.Fatalf("got %v, %v; want ErrNotStorable", e, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%s|%v|%s|%v", e.Text, e.ToolCalls, e.Finish, e.Usage); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
			if e.Tier != "easy" || e.Model != "m" || e.Deployment != "d" || !e.StoredAt.Equal(t0) {
				t.Fatalf("meta %+v", e)
			}
		})
	}
}

// Upstream-shaped streams as the gateway relays them to the client.
const (
	oaStream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n" +
		"data: [DONE]\n\n"
	anStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":4,\"output_tokens\":1}}}\n\n" +
		"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"f\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\":1}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

func TestAccumulator(t *testing.T) {
	rsOut, err := Render(&Entry{Text: "Hello", ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}}, Finish: "tool_calls", Usage: Usage{PromptTokens: 4, CompletionTokens: 3}, Model: "m"},
		target(t, wire.FormatResponses, true))
	if err != nil {
		t.Fatal(err)
	}
	const want = `Hello|[{c1 f {"a":1}}]|tool_calls|{4 3 0}`
	cases := []struct {
		name   string
		format wire.Format
		stream string
		want   string
	}{
		{"openai", wire.FormatOpenAI, oaStream, want},
		{"anthropic", wire.FormatAnthropic, anStream, want},
		{"responses", wire.FormatResponses, string(rsOut), want},
		{"openai cut before [DONE]", wire.FormatOpenAI, strings.TrimSuffix(oaStream, "data: [DONE]\n\n"), ""},
		{"anthropic cut before message_stop", wire.FormatAnthropic, strings.Split(anStream, "event: message_stop")[0], ""},
		{"openai error event", wire.FormatOpenAI, "data: {\"error\":{\"message\":\"x\"}}\n\n" + oaStream, ""},
		{"openai content_filter", wire.FormatOpenAI, strings.Replace(oaStream, `"finish_reason":"tool_calls"`, `"finish_reason":"content_filter"`, 1), ""},
		{"openai audio", wire.FormatOpenAI, "data: {\"choices\":[{\"index\":0,\"delta\":{\"audio\":{\"data\":\"AA\"}}}]}\n\n" + oaStream, ""},
		{"openai n>1", wire.FormatOpenAI, "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}\n\n" + oaStream, ""},
		{"anthropic thinking", wire.FormatAnthropic, strings.Replace(anStream, `"content_block":{"type":"text","text":""}`, `"content_block":{"type":"thinking","thinking":""}`, 1), ""},
		{"anthropic error", wire.FormatAnthropic, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n" + anStream, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// event by event, each split in two, as a network might
			acc := NewAccumulator(c.format, 1<<20)
			var ds []Delta
			for _, ev := range strings.SplitAfter(c.stream, "\n\n") {
				h := len(ev) / 2
				ds = acc.Add([]byte(ev[:h]), ds)
				ds = acc.Add([]byte(ev[h:]), ds)
			}
			e, err := acc.Entry(meta, Usage{})
			if c.want == "" {
				if !errors.Is(err, ErrNotStorable) {
					t.Fatalf("got %+v, %v; want ErrNotStorable", e, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%s|%v|%s|%v", e.Text, e.ToolCalls, e.Finish, e.Usage); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
			// the deltas rebuild the same answer
			var text, args strings.Builder
			for _, d := range ds {
				text.WriteString(d.Text)
				args.WriteString(d.Args)
			}
			if text.String() != "Hello" || args.String() != `{"a":1}` {
				t.Fatalf("deltas carry %q and %q", text.String(), args.String())
			}
		})
	}
}

// TestAccumulatorUsageOverride: an OpenAI client that did not ask for the
// usage chunk never saw one; the gateway hands the upstream's usage.
func TestAccumulatorUsageOverride(t *testing.T) {
	acc := NewAccumulator(wire.FormatOpenAI, 1<<20)
	acc.Add([]byte(strings.Replace(oaStream, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n", "", 1)), nil)
	e, err := acc.Entry(meta, Usage{PromptTokens: 9, CompletionTokens: 8})
	if err != nil || e.Usage != (Usage{PromptTokens: 9, CompletionTokens: 8}) {
		t.Fatalf("%v %+v", err, e)
	}
}

// TestAccumulatorMaxBytes: a stream larger than max_entry_bytes is relayed
// (its deltas flow) but not stored, and the accumulator stops growing.
func TestAccumulatorMaxBytes(t *testing.T) {
	acc := NewAccumulator(wire.FormatOpenAI, 64)
	var n int
	for range 100 {
		n = len(acc.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"0123456789\"}}]}\n\n"), nil))
	}
	if n != 1 {
		t.Fatalf("deltas stopped flowing")
	}
	acc.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"), nil)
	if acc.text.Len() > 64 {
		t.Fatalf("kept %d bytes", acc.text.Len())
	}
	if _, err := acc.Entry(meta, Usage{}); !errors.Is(err, ErrNotStorable) {
		t.Fatalf("stored an answer over max_entry_bytes: %v", err)
	}
	e := &Entry{Text: strings.Repeat("x", 100), Finish: "stop"}
	if _, ok := e.EncodeLimited(64); ok {
		t.Fatal("EncodeLimited accepted an entry over the limit")
	}
	if b, ok := e.EncodeLimited(1 << 10); !ok || len(b) > 1<<10 {
		t.Fatal("EncodeLimited refused an entry under the limit")
	}
}

// FuzzOnlyMembers: decoding what onlyMembers keeps of a body gives the
// entry's fields json.Unmarshal gives from the whole body, or fails as it
// fails.
func FuzzOnlyMembers(f *testing.F) {
	for _, s := range []string{
		`{"id":"resp_1","status":"completed","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":3,"output_tokens":1}}`,
		`{"Status":"completed","STATUS":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"tools":1}`,
		`{"st\u0061tus":"completed","tools":[]}`, `{"status":"a","status":"b","x":{"status":"c"}}`, `{"status":1,"tools":[]}`, `[1]`, `{"status"`, ` {"usage":null,"metadata":{}} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var whole, kept respObjectIn
		errWhole := json.Unmarshal(body, &whole)
		errKept := json.Unmarshal(onlyMembers(body, respObjectFields), &kept)
		if (errWhole == nil) != (errKept == nil) {
			t.Fatalf("%q: whole body %v, kept members %v", body, errWhole, errKept)
		}
		if errWhole == nil && !reflect.DeepEqual(whole, kept) {
			t.Fatalf("%q:\nwhole %+v\nkept  %+v", body, whole, kept)
		}
	})
}

// FuzzResponseMember: responseMember finds the member json.Unmarshal puts
// in a field named Response.
func FuzzResponseMember(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.completed","response":{"status":"completed"},"sequence_number":9}`,
		`{"Response":1,"RESPONSE":2}`, `{"r\u0065sponse":{"a":1}}`, `{"response":null}`, `{"type":"x"}`, `{"response":{"response":1},"response":[2]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev struct {
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(data, &ev) != nil {
			return // responsesEvent stops at such an event before it looks
		}
		if got := responseMember(data); !bytes.Equal(got, ev.Response) {
			t.Fatalf("%q: responseMember %q, json.Unmarshal %q", data, got, ev.Response)
		}
	})
}
