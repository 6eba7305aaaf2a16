package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"switchyard/catalog"
)

var fastResponsesCases = []string{
	`{"model":"m","input":"hi"}`,
	`{"model":"m","stream":true,"store":false,"parallel_tool_calls":null,"temperature":0.5,"top_p":1,"max_output_tokens":100,"user":"u","safety_identifier":"s","prompt_cache_key":"p","session_id":"x","previous_response_id":"resp_1","metadata":{"a":"b"},"text":{"format":{"type":"text"}},"reasoning":{"effort":"low"},"tools":[],"tool_choice":"auto","instructions":"be brief","conversation":null,"input":[{"role":"user","content":"a\nb \"q\" \u00e9"}]}`,
	`{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"},{"type":"input_image","image_url":"https://x/y.png","detail":"low"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":1}","id":"fc_1","status":"completed"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"r"}]}]}`,
	// encoding/json's cases: the fast readers leave them to it
	`{"model":"m","Model":"n"}`, `{"model":"m","model":"n"}`, `{"mod\u0065l":"m"}`, `{"model":null}`, `{"model":"m","stream":null}`,
	`{"model":"m","max_output_tokens":1.5}`, `{"model":"m","max_output_tokens":1e2}`, `{"model":"m","temperature":1e400}`,
	`{"model":"m","store":1}`, `{"model":"m","temperature":-0}`, "{\"model\":\"\xff\"}", `{"model":"m","unknown":{"deep":[1,2]}}`,
	`{"model":"m","input":[{"role":"user","Content":"x"}]}`, `{"model":"m","input":[{"role":"user","content":"x","content":"y"}]}`,
	`{"model":"m","input":[{"role":null,"content":"x"}]}`, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":null}]}]}`,
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","TEXT":"a"}]}]}`, `[1]`, ` {"model":"m"} `, `{"model":"\ud800"}`,
	`{"model":"m","tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true,"extra":1},{"type":"function","name":"g","strict":null}]}`,
	`{"model":"m","tools":[{"type":"function","Name":"f"},{"type":"function","name":"f","strict":1},{"type":"function","name":"f","name":"g"},{"type":null,"name":"f"}]}`,
}

// checkFastResponses holds the fast readers to encoding/json on body: when
// fastResponsesBody accepts it, it decodes what json.Unmarshal decodes, and
// so does every item and part list fastItem and fastParts accept.
func checkFastResponses(t *testing.T, body []byte) {
	t.Helper()
	var fast, slow responsesBody
	checkOnePass(t, body)
	if fastResponsesBody(body, &fast, DefaultMaxMessages) {
		if err := json.Unmarshal(body, &slow); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json: %v", body, err)
		}
		if !reflect.DeepEqual(normalRaw(fast), normalRaw(slow)) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", body, fast, slow)
		}
	}
	if json.Unmarshal(body, &slow) != nil {
		return
	}
	var tools []json.RawMessage
	if json.Unmarshal(slow.Tools, &tools) == nil {
		for _, raw := range tools {
			var ft, st rawTool
			if fastTool(raw, &ft) {
				if err := json.Unmarshal(raw, &st); err != nil || !reflect.DeepEqual(normalTool(ft), normalTool(st)) {
					t.Fatalf("tool %q:\nfast %+v\nslow %+v (%v)", raw, ft, st, err)
				}
			}
		}
	}
	var items []json.RawMessage
	if json.Unmarshal(slow.Input, &items) != nil {
		return
	}
	for _, raw := range items {
		var fi, si rawItem
		if fastItem(raw, &fi) {
			if err := json.Unmarshal(raw, &si); err != nil || !reflect.DeepEqual(normalItem(fi), normalItem(si)) {
				t.Fatalf("item %q:\nfast %+v\nslow %+v (%v)", raw, fi, si, err)
			}
		}
		if json.Unmarshal(raw, &si) != nil || len(si.Content) == 0 || si.Content[0] != '[' {
			continue
		}
		fp, sp := []rawPart{}, []rawPart{} // as parseParts makes them
		if fastParts(si.Content, &fp) {
			if err := json.Unmarshal(si.Content, &sp); err != nil || !reflect.DeepEqual(fp, sp) {
				t.Fatalf("parts %q:\nfast %+v\nslow %+v (%v)", si.Content, fp, sp, err)
			}
		}
	}
}

// normalRaw and normalItem make raw members comparable: encoding/json
// copies them, the fast readers slice the body (same bytes). What the
// one-pass reader read in place is dropped (checkOnePass holds it).
func normalRaw(b responsesBody) responsesBody {
	b.items, b.itemsRead, b.tools, b.toolsRead = nil, false, nil, false
	for _, p := range []*json.RawMessage{&b.Input, &b.Instructions, &b.Tools, &b.ToolChoice, &b.Text, &b.Reasoning, &b.Metadata, &b.Conversation} {
		if *p != nil {
			*p = append(json.RawMessage{}, *p...)
		}
	}
	return b
}

func normalTool(t rawTool) rawTool {
	if t.Parameters != nil {
		t.Parameters = append(json.RawMessage{}, t.Parameters...)
	}
	return t
}

func normalItem(i rawItem) rawItem {
	for _, p := range []*json.RawMessage{&i.Content, &i.Output} {
		if *p != nil {
			*p = append(json.RawMessage{}, *p...)
		}
	}
	return i
}

func TestFastResponsesMatchEncodingJSON(t *testing.T) {
	accepted := 0
	for _, c := range fastResponsesCases {
		checkFastResponses(t, []byte(c))
		var b responsesBody
		if fastResponsesBody([]byte(c), &b, DefaultMaxMessages) {
			accepted++
		}
	}
	if accepted < 3 {
		t.Fatalf("the fast path took %d of the cases, want the first three at least", accepted)
	}
}

func FuzzFastResponses(f *testing.F) {
	for _, c := range fastResponsesCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkFastResponses(t, body) })
}

// BenchmarkParseResponses is ParseLimited on a Responses request with a
// 64 KiB input: an agent's turn deep into its conversation.
func BenchmarkParseResponses(b *testing.B) {
	body := []byte(strings.Replace(longChat(64<<10), `"messages":`, `"input":`, 1))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseLimited(body, catalog.OpChat, FormatResponses, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// checkOnePass holds parseResponses with the one-pass reader to the
// multi-pass path on body, under a small item bound and the default: the
// same request or the same error.
func checkOnePass(t *testing.T, body []byte) {
	t.Helper()
	for _, max := range []int{3, DefaultMaxMessages} {
		fast, ferr := parseResponsesWith(body, max, true)
		slow, serr := parseResponsesWith(body, max, false)
		if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
			t.Fatalf("%q (max %d): one pass %v, multi-pass %v", body, max, ferr, serr)
		}
		if ferr == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q (max %d):\none pass %+v\nmulti-pass %+v", body, max, fast, slow)
		}
	}
}

var onePassCases = append([]string{
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},{"role":"assistant","content":[{"type":"output_text","text":"c"},{"type":"refusal","refusal":"no"}]}]}`,
	`{"model":"m","input":[{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"t"},{"type":"x"},{"type":"y"},{"type":"z"}]},{"role":"user","content":"hi"}]}`,
	`{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"role":"user","content":"d"}]}`,
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"},{"type":"input_text","text":"c"},{"type":"input_text","text":"d"}]}]}`,
	`{"model":"m","input":[{"role":"tool","content":"x"}]}`, `{"model":"m","input":[{"role":"user","content":[{"type":"audio"}]}]}`,
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, `{"model":"m","input":[]}`,
	`{"model":"m","tools":[{"type":"web_search"}],"input":"x"}`, `{"model":"m","tools":[{"type":"function"}],"input":"x"}`, `{"model":"m","tools":[],"input":"x"}`,
	`{"model":"m","tools":null,"input":null,"previous_response_id":"resp_1"}`, `{"model":"m","tools":[1],"input":[2]}`,
	`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"r"}]},{"type":"item_reference","id":"i"},{"type":"item_reference"}]}`,
	`{"model":"m","input":[{"role":"user","content":[]},{"role":"user","content":null}]}`, ` { "model" : "m" , "input" : [ { "role" : "user" , "content" : [ { "type" : "input_text" , "text" : "a" } ] } ] } `,
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a","text":"b"}]}]}`, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"}}]}`,
}, fastResponsesCases...)

func TestOnePassMatchesMultiPass(t *testing.T) {
	for _, c := range onePassCases {
		checkOnePass(t, []byte(c))
	}
	var b responsesBody
	if !fastResponsesBody([]byte(onePassCases[0]), &b, DefaultMaxMessages) || !b.itemsRead || len(b.items) != 2 || len(b.items[1].Content) != 2 {
		t.Fatalf("the one-pass reader did not read the first case's items and parts in place: %+v", b)
	}
	if !fastResponsesBody([]byte(fastResponsesCases[len(fastResponsesCases)-2]), &b, DefaultMaxMessages) || !b.toolsRead || len(b.tools) != 2 {
		t.Fatalf("the one-pass reader did not read the tools in place: %+v", b)
	}
}

func FuzzOnePass(f *testing.F) {
	for _, c := range onePassCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkOnePass(t, body) })
}
