package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"switchyard/catalog"
)

// slowBody is what json.Unmarshal makes of body (the reference fastBody
// must equal whenever it accepts a body).
func slowBody(body []byte) (openAIBody, error) {
	b := newOpenAIBody(Limits{}.orDefaults())
	err := json.Unmarshal(body, &b)
	return b, err
}

func fastOnly(body []byte) (openAIBody, bool) {
	b := newOpenAIBody(Limits{}.orDefaults())
	ok := fastBody(body, &b)
	return b, ok
}

// TestFastBodyMatchesEncodingJSON: the common shapes, every field of
// openAIBody among them (tools, stream_options, metadata... as SDKs send
// them), take the fast path and decode as encoding/json does; every shape
// it leaves to encoding/json (a member spelled in another case, under
// Unicode folding or with an escape, one named twice, null, escapes and
// invalid UTF-8 in strings, numbers that are not plain integers, a member
// that does not decode, invalid JSON) is refused, so the slow path decodes
// it and words its errors.
func TestFastBodyMatchesEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		body string
		fast bool
	}{
		{`{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":16}`, true},
		{` { "model" : "m" , "stream" : true , "messages" : [ ] , "temperature" : 0.2 , "n" : 1 } `, true},
		{`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]}],"max_completion_tokens":-3,"user":"u1","safety_identifier":"s","prompt_cache_key":"k","session_id":"x","reasoning_effort":"low","stream":false}`, true},
		{`{"model":"m","extra":{"model":5,"messages":null},"messages":[]}`, true}, // nested names are not fields
		{`{"Model":"m","messages":[]}`, false},
		{`{"mod\u0065l":"m","messages":[]}`, false},
		{`{"model":"m","model":"n","messages":[]}`, false},
		{`{"model":null,"messages":[]}`, false},
		{`{"model":"a\nb","messages":[]}`, false},
		{"{\"model\":\"\xff\",\"messages\":[]}", false},
		{`{"model":"m","max_tokens":16.0,"messages":[]}`, false},
		{`{"model":"m","max_tokens":1e3,"messages":[]}`, false},
		{`{"model":"m","max_tokens":99999999999999999999,"messages":[]}`, false},
		{`{"model":"m","stream":null,"messages":[]}`, false},
		{`{"model":"m","messages":null}`, true}, // encoding/json hands null to messageList too
		{`{"model":"m","messages":{}}`, false},
		{`{"model":"m","tools":[{},{}],"tool_choice":"auto","messages":[]}`, true},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, true},
		{`{"model":"m","metadata":{"user_id":"u","session_id":"s"},"messages":[]}`, true},
		{`{"model":"m","reasoning":{"effort":"high"},"response_format":{"type":"json_object"},"thinking":{"type":"enabled"},"messages":[]}`, true},
		{`{"model":"m","system":[{"type":"text","text":"s"}],"conversation":"c1","messages":[]}`, true},
		{`{"model":"m","input":["a","b"]}`, true},
		{`{"model":"m","prompt":"a cat","size":"1024x1024"}`, true},
		{`{"model":"m","stream_options":{"include_usage":"yes"},"messages":[]}`, false},
		{`{"model":"m","ſtream":true,"messages":[]}`, false}, // a long s: encoding/json folds it to stream
		{`{"model":"m","tools":{},"messages":[]}`, false},
		{`{"model":"m","messages":[]`, false},
		{`[{"model":"m"}]`, false},
		{`{"model":5,"messages":[]}`, false},
	} {
		fb, ok := fastOnly([]byte(c.body))
		if ok != c.fast {
			t.Errorf("%s: fast path %v, want %v", c.body, ok, c.fast)
			continue
		}
		if !ok {
			continue
		}
		sb, err := slowBody([]byte(c.body))
		if err != nil {
			t.Errorf("%s: the fast path accepted a body encoding/json refuses: %v", c.body, err)
		} else if !reflect.DeepEqual(fb, sb) {
			t.Errorf("%s:\nfast %+v\nslow %+v", c.body, fb, sb)
		}
	}
}

// FuzzFastBody: for any input the fast path accepts, encoding/json accepts
// it too and decodes the same openAIBody (the rest of ParseLimited reads
// only that, so its answer is the slow path's).
func FuzzFastBody(f *testing.F) {
	for _, s := range []string{
		`{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":16}`,
		`{"model":"m","stream":true,"messages":[{"role":"tool","content":[{"type":"tool_result","content":"x"}]}],"user":"u"}`,
		`{"model":"m","MAX_TOKENS":3,"messages":[]}`,
		`{"model":"m","max_tokens":-0,"messages":[],"x":[1,{"y":null}]}`,
		`{"model":"m","messages":[{"role":"user","content":"a","tool_calls":[{}]}]}`,
		`{"model":"m","tools":[{"type":"function"}],"stream_options":{"include_usage":true},"metadata":{"user_id":"u"},"system":"s","input":[[1,2]],"reasoning":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fb, ok := fastOnly(body)
		if !ok {
			return
		}
		sb, err := slowBody(body)
		if err != nil {
			t.Fatalf("%q: the fast path accepted a body encoding/json refuses: %v", body, err)
		}
		if !reflect.DeepEqual(fb, sb) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", body, fb, sb)
		}
	})
}

// BenchmarkParseChat is ParseLimited on small chat requests through the
// fast path, and on the same requests with a member spelled in another
// case (encoding/json's path).
func BenchmarkParseChat(b *testing.B) {
	for _, c := range []struct{ name, body string }{
		{"fast", `{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":16}`},
		{"encoding-json", `{"model":"bench","messages":[{"role":"user","content":"hello"}],"Max_Tokens":16}`},
		// what an SDK streaming an agent's turn sends: tools and stream_options
		{"fast-tools-stream", `{"model":"bench","messages":[{"role":"user","content":"hello"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"stream":true,"stream_options":{"include_usage":true}}`},
		{"encoding-json-tools-stream", `{"model":"bench","messages":[{"role":"user","content":"hello"}],"Tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"stream":true,"stream_options":{"include_usage":true}}`},
		// an agent's turn deep into its conversation: 64 KiB of messages
		{"fast-64KiB", longChat(64 << 10)},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseLimited(body, catalog.OpChat, FormatOpenAI, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// longChat is a chat request of at least n bytes: turns of plain text,
// each with an escaped line break and quotes.
func longChat(n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"bench","max_tokens":16,"messages":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		role := [2]string{"user", "assistant"}[i%2]
		b.WriteString(`{"role":"` + role + `","content":"` + strings.Repeat("Refactor the parser so that it reads each value once. ", 20) + `\n\"quoted\" line"}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestToolsRawIsTheToolsMember: the tools span the session fingerprint
// reads is the body's "tools" value as sent, on the fast path and on
// encoding/json's, in each format.
func TestToolsRawIsTheToolsMember(t *testing.T) {
	for _, c := range []struct {
		format Format
		body   string
	}{
		{FormatOpenAI, `{"model":"m","tools" : [ {"type":"function","function":{"name":"f"}} ] ,"messages":[{"role":"user","content":"x"}]}`},
		{FormatOpenAI, `{"model":"m","Tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"}]}`},
		{FormatAnthropic, `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"messages":[{"role":"user","content":"x"}]}`},
		{FormatResponses, `{"model":"m","tools":[{"type":"function","name":"f","parameters":{}}],"input":"x"}`},
	} {
		r, err := ParseLimited([]byte(c.body), catalog.OpChat, c.format, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		want := []byte(nil)
		if s, e, ok := FindTopLevel([]byte(c.body), "tools"); ok {
			want = []byte(c.body)[s:e]
		} else if s, e, ok := FindTopLevel([]byte(c.body), "Tools"); ok {
			want = []byte(c.body)[s:e]
		}
		if string(r.ToolsRaw) != string(want) || r.Tools != 1 {
			t.Errorf("%s: ToolsRaw %q (%d tools), want %q", c.body, r.ToolsRaw, r.Tools, want)
		}
	}
}

// TestMeasuredAreSpansOfRaw: the spans a parse measured are the body's own
// bytes at their members (what lets the cache's key step over them), in
// each format, so a change that copied them would fail here rather than
// only cost a scan.
func TestMeasuredAreSpansOfRaw(t *testing.T) {
	for _, c := range []struct {
		format Format
		body   string
		names  []string
	}{
		{FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"}]}`, []string{"messages", "tools"}},
		{FormatAnthropic, `{"model":"m","max_tokens":5,"system":"be brief","tools":[{"name":"f","input_schema":{}}],"messages":[{"role":"user","content":"x"}]}`, []string{"messages", "tools", "system"}},
		{FormatResponses, `{"model":"m","instructions":"be brief","tools":[{"type":"function","name":"f","parameters":{}}],"input":[{"role":"user","content":"x"}]}`, []string{"input", "tools", "instructions"}},
	} {
		raw := []byte(c.body)
		r, err := ParseLimited(raw, catalog.OpChat, c.format, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		for i, name := range c.names {
			s, e, ok := FindTopLevel(raw, name)
			m := r.Measured[i]
			if !ok || len(m) != e-s || len(m) == 0 || &m[0] != &raw[s] {
				t.Errorf("%s: Measured[%d] is %q, want the %s value of Raw itself", c.body, i, m, name)
			}
		}
	}
}
