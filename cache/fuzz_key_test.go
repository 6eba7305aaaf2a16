package cache

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"switchyard/catalog"
	"switchyard/internal/jsonspan"
	"switchyard/wire"
)

// FuzzKey: the canonicalizer never panics on any body in any format, and a
// body it accepts keeps its key when re-encoded with other key order and
// whitespace.
func FuzzKey(f *testing.F) {
	for _, s := range []string{oaBase, anBase, rsBase, oaTools, anTools, rsTools, `{"model":"e","input":["a","b"]}`, `{}`, `[]`, `{"messages":[{"content":[{"type":"x"}]}]}`} {
		for fm := range 3 {
			f.Add(s, uint8(fm))
		}
	}
	f.Fuzz(func(t *testing.T, body string, fm uint8) {
		format := wire.Format(fm % 3)
		op := catalog.OpChat
		if fm%4 == 3 {
			op, format = catalog.OpEmbeddings, wire.FormatOpenAI
		}
		k, err := KeyOf(op, format, []byte(body), "t", "")
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal([]byte(body), &v) != nil {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		again, _ := json.MarshalIndent(v, " ", "  ")
		k2, err := KeyOf(op, format, again, "t", "")
		if err != nil || k2 != k {
			t.Fatalf("re-encoded %q: key %v err %v", again, k2 == k, err)
		}
	})
}

// FuzzParseRequest: the key of a request the wire parse read (which
// steps over the members it measured, takes a string content's text as the
// wire parse decoded it and a tool call's canonical arguments from its
// team's memo) is the key of the body read afresh, and the body is
// cacheable by both readings or by neither.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{oaBase, anBase, rsBase, oaTools, anTools, rsTools,
		`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{\"b\": 1, \"a\": 2}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"f","input":{"b":1,"a":[2]}},{"type":"tool_use","id":"d","name":"f"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":"ok"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{\"b\": 1, \"a\": [2]}"}},{"id":"2","function":{"name":"f","arguments":"not json"}},{"id":"3","function":{"arguments":null}}]},{"role":"tool","tool_call_id":"1","content":"ok"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a \"q\" \u00e9\n"},{"role":"assistant","content":""},{"role":"user","content":[{"type":"text","text":"b"}]}]}`,
		`{"model":"m","max_tokens":5,"system":"s","messages":[{"role":"user","content":"a","content":"b"},{"role":"user","content":"c","content":null},{"role":"tool","tool_call_id":"x","content":"r"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"}],"Messages":[{"role":"user","content":"b"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"\ud800 lone"},{"role":"user","content":"\t"}]}`,
		`{"model":"m","instructions":"i","input":[{"role":"developer","content":[{"type":"input_text","text":"d"},{"type":"input_text","text":""}]},{"role":"user","content":[{"type":"input_text","text":""},{"type":"input_image","image_url":"https://x/y.png","detail":"low"},{"type":"text","text":"t"}]},{"type":"reasoning","summary":[]},{"role":"assistant","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":""},{"type":"refusal","refusal":"no"}]},{"role":"user","content":""},{"role":"user","Content":"C"}]}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},{"type":"function_call_output","call_id":"d","output":""},{"type":"function_call_output","call_id":"e"}]}`,
		`{"model":"m","input":[{"type":"item_reference","id":"i"}]}`, `{"model":"m","previous_response_id":"resp_1","input":[{"role":"user","content":"x"}]}`,
	} {
		for fm := range 3 {
			f.Add(s, uint8(fm))
		}
	}
	f.Fuzz(func(t *testing.T, body string, fm uint8) {
		format := wire.Format(fm % 3)
		req, err := wire.ParseLimited([]byte(body), catalog.OpChat, format, wire.Limits{MaxMessages: 1000, MaxInputItems: 1000})
		if err != nil {
			return
		}
		fromReq, rerr := ParseRequest(req, "t")
		if rerr == nil {
			again, err := ParseRequest(req, "t") // the team's memo of arguments answers now
			if err != nil || again.Key("t", "") != fromReq.Key("t", "") {
				t.Fatalf("%s: read again with the memo: %v, key equal %v", body, err, err == nil && again.Key("t", "") == fromReq.Key("t", ""))
			}
		}
		afresh, ferr := Parse(catalog.OpChat, format, []byte(body))
		if (rerr == nil) != (ferr == nil) {
			t.Fatalf("%s: from the request %v, afresh %v", body, rerr, ferr)
		}
		if rerr == nil && fromReq.Key("t", "") != afresh.Key("t", "") {
			t.Fatalf("%s: the key from the request differs from the key read afresh:\n%+v\n%+v", body, fromReq, afresh)
		}
	})
}

// FuzzOpenAIMessagesFast: the reflection-free reading of an OpenAI messages
// array, when it answers at all, agrees with json.Unmarshal's.
func FuzzOpenAIMessagesFast(f *testing.F) {
	for _, s := range []string{
		`[{"role":"user","content":"hi"}]`,
		`[{"role":"system","content":"be \"brief\" \u00e9\ud83d\ude00"},{"role":"user","name":"n","content":[{"type":"text","text":"x"}]}]`,
		`[{"Role":"user","content":"hi"}]`, `[{"r\u006fle":"user"}]`, `[{"role":1}]`, `[null]`, `["x"]`,
		`[{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}]`,
		`[{"role":"tool","tool_call_id":"c1","content":"ok","extra":{"a":[1,2]}}]`,
		`[{"role":"user","audio":{"id":"a"},"function_call":null,"content":"x","content":"y"}]`,
		`[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\": 1}","extra":1}},{"id":null,"function":null}]}]`,
		`[{"role":"assistant","tool_calls":[]}]`, `[{"role":"assistant","tool_calls":[{"ID":"a"}]}]`, `[{"role":"assistant","tool_calls":[{"id":"a","id":"b"}]}]`,
		`[{"role":"assistant","tool_calls":[{"function":{"name":"f"},"function":{"arguments":"x"}}]}]`, `[{"role":"assistant","tool_calls":{"id":"a"}}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return // the fast path reads validated bodies only
		}
		fast, ok := oaMessagesFast([]byte(raw), nil)
		if !ok {
			return
		}
		var slow []oaMsgIn
		if err := json.Unmarshal([]byte(raw), &slow); err != nil {
			t.Fatalf("fast path accepted %s, json.Unmarshal says %v", raw, err)
		}
		if len(fast) != len(slow) {
			t.Fatalf("%s: %d messages, json.Unmarshal %d", raw, len(fast), len(slow))
		}
		for i := range fast {
			a, b := fast[i], slow[i]
			if a.Role != b.Role || a.Name != b.Name || a.Refusal != b.Refusal || a.ToolCallID != b.ToolCallID || !sameCalls(a.ToolCalls, b.ToolCalls) ||
				!sameRaw(a.Content, b.Content) || !sameRaw(a.FunctionCall, b.FunctionCall) || !sameRaw(a.Audio, b.Audio) {
				t.Fatalf("%s: message %d: fast %+v, json.Unmarshal %+v", raw, i, a, b)
			}
		}
	})
}

// sameCalls reports whether the fast path's calls are encoding/json's,
// each literal of arguments decoded as json.Unmarshal reads it (an empty
// array and none alike, as slices.Equal has them).
func sameCalls(fast, slow []oaCallIn) bool {
	if len(fast) != len(slow) {
		return false
	}
	for i, c := range fast {
		if c.argsLit != nil {
			c.Function.Arguments = wire.DecodeString(c.argsLit)
		}
		c.argsLit = nil
		if !reflect.DeepEqual(c, slow[i]) {
			return false
		}
	}
	return true
}

// FuzzOpenAIToolsFast: the reflection-free reading of an OpenAI tools
// array, when it answers at all, gives the tools (or the error)
// encoding/json's reading gives.
func FuzzOpenAIToolsFast(f *testing.F) {
	for _, s := range []string{
		`[{"type":"function","function":{"name":"get","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}}]`,
		`[{"type":"function","function":null},{"type":"web_search","filters":{"b":1,"a":2}},{"type":"function"}]`,
		`[{"type":"function","function":{"name":"f","parameters":null,"strict":null,"extra":[1]}}]`,
		`[{"Type":"function","function":{"name":"f"}}]`, `[{"type":"function","function":{"name":"f","name":"g"}}]`,
		`[{"type":"function","function":{"name":"f","strict":1}}]`, `[{"type":"function","function":{"name":"f","parameters":1e400}}]`,
		`[{"type":"function","function":{"n\u0061me":"f"}}]`, `["x"]`, `[null]`, `[]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return // the fast path reads validated bodies only
		}
		fast, ok, ferr := oaToolsFast([]byte(raw), nil)
		if !ok {
			return
		}
		slow, serr := oaToolsSlow([]byte(raw), nil)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%s: fast error %v, encoding/json's %v", raw, ferr, serr)
		}
		if ferr != nil {
			return
		}
		if len(fast) != len(slow) {
			t.Fatalf("%s: %d tools, encoding/json %d", raw, len(fast), len(slow))
		}
		for i := range fast {
			a, b := fast[i], slow[i]
			if a.Name != b.Name || a.Description != b.Description || string(a.Params) != string(b.Params) ||
				string(a.Raw) != string(b.Raw) || (a.Strict == nil) != (b.Strict == nil) || (a.Strict != nil && *a.Strict != *b.Strict) {
				t.Fatalf("%s: tool %d: fast %+v, encoding/json %+v", raw, i, a, b)
			}
		}
	})
}

// sameRaw compares raw values as the key reads them: null and absent agree.
func sameRaw(a, b json.RawMessage) bool {
	if isNull(a) || isNull(b) {
		return isNull(a) == isNull(b)
	}
	return string(a) == string(b)
}

// TestParseRequestIsParse: the gateway's entry point (a body wire.Parse
// validated) gives the key Parse gives.
func TestParseRequestIsParse(t *testing.T) {
	for _, r := range []keyReq{oa(oaBase), oa(oaTools), an(anTools), rs(rsTools), emb(`{"model":"e","input":"x"}`)} {
		req, err := wire.Parse([]byte(r.body), r.op, r.format)
		if err != nil {
			t.Fatal(err)
		}
		c1, err1 := ParseRequest(req, "")
		c2, err2 := Parse(r.op, r.format, []byte(r.body))
		if err1 != nil || err2 != nil || c1.Key("t", "") != c2.Key("t", "") {
			t.Fatalf("%s: %v %v", r.body, err1, err2)
		}
	}
}

// FuzzOpenAIEntryFast: the reflection-free reading of a sync OpenAI answer,
// when it answers at all, builds the entry encoding/json's reading builds.
func FuzzOpenAIEntryFast(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"the \u00e9 answer","refusal":null,"annotations":[]},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}`,
		`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[],"usage":null}`, `{"Choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`,
		`{"choices":[{"message":{"content":"a","refusal":"no"},"finish_reason":"stop"}]}`,
		`{"choices":[{"message":{"content":"a"},"finish_reason":"length"},{"message":{}}]}`,
		`{"choices":[{"message":{"content":"a","audio":{"id":"x"}},"finish_reason":"stop"}],"usage":{"prompt_tokens":1.5}}`,
		`{"choices":[{"message":{"content":"a","content":null,"tool_calls":[{"id":"1","function":{"name":"f"},"function":{"arguments":"{}"}}],"tool_calls":[]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"message":{"tool_calls":[null,{"function":null}]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":5},"prompt_tokens_details":null}}`,
		`{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1},"usage":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fast, ok := openAIEntryFast([]byte(body))
		if !ok {
			return
		}
		slow, err := openAIEntrySlow([]byte(body))
		ferr := fast.checkFinish()
		if (err == nil) != (ferr == nil) {
			t.Fatalf("%s: fast %v, encoding/json %v", body, ferr, err)
		}
		if err == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: fast %+v, encoding/json %+v", body, fast, slow)
		}
	})
}

// FuzzAnthropicFast: the reflection-free readings of Anthropic tools,
// messages and content blocks, when they answer at all, agree with
// encoding/json's.
func FuzzAnthropicFast(f *testing.F) {
	for _, s := range []string{
		`[{"name":"get","description":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}]`,
		`[{"type":"web_search_20250305","name":"web_search","max_uses":5},{"type":"custom","name":"f","strict":false}]`,
		`[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"c","name":"f","input":{"b":1,"a":2}}]}]`,
		`{"type":"tool_result","tool_use_id":"c","content":[{"type":"text","text":"ok"}],"is_error":true}`,
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}`,
		`{"type":"image","source":null}`, `{"type":"text","Text":"x"}`, `{"type":"text","is_error":1}`, `[{"Name":"f"}]`, `[{"role":"user","role":"x"}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		b := []byte(raw)
		if !json.Valid(b) {
			return // the fast paths read validated bodies only
		}
		if fast, ok, ferr := anthropicTools.fast(b, nil); ok {
			slow, serr := anToolsSlow(b, nil)
			if (ferr == nil) != (serr == nil) || (ferr == nil && !reflect.DeepEqual(fast, slow)) {
				t.Fatalf("%s: tools fast %+v (%v), encoding/json %+v (%v)", raw, fast, ferr, slow, serr)
			}
		}
		if fast, ok := anMessagesFast(b); ok {
			var slow []anMsgIn
			if err := json.Unmarshal(b, &slow); err != nil || len(fast) != len(slow) {
				t.Fatalf("%s: messages fast %+v, encoding/json %+v (%v)", raw, fast, slow, err)
			}
			for i := range fast {
				if fast[i].Role != slow[i].Role || !sameRaw(fast[i].Content, slow[i].Content) {
					t.Fatalf("%s: message %d: fast %+v, encoding/json %+v", raw, i, fast[i], slow[i])
				}
				if fast[i].blocks == nil {
					continue
				}
				var blocks []anBlockIn // the blocks read in place are the content's
				if err := json.Unmarshal(slow[i].Content, &blocks); err != nil || len(blocks) != len(fast[i].blocks) {
					t.Fatalf("%s: message %d: %d blocks read in place, encoding/json %d (%v)", raw, i, len(fast[i].blocks), len(blocks), err)
				}
				for j, fb := range fast[i].blocks {
					sb := blocks[j]
					if !sameRaw(fb.Input, sb.Input) || !sameRaw(fb.Content, sb.Content) || string(fb.raw) != string(bytes.TrimSpace(rawElement(t, slow[i].Content, j))) {
						t.Fatalf("%s: message %d block %d: fast %+v, encoding/json %+v", raw, i, j, fb, sb)
					}
					fb.Input, sb.Input, fb.Content, sb.Content, fb.raw = nil, nil, nil, nil, nil
					if !reflect.DeepEqual(fb, sb) {
						t.Fatalf("%s: message %d block %d: fast %+v, encoding/json %+v", raw, i, j, fb, sb)
					}
				}
			}
		}
		if fast, ok := anBlockFast(b); ok {
			var slow anBlockIn
			if err := json.Unmarshal(b, &slow); err != nil {
				t.Fatalf("%s: block fast path accepted, encoding/json says %v", raw, err)
			}
			if !sameRaw(fast.Input, slow.Input) || !sameRaw(fast.Content, slow.Content) {
				t.Fatalf("%s: block fast %+v, encoding/json %+v", raw, fast, slow)
			}
			fast.Input, slow.Input, fast.Content, slow.Content = nil, nil, nil, nil
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%s: block fast %+v, encoding/json %+v", raw, fast, slow)
			}
		}
	})
}

// rawElement is element j of the JSON array arr as sent.
func rawElement(t *testing.T, arr []byte, j int) []byte {
	t.Helper()
	var elems []json.RawMessage
	if err := json.Unmarshal(arr, &elems); err != nil || j >= len(elems) {
		t.Fatalf("%s: element %d: %v", arr, j, err)
	}
	return elems[j]
}

// FuzzResponsesFast: the reflection-free readings of Responses tools,
// input items and content parts, and of an OpenAI content part, when they
// answer at all, agree with encoding/json's.
func FuzzResponsesFast(f *testing.F) {
	for _, s := range []string{
		`[{"type":"function","name":"get","description":"weather","parameters":{"type":"object"},"strict":true},{"type":"web_search","filters":{"b":1,"a":2}}]`,
		`[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\": 1}"},{"type":"function_call_output","call_id":"c","output":"ok"}]`,
		`{"type":"input_image","image_url":"https://x/y.png","detail":"low"}`, `{"type":"input_image","image_url":{"url":"x"}}`,
		`{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"high"}}`, `{"type":"image_url","image_url":null}`,
		`{"type":"text","text":"x","Text":"y"}`, `[{"Type":"function"}]`, `[{"role":"user","role":"x"}]`, `{"type":"refusal","refusal":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		b := []byte(raw)
		if !json.Valid(b) {
			return // the fast paths read validated bodies only
		}
		if fast, ok, ferr := responsesTools.fast(b, nil); ok {
			slow, serr := rsToolsSlow(b, nil)
			if (ferr == nil) != (serr == nil) || (ferr == nil && !reflect.DeepEqual(fast, slow)) {
				t.Fatalf("%s: tools fast %+v (%v), encoding/json %+v (%v)", raw, fast, ferr, slow, serr)
			}
		}
		if fast, ok := rsItemsFast(b); ok {
			var slow []rsItemIn
			if err := json.Unmarshal(b, &slow); err != nil || len(fast) != len(slow) {
				t.Fatalf("%s: items fast %+v, encoding/json %+v (%v)", raw, fast, slow, err)
			}
			for i := range fast {
				a, c := fast[i], slow[i]
				if !sameRaw(a.Content, c.Content) || !sameRaw(a.Output, c.Output) {
					t.Fatalf("%s: item %d: fast %+v, encoding/json %+v", raw, i, a, c)
				}
				a.Content, c.Content, a.Output, c.Output = nil, nil, nil, nil
				if !reflect.DeepEqual(a, c) {
					t.Fatalf("%s: item %d: fast %+v, encoding/json %+v", raw, i, a, c)
				}
			}
		}
		if fast, ok := rsPartFast(b); ok {
			var slow rsPartIn
			if err := json.Unmarshal(b, &slow); err != nil || fast != slow {
				t.Fatalf("%s: part fast %+v, encoding/json %+v (%v)", raw, fast, slow, err)
			}
		}
		if fast, ok := oaPartFast(b); ok {
			var slow oaPartIn
			if err := json.Unmarshal(b, &slow); err != nil || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%s: OpenAI part fast %+v, encoding/json %+v (%v)", raw, fast, slow, err)
			}
		}
	})
}

// FuzzAnthropicEntryFast: the one-pass reading of a sync Anthropic answer,
// when it answers at all, builds the entry encoding/json's reading builds.
func FuzzAnthropicEntryFast(f *testing.F) {
	for _, s := range []string{
		`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"the \u00e9 answer"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2,"cache_creation_input_tokens":1}}`,
		`{"type":"message","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"f","input":{ "x" : [1, 2] }}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":2}}`,
		`{"content":[{"type":"thinking","thinking":"x"}],"stop_reason":"end_turn"}`, `{"Content":[],"stop_reason":"end_turn"}`,
		`{"content":null,"stop_reason":"max_tokens","usage":null}`, `{"content":[null],"stop_reason":"end_turn"}`,
		`{"content":[{"type":"tool_use","input":null}],"stop_reason":"tool_use"}`, `{"type":1,"content":[],"stop_reason":"end_turn"}`,
		`{"content":[],"content":[{"type":"text","text":"b"}],"stop_reason":"end_turn","usage":{"input_tokens":1.5}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fast, ok := anthropicEntryFast([]byte(body))
		if !ok {
			return
		}
		slow, err := anthropicEntrySlow([]byte(body))
		ferr := fast.checkFinish()
		if (err == nil) != (ferr == nil) {
			t.Fatalf("%s: fast %v, encoding/json %v", body, ferr, err)
		}
		if err == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: fast %+v, encoding/json %+v", body, fast, slow)
		}
	})
}

// TestEntryFastAnswers: the shapes upstreams send (text or tool calls) are
// read by the one-pass readers, not handed to encoding/json.
func TestEntryFastAnswers(t *testing.T) {
	for _, c := range []struct {
		read func([]byte) (*Entry, bool)
		body string
	}{
		{openAIEntryFast, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0}},"system_fingerprint":null}`},
		{openAIEntryFast, `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":2}}`},
		{responsesFast, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]},{"type":"function_call","id":"fc_1","call_id":"c","name":"f","arguments":"{}","status":"completed"}],"parallel_tool_calls":true,"tools":[],"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":2},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":10}}`},
		{anthropicEntryFast, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi","citations":null}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2,"cache_creation_input_tokens":0,"service_tier":"standard"}}`},
		{anthropicEntryFast, `{"type":"message","content":[{"type":"tool_use","id":"t","name":"f","input":{"x":1}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":2}}`},
	} {
		e, ok := c.read([]byte(c.body))
		if !ok {
			t.Fatalf("%s: not read by the fast path", c.body)
		}
		if err := e.checkFinish(); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
	}
}

// responsesFast is responsesObjectFast's entry, in the shape of the other
// fast readers.
func responsesFast(body []byte) (*Entry, bool) {
	r, ok := responsesObjectFast(body)
	if !ok {
		return nil, false
	}
	e, err := r.entry()
	return e, err == nil
}

// FuzzResponsesEntryFast: the one-pass reading of a Responses object, when
// it answers at all, reads what encoding/json's reading does.
func FuzzResponsesEntryFast(f *testing.F) {
	for _, s := range []string{
		`{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"the \u00e9 answer","annotations":[]}]}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":2},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":10}}`,
		`{"status":"completed","output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"reasoning","summary":[]}]}`,
		`{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","content":[{"type":"refusal","refusal":"no"}]}]}`,
		`{"status":"completed","output":[null],"usage":null}`, `{"Status":"completed","output":[]}`,
		`{"status":"completed","output":[],"output":[{"type":"message","content":null,"content":[{"type":"output_text","text":"b"}]}],"usage":{"input_tokens":1.5}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fast, ok := responsesObjectFast([]byte(body))
		if jsonspan.Valid([]byte(body)) {
			// the accumulator's reading of a validated object: the same
			trusted, tok := responsesObjectTrusted([]byte(body))
			if tok != ok || ok && !reflect.DeepEqual(trusted, fast) {
				t.Fatalf("%s: trusted %v %+v, validating %v %+v", body, tok, trusted, ok, fast)
			}
		}
		if !ok {
			return
		}
		fe, ferr := fast.entry()
		slow, err := responsesEntrySlow([]byte(body))
		if (err == nil) != (ferr == nil) {
			t.Fatalf("%s: fast %v, encoding/json %v", body, ferr, err)
		}
		if err == nil && !reflect.DeepEqual(fe, slow) {
			t.Fatalf("%s: fast %+v, encoding/json %+v", body, fe, slow)
		}
	})
}
