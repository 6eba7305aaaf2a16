package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"switchyard/catalog"
)

// allocated is the bytes fn allocated (runtime.MemStats.TotalAlloc; not a
// timing, and stable for one goroutine).
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

func repeatJSON(prefix, elem, suffix string, n int) []byte {
	var b bytes.Buffer
	b.Grow(len(prefix) + n*(len(elem)+1) + len(suffix))
	b.WriteString(prefix)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// The reproductions of issue 15 and their relatives: each body used to make
// Parse allocate 10-100x its size (3M empty embedding arrays: ~1 GiB; 806k
// tiny messages: 354 MiB). Parsing now allocates a small multiple of the
// body, and the over-limit ones are refused with a 400 naming the limit.
func TestParseAllocationBounded(t *testing.T) {
	cases := []struct {
		name string
		op   catalog.Operation
		fmt  Format
		body []byte
		code string // expected Error.Code; "" = accepted
	}{
		{"3M empty embedding arrays", catalog.OpEmbeddings, FormatOpenAI,
			repeatJSON(`{"model":"e","input":[`, `[]`, `]}`, 3_000_000), "too_many_inputs"},
		{"806k tiny messages", catalog.OpChat, FormatOpenAI,
			repeatJSON(`{"model":"m","messages":[`, `{"role":"u"}`, `]}`, 806_000), "too_many_messages"},
		{"3M empty content parts", catalog.OpChat, FormatOpenAI,
			repeatJSON(`{"model":"m","messages":[{"role":"user","content":[`, `{}`, `]}]}`, 3_000_000), ""},
		{"3M tools", catalog.OpChat, FormatOpenAI,
			repeatJSON(`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[`, `{}`, `]}`, 3_000_000), ""},
		{"3M tool calls", catalog.OpChat, FormatOpenAI,
			repeatJSON(`{"model":"m","messages":[{"role":"assistant","tool_calls":[`, `{}`, `]}]}`, 3_000_000), ""},
		{"2M tokens in one input", catalog.OpEmbeddings, FormatOpenAI,
			repeatJSON(`{"model":"e","input":[`, `1`, `]}`, 2_000_000), ""},
		{"10000 messages at the limit", catalog.OpChat, FormatOpenAI,
			repeatJSON(`{"model":"m","messages":[`, `{"role":"user","content":"hello there"}`, `]}`, 10_000), ""},
		{"2048 inputs at the limit", catalog.OpEmbeddings, FormatOpenAI,
			repeatJSON(`{"model":"e","input":[`, `[1,2,3,4,5,6,7,8]`, `]}`, 2048), ""},
		{"Responses: 3M input items", catalog.OpChat, FormatResponses,
			repeatJSON(`{"model":"m","input":[`, `{}`, `]}`, 3_000_000), "too_many_messages"},
		{"Responses: 3M content parts", catalog.OpChat, FormatResponses,
			repeatJSON(`{"model":"m","input":[{"type":"message","role":"user","content":[`, `{}`, `]}]}`, 3_000_000), "too_many_messages"},
		{"Responses: 3M tools", catalog.OpChat, FormatResponses,
			repeatJSON(`{"model":"m","input":"hi","tools":[`, `{}`, `]}`, 3_000_000), "too_many_tools"},
		{"Responses: 3M output parts", catalog.OpChat, FormatResponses,
			repeatJSON(`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[`, `{}`, `]}]}`, 3_000_000), ""},
		// metadata was decoded into a map[string]any for two of its
		// members: an element of an array in it cost ~45x its bytes
		{"Responses: 1M objects in metadata", catalog.OpChat, FormatResponses,
			repeatJSON(`{"model":"m","input":"x","metadata":{"a":[`, `{}`, `]}}`, 1_000_000), ""},
		{"Responses: 1M numbers in metadata", catalog.OpChat, FormatResponses,
			repeatJSON(`{"model":"m","input":"x","metadata":{"a":[`, `0`, `]}}`, 1_000_000), ""},
		{"Responses: 1M members of metadata", catalog.OpChat, FormatResponses,
			repeatJSON(`{"model":"m","input":"x","metadata":{`, `"k":0`, `}}`, 1_000_000), ""},
		{"Responses: deep arrays in metadata", catalog.OpChat, FormatResponses,
			[]byte(`{"model":"m","input":"x","metadata":{"a":` + strings.Repeat(`[`, 9000) + strings.Repeat(`]`, 9000) + `}}`), ""},
		{"deep tool_result nesting", catalog.OpChat, FormatAnthropic,
			[]byte(`{"model":"c","max_tokens":1,"messages":[{"role":"user","content":` +
				strings.Repeat(`[{"type":"tool_result","content":`, 4000) + `"x"` + strings.Repeat(`}]`, 4000) + `}]}`), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = Parse(tc.body, tc.op, tc.fmt) })
			if tc.code == "" && err != nil {
				t.Fatalf("want accepted, got %v", err)
			}
			if tc.code != "" {
				var we *Error
				if !errors.As(err, &we) || we.Code != tc.code || (tc.code != "too_many_tools" && !strings.Contains(we.Message, "server.max_")) {
					t.Fatalf("want a 400 with code %s naming the limit, got %v", tc.code, err)
				}
			}
			if limit := 4*uint64(len(tc.body)) + 1<<20; n > limit {
				t.Fatalf("Parse of a %d-byte body allocated %d bytes (%.1fx), more than %d", len(tc.body), n, float64(n)/float64(len(tc.body)), limit)
			}
			t.Logf("%d-byte body: %d bytes allocated (%.2fx)", len(tc.body), n, float64(n)/float64(len(tc.body)))
		})
	}
}

func TestParseLimits(t *testing.T) {
	lim := Limits{MaxMessages: 3, MaxInputItems: 2}
	chat := func(n int) []byte {
		return repeatJSON(`{"model":"m","messages":[`, `{"role":"user","content":"hi"}`, `]}`, n)
	}
	if _, err := ParseLimited(chat(3), catalog.OpChat, FormatOpenAI, lim); err != nil {
		t.Fatalf("3 messages at max 3: %v", err)
	}
	_, err := ParseLimited(chat(4), catalog.OpChat, FormatOpenAI, lim)
	var we *Error
	if !errors.As(err, &we) || we.Param != "messages" || !strings.Contains(we.Message, "at most 3") {
		t.Fatalf("4 messages at max 3: %v", err)
	}
	for _, tc := range []struct {
		input string
		ok    bool
		items int
	}{
		{`"a"`, true, 1},
		{`["a","b"]`, true, 2},
		{`["a","b","c"]`, false, 0},
		{`[1,2,3,4,5]`, true, 1}, // one input as tokens
		{`[[1,2],[3]]`, true, 2},
		{`[[1],[2],[3]]`, false, 0},
		{`[1.5]`, false, 0},
		{`[{"a":1}]`, false, 0},
		{`{"a":1}`, false, 0},
		{`["a",[1,"x"]]`, false, 0},
		{`[]`, true, 0},
	} {
		r, err := ParseLimited([]byte(`{"model":"e","input":`+tc.input+`}`), catalog.OpEmbeddings, FormatOpenAI, lim)
		if tc.ok != (err == nil) {
			t.Errorf("input %s: err %v, want ok=%v", tc.input, err, tc.ok)
			continue
		}
		if err == nil && len(r.Input) != tc.items {
			t.Errorf("input %s: %d items, want %d", tc.input, len(r.Input), tc.items)
		}
	}
	r, err := Parse([]byte(`{"model":"e","input":[[1,2,3]]}`), catalog.OpEmbeddings, FormatOpenAI)
	if err != nil || r.PromptTokens() != 3 {
		t.Fatalf("token input estimate: %v %v", r, err)
	}
}

// The counted and bounded decoders keep the old answers on ordinary bodies.
func TestParseShapesUnchanged(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"function"},{"type":"function"}],"messages":[` +
		`{"role":"system","content":"sys"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"1"},{"id":"2"},{"id":"3"}]},` +
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}]}`
	r, err := Parse([]byte(body), catalog.OpChat, FormatOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tools != 2 || len(r.Messages) != 3 || r.Messages[1].ToolCalls != 3 || r.Messages[2].Text != "a\nb" || r.System != "sys" {
		t.Fatalf("parsed %+v", r)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{`{"model":"m","messages":[{"role":"user","content":"x"},{"role":7}]}`, "messages[1].role"},
		{`{"model":"m","messages":{"role":"user"}}`, "messages"},
		{`{"model":"m","messages":["x"]}`, "messages[0]"},
		{`{"model":"m","messages":[{"role":"user"}],"tools":{}}`, "tools"},
	} {
		_, err := Parse([]byte(bad.body), catalog.OpChat, FormatOpenAI)
		var we *Error
		if !errors.As(err, &we) || we.Param != bad.param {
			t.Errorf("%s: got %v (param %q), want param %q", bad.body, err, paramOf(err), bad.param)
		}
	}
}

func paramOf(err error) string {
	var we *Error
	if errors.As(err, &we) {
		return we.Param
	}
	return ""
}

func TestAppendStringValidUTF8(t *testing.T) {
	cases := map[string]string{
		"plain":          `"plain"`,
		"q\"b\\":         `"q\"b\\"`,
		"\n\r\t\x01":     `"\n\r\t\u0001"`,
		"caf\xc3":        `"caf\ufffd"`, // a cut character
		"\xff\xfe":       `"\ufffd\ufffd"`,
		"é\u2028\u2029x": `"é\u2028\u2029x"`,
	}
	for in, want := range cases {
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Truncate("aéb", 2); got != "a..." {
		t.Errorf("Truncate cut a character: %q", got)
	}
	if got := Truncate("日本語", 4); got != "日..." {
		t.Errorf("Truncate(日本語, 4) = %q", got)
	}
}

// FuzzAppendMarshalString: AppendMarshalString writes what json.Marshal
// writes for the same string, and MarshalsAsIs says when that is the input
// itself.
func FuzzAppendMarshalString(f *testing.F) {
	for _, s := range []string{"", "a\"b<>&", "caf\xc3", "\u2028", "\x00\x1f\b\f", "日本", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		got := AppendMarshalString(nil, []byte(s))
		if string(got) != string(want) {
			t.Fatalf("AppendMarshalString(%q) = %s, json.Marshal %s", s, got, want)
		}
		if asIs := string(want) == `"`+s+`"`; MarshalsAsIs([]byte(s)) != asIs {
			t.Fatalf("MarshalsAsIs(%q) = %v, want %v", s, !asIs, asIs)
		}
	})
}

// FuzzAppendString: whatever the input, the encoder's output is valid JSON
// and valid UTF-8, and it decodes back to the input when that was valid UTF-8.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "caf\xc3", "\u2028", "\x00\x1f", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		if !jsonValid(out) || !utf8Valid(out) {
			t.Fatalf("AppendString(%q) = %q is not valid JSON/UTF-8", s, out)
		}
		if utf8Valid([]byte(s)) {
			back, err := strconv.Unquote(string(out))
			if err == nil && back != s && !strings.ContainsAny(s, "\u2028\u2029") {
				t.Fatalf("round trip %q -> %q", s, back)
			}
		}
		tr := Truncate(s, len(s)/2)
		if utf8Valid([]byte(s)) && !utf8Valid([]byte(tr)) {
			t.Fatalf("Truncate(%q) = %q cut a character", s, tr)
		}
		body := AppendError(nil, Format(len(s)%2), ErrorBody{Type: s, Code: s, Param: s, Message: s})
		if !jsonValid(body) || !utf8Valid(body) {
			t.Fatalf("AppendError(%q) = %q", s, body)
		}
	})
}

// FuzzDecodeString: the in-place string decoder agrees with encoding/json
// on every valid JSON string literal.
func FuzzDecodeString(f *testing.F) {
	for _, s := range []string{`""`, `"a\nb"`, `"\u00e9\ud83d\ude00"`, `"\ud800x"`, `"\udc00\ud800"`, "\"caf\xc3\"", `"\/\\\""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		var want string
		if json.Unmarshal(q, &want) != nil || len(q) == 0 || q[0] != '"' {
			return
		}
		if got := decodeString(q); got != want {
			t.Fatalf("decodeString(%q) = %q, encoding/json says %q", q, got, want) // one U+FFFD per invalid byte too
		}
	})
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"0", 0, true}, {"25", 25, true}, {"-3", -3, true}, {"999999999999999999", 999999999999999999, true},
		{"", 0, false}, {"-", 0, false}, {"012", 0, false}, {"9.0", 0, false}, {"1e2", 0, false},
		{`"9"`, 0, false}, {"null", 0, false}, {"1234567890123456789", 0, false},
	} {
		if got, ok := ParseInt([]byte(tc.in)); got != tc.want || ok != tc.ok {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzMarshalsLiteralAsIs: for a JSON string literal (with text after it),
// a length from MarshalsLiteralAsIs is the literal's, and json.Marshal of
// what it decodes to is the literal byte for byte; 0 only when it is not,
// or when it holds a \u escape (those are left to the slow path).
func FuzzMarshalsLiteralAsIs(f *testing.F) {
	for _, s := range []string{`"a\nb\"c\\d\te\rf"`, `"\b\f"`, `"\/"`, `"\u00e9"`, `"é日本"`, `"<"`, "\"\u2028\"", "\"\xff\"", `"\u0001"`, `""`, `"\ufffd"`} {
		f.Add(s, ",1]")
	}
	f.Fuzz(func(t *testing.T, lit, after string) {
		var decoded string
		if !strings.HasPrefix(lit, `"`) || strings.TrimSpace(lit) != lit || json.Unmarshal([]byte(lit), &decoded) != nil {
			return
		}
		want, _ := json.Marshal(decoded)
		n := MarshalsLiteralAsIs([]byte(lit + after))
		switch {
		case n > 0 && (n != len(lit) || string(want) != lit):
			t.Fatalf("%q: length %d, json.Marshal gives %s", lit, n, want)
		case n == 0 && string(want) == lit && !strings.Contains(lit, `\u`):
			t.Fatalf("%q: marshals as is, but MarshalsLiteralAsIs says 0", lit)
		}
	})
}
