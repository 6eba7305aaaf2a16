package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"switchyard/catalog"
)

func TestParseChat(t *testing.T) {
	body := `{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":50,
	"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]},
	{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},
	{"role":"tool","tool_call_id":"1","content":"42"}],
	"tools":[{"type":"function","function":{"name":"f"}}],"reasoning":{"effort":"high"},
	"response_format":{"type":"json_schema"},"prompt_cache_key":"pck","metadata":{"session_id":"ms","user_id":"u"}}`
	r, err := Parse([]byte(body), catalog.OpChat, FormatOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "gpt" || !r.Stream || !r.IncludeUsage || r.MaxTokens != 50 || r.Tools != 1 ||
		r.ReasoningEffort != "high" || !r.JSONSchema || r.PromptCacheKey != "pck" || r.MetadataSessionID != "ms" || r.MetadataUserID != "u" {
		t.Fatalf("fields: %+v", r)
	}
	if r.System != "be brief" || len(r.Messages) != 4 || r.Messages[1].Text != "hi" || r.Messages[2].ToolCalls != 1 || !r.Messages[3].ToolResult {
		t.Fatalf("messages: %+v", r.Messages)
	}
	if r.LastUserText() != "hi" {
		t.Fatalf("last user: %q", r.LastUserText())
	}
	if len(r.ToolsRaw) == 0 || r.ToolsRaw[0] != '[' {
		t.Fatalf("tools raw: %s", r.ToolsRaw)
	}
}

func TestParseAnthropic(t *testing.T) {
	body := `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"sys"}],"thinking":{"type":"enabled","budget_tokens":1000},
	"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},
	{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"res"}]}]}`
	r, err := Parse([]byte(body), catalog.OpChat, FormatAnthropic)
	if err != nil {
		t.Fatal(err)
	}
	if r.System != "sys" || !r.Thinking || r.MaxTokens != 100 || !r.Messages[2].ToolResult || r.LastUserText() != "q" {
		t.Fatalf("%+v", r)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, body string
		op         catalog.Operation
		format     Format
		param      string
	}{
		{"empty", ``, catalog.OpChat, FormatOpenAI, ""},
		{"not json", `{"model":`, catalog.OpChat, FormatOpenAI, ""},
		{"array", `[1,2]`, catalog.OpChat, FormatOpenAI, ""},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, catalog.OpChat, FormatOpenAI, "model"},
		{"no messages", `{"model":"m"}`, catalog.OpChat, FormatOpenAI, "messages"},
		{"empty messages", `{"model":"m","messages":[]}`, catalog.OpChat, FormatOpenAI, "messages"},
		{"bad role", `{"model":"m","messages":[{"content":"x"}]}`, catalog.OpChat, FormatOpenAI, "messages[0].role"},
		{"bad content", `{"model":"m","messages":[{"role":"user","content":5}]}`, catalog.OpChat, FormatOpenAI, "messages[0].content"},
		{"wrong type", `{"model":5,"messages":[]}`, catalog.OpChat, FormatOpenAI, "model"},
		{"anthropic max_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, catalog.OpChat, FormatAnthropic, "max_tokens"},
		{"negative max", `{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`, catalog.OpChat, FormatOpenAI, "max_tokens"},
		{"embeddings input", `{"model":"e"}`, catalog.OpEmbeddings, FormatOpenAI, "input"},
		{"embeddings bad input", `{"model":"e","input":{"a":1}}`, catalog.OpEmbeddings, FormatOpenAI, "input"},
		{"images prompt", `{"model":"i"}`, catalog.OpImages, FormatOpenAI, "prompt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), tc.op, tc.format)
			we, ok := err.(*Error)
			if !ok {
				t.Fatalf("want *Error, got %v", err)
			}
			if we.Param != tc.param {
				t.Fatalf("param: got %q want %q (%s)", we.Param, tc.param, we.Message)
			}
		})
	}
}

func TestPromptTokens(t *testing.T) {
	r, _ := Parse([]byte(`{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("a", 400)+`"}]}`), catalog.OpChat, FormatOpenAI)
	if got := r.PromptTokens(); got != 100+4+3 {
		t.Fatalf("tokens: %d", got)
	}
	if r.OutputTokens(1024) != 1024 {
		t.Fatal("default output")
	}
	e, _ := Parse([]byte(`{"model":"e","input":["abcd","abcdefgh"]}`), catalog.OpEmbeddings, FormatOpenAI)
	if e.PromptTokens() != 3 || e.OutputTokens(10) != 0 {
		t.Fatalf("embeddings tokens %d", e.PromptTokens())
	}
}

func TestSetTopLevel(t *testing.T) {
	cases := []struct{ in, key, val, want string }{
		{`{"model":"a","x":{"model":"keep"}}`, "model", `"b"`, `{"model":"b","x":{"model":"keep"}}`},
		{`{"x":"model","model" : "a"}`, "model", `"b"`, `{"x":"model","model" : "b"}`},
		{`{"x":1}`, "stream_options", `{"include_usage":true}`, `{"stream_options":{"include_usage":true},"x":1}`},
		{`{}`, "k", `1`, `{"k":1}`},
		{`{"a":"q\"model\"","model":[1,{"b":"]"}]}`, "model", `2`, `{"a":"q\"model\"","model":2}`},
		// a key named twice, escaped or in another case: one model remains,
		// the one written (a parser upstream reading the last would
		// otherwise get the client's)
		{`{"model":"a","x":1,"model":"b"}`, "model", `"u"`, `{"model":"u","x":1}`},
		{`{"model":"a","mod\u0065l":"b"}`, "model", `"u"`, `{"model":"u"}`},
		{`{"x":1,"MODEL":"a"}`, "model", `"u"`, `{"x":1,"model":"u"}`},
		{` {"a" : 1 , "b":2 } `, "b", `3`, ` {"a" : 1 , "b":3 } `},
		{`{ "a":1, "b":2, "a":3 }`, "a", `0`, `{ "a":0, "b":2}`},
	}
	for _, tc := range cases {
		if got := string(SetTopLevel([]byte(tc.in), tc.key, []byte(tc.val))); got != tc.want {
			t.Errorf("SetTopLevel(%s, %s) = %s, want %s", tc.in, tc.key, got, tc.want)
		}
	}
	del := []struct{ in, key, want string }{
		{`{"a":1,"b":2}`, "a", `{"b":2}`},
		{`{"a":1,"b":2}`, "b", `{"a":1}`},
		{`{"a":1}`, "a", `{}`},
		{`{"a":1}`, "z", `{"a":1}`},
		{`{"a":1,"b":2,"a":3}`, "a", `{"b":2}`},
		{`{"\u0061":1,"A":2}`, "a", `{}`},
		{`[1]`, "a", `[1]`},
	}
	for _, tc := range del {
		if got := string(DeleteTopLevel([]byte(tc.in), tc.key)); got != tc.want {
			t.Errorf("DeleteTopLevel(%s, %s) = %s, want %s", tc.in, tc.key, got, tc.want)
		}
	}
}

// FuzzParse: no input may panic the parser or the top-level editor, and an
// accepted body keeps being valid JSON after the model rewrite.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{}]}`,
		`{"model":"e","input":["a",[1,2]]}`,
		`{"model":"c","max_tokens":5,"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"r"}]}]}]}`,
		`{"model":"\u00e9\"x","messages":[]}`, `[`, `{}`, `null`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Add([]byte(`{"model":"r","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"o"}]}],"tools":[{"type":"function","name":"f"}]}`), uint8(6))
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		op := []catalog.Operation{catalog.OpChat, catalog.OpEmbeddings, catalog.OpImages}[int(sel)%3]
		format := Format(sel / 3 % 3) // OpenAI, Anthropic, Responses
		r, err := Parse(body, op, format)
		if err != nil {
			return
		}
		_ = r.PromptTokens()
		_ = r.LastUserText()
		out := SetTopLevel(body, "model", []byte(`"upstream"`))
		if !jsonValid(out) {
			t.Fatalf("rewrite broke JSON: %s -> %s", body, out)
		}
	})
}

// FuzzEditTopLevel: on any JSON object the edit keeps valid JSON; the keys
// it edits are there once each with their values (or gone), however the
// body spelled or repeated them; every other member is kept.
func FuzzEditTopLevel(f *testing.F) {
	for _, s := range []string{`{"model":"a","stream":true,"stream_options":{"x":1},"messages":[]}`, `{"model":"a","model":"b"}`,
		`{"mod\u0065l":"a","MODEL":"b","x":{"model":1}}`, `{}`, `{"stream_options":null,"Stream":false}`} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		var in map[string]json.RawMessage
		if json.Unmarshal(body, &in) != nil || in == nil {
			return
		}
		edits := []TopLevelEdit{{Key: "stream_options"}, {Key: "stream", Value: []byte("false")}, {Key: "model", Value: []byte(`"up"`)}}
		if stream {
			edits[0].Value = []byte(`{"include_usage":true}`)
		}
		out := EditTopLevel(body, edits...)
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s -> %s: %v", body, out, err)
		}
		edited := func(k string) bool {
			for _, e := range edits {
				if strings.EqualFold(k, e.Key) {
					return true
				}
			}
			return false
		}
		for k, v := range in {
			if !edited(k) && string(got[k]) != string(v) {
				t.Fatalf("%s -> %s: member %q lost or changed", body, out, k)
			}
		}
		for _, e := range edits {
			n := 0
			for k := range got {
				if strings.EqualFold(k, e.Key) {
					n++
				}
			}
			if e.Value == nil && n != 0 || e.Value != nil && (n != 1 || string(got[e.Key]) != string(e.Value)) {
				t.Fatalf("%s -> %s: key %q", body, out, e.Key)
			}
			// and no member the upstream could read as it twice
			if e.Value != nil && bytes.Count(out, []byte(`"`+e.Key+`"`)) < 1 {
				t.Fatalf("%s -> %s: %q not written as such", body, out, e.Key)
			}
		}
	})
}

// TestRepeatedKeyRefused: a body naming a top-level field twice (the same
// key, escaped, or in another case) is refused with duplicate_field in every
// format: the gateway would otherwise route, cap and estimate the last
// (encoding/json) while an upstream may read the first.
func TestRepeatedKeyRefused(t *testing.T) {
	many := `{"model":"m","messages":[{"role":"user","content":"x"}]`
	for i := range 40 {
		many += `,"k` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":1`
	}
	for _, tc := range []struct {
		body   string
		format Format
		param  string
	}{
		{`{"model":"a","messages":[],"model":"b"}`, FormatOpenAI, "model"},
		{`{"model":"a","messages":[{"role":"user","content":"x"}],"Messages":[]}`, FormatOpenAI, "Messages"},
		{`{"model":"a","max_tokens":1,"messages":[],"mod\u0065l":"b"}`, FormatAnthropic, `mod\u0065l`},
		{`{"model":"a","input":"x","temperature":1,"TEMPERATURE":0}`, FormatResponses, "TEMPERATURE"},
		{many + `,"KNB":2}`, FormatOpenAI, "KNB"},
		// past the 16 keys compared in place, a key folds as encoding/json
		// folds it (a long s is s, a Kelvin sign k), not as ToLower does
		{many + `,"meſſages":[]}`, FormatOpenAI, "meſſages"},
		{many + `,"max_tokens":100000,"max_tokenſ":1}`, FormatOpenAI, "max_tokenſ"},
		{many + `,"stream":false,"\u017ftream":true}`, FormatOpenAI, `\u017ftream`},
		{many + `,"max_to\u212aens":1,"max_tokens":100000}`, FormatAnthropic, "max_tokens"},
		{many + `,"instructions":"x","inſtructionſ":"y"}`, FormatResponses, "inſtructionſ"},
	} {
		_, err := Parse([]byte(tc.body), catalog.OpChat, tc.format)
		we, ok := err.(*Error)
		if !ok || we.Code != "duplicate_field" || we.Param != tc.param {
			t.Errorf("Parse(%s) = %v, want duplicate_field on %q", strings.TrimPrefix(tc.body, many), err, tc.param)
		}
	}
	if _, err := Parse([]byte(many+`}`), catalog.OpChat, FormatOpenAI); err != nil {
		t.Errorf("40 distinct keys refused: %v", err)
	}
	// and no key is taken for another that encoding/json tells apart (a
	// dotted capital I lowers to i, but does not fold to it)
	for _, body := range []string{many + `,"İnput":1,"input":"x"}`, many + `,"ka":2,"ﬀ":1,"ff":2}`} {
		if _, err := Parse([]byte(body), catalog.OpChat, FormatOpenAI); err != nil {
			t.Errorf("%s refused: %v", body[len(many):], err)
		}
	}
}

// FuzzFoldedKey: keyList's two comparisons, in place (sameKey, up to 16
// keys) and by folded name (past them), tell the same keys apart, and
// those are the keys encoding/json reads as one field.
func FuzzFoldedKey(f *testing.F) {
	for _, p := range [][2]string{{"stream", "ſtream"}, {"max_tokens", `max_to\u212aens`}, {"input", "İnput"},
		{"model", `mod\u0065l`}, {"a\xffb", "a\xfeb"}, {"σ", "ς"}, {"Messages", "messages"}, {"ſ\u212a", "SK"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, kb := []byte(a), []byte(b)
		if !jsonValid([]byte(`"`+a+`"`)) || !jsonValid([]byte(`"`+b+`"`)) {
			return
		}
		same := sameKey(ka, kb)
		if folded := foldedKey(ka) == foldedKey(kb); same != folded {
			t.Fatalf("%q %q: sameKey %v, folded names equal %v", a, b, same, folded)
		}
		var v struct {
			F int `json:"sk"`
		}
		// a key names the field "sk" as encoding/json folds it
		if err := json.Unmarshal([]byte(`{"`+a+`":1}`), &v); err == nil && (v.F == 1) != sameKey(ka, []byte("sk")) {
			t.Fatalf("%q: encoding/json reads it as sk: %v, sameKey %v", a, v.F == 1, sameKey(ka, []byte("sk")))
		}
	})
}

// TestEditTopLevelManyEdits: past the eight edits EditTopLevel tracks on
// its stack, each key is still written once.
func TestEditTopLevelManyEdits(t *testing.T) {
	var edits []TopLevelEdit
	for c := 'a'; c <= 'j'; c++ {
		edits = append(edits, TopLevelEdit{Key: string(c), Value: []byte("1")})
	}
	got := string(EditTopLevel([]byte(`{"j":0,"a":0,"x":2,"J":3}`), edits...))
	want := `{"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"a":1,"x":2}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
