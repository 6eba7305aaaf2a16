package cache

import (
	"encoding/json"
	"reflect"
	"testing"

	"switchyard/catalog"
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
			if a.Role != b.Role || a.Name != b.Name || a.Refusal != b.Refusal || a.ToolCallID != b.ToolCallID || len(b.ToolCalls) != 0 ||
				!sameRaw(a.Content, b.Content) || !sameRaw(a.FunctionCall, b.FunctionCall) || !sameRaw(a.Audio, b.Audio) {
				t.Fatalf("%s: message %d: fast %+v, json.Unmarshal %+v", raw, i, a, b)
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
		c1, err1 := ParseRequest(req)
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
