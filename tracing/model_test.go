package tracing

import (
	"strings"
	"testing"
)

func TestResponseModel(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"openai sync", `{"id":"x","object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[]}`, "gpt-4o-mini-2024-07-18"},
		{"anthropic sync", ` {"id":"msg","type":"message","role":"assistant","model":"claude-3-5","content":[]}`, "claude-3-5"},
		{"openai chunk", "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m-1\",\"choices\":[]}\n\n", "m-1"},
		{"anthropic message_start", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude-x\"}}\n\n", "claude-x"},
		{"responses created", "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"model\":\"gpt-5\"}}\n\n", "gpt-5"},
		{"escaped", `{"model":"a\"b"}`, `a"b`},
		{"no model", `{"object":"list","data":[]}`, ""},
		{"model not a string", `{"model":42}`, ""},
		{"too long", `{"model":"` + strings.Repeat("m", 300) + `"}`, ""},
		{"not json", `<html>oops</html>`, ""},
		{"empty", ``, ""},
		{"truncated", `{"model":"abc`, ""},
		{"data without json", "data: [DONE]\n\n", ""},
	} {
		if got := ResponseModel([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: ResponseModel = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzResponseModel: upstream bytes are distrusted; the parser never
// panics and never returns more than the bound.
func FuzzResponseModel(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt"}`, "data: {\"model\":\"x\"}\n\n", "event: message_start\ndata: {\"message\":{\"model\":\"c\"}}\n\n",
		`{"response":{"model":"r"}}`, `{"model":"\u00e9"}`, `{"a":[1,{"model":"no"}],"model":null}`, "data:", `{"model":"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if m := ResponseModel(b); len(m) > 4*maxModelName {
			t.Fatalf("model of %d bytes", len(m))
		}
	})
}
