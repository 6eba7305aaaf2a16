package providers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var marshalAnthropicCases = []string{
	`{"model":"m","messages":[{"role":"system","content":"be <brief> & kind"},{"role":"user","content":"hi\u2028there"}]}`,
	`{"model":"m","max_tokens":5,"temperature":1.5,"stop":["x"],"user":"u","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
	`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
	`{"model":"m","messages":[]}`,
}

// checkMarshalAnthropic holds marshalAnthropic to json.Marshal's bytes for
// the Messages request chatToAnthropic makes of body.
func checkMarshalAnthropic(t *testing.T, body []byte) {
	t.Helper()
	var in oaRequest
	if json.Unmarshal(body, &in) != nil {
		return
	}
	out, err := chatToAnthropic(&in, "claude", len(body)%2 == 0)
	if err != nil {
		return
	}
	want, werr := json.Marshal(out)
	got, gerr := marshalAnthropic(out)
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %s (%v)\nwant %s (%v)", body, got, gerr, want, werr)
	}
}

func TestMarshalAnthropicIsJSONMarshal(t *testing.T) {
	for _, c := range marshalAnthropicCases {
		checkMarshalAnthropic(t, []byte(c))
	}
	long := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("text \\n \\\"q\\\" ", 2000) + `"}]}`
	checkMarshalAnthropic(t, []byte(long))
}

func FuzzMarshalAnthropic(f *testing.F) {
	for _, c := range marshalAnthropicCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkMarshalAnthropic(t, body) })
}

var marshalOpenAICases = []string{
	`{"model":"m","max_tokens":5,"system":"be <brief>","messages":[{"role":"user","content":"hi & bye \u2028"}]}`,
	`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"stop_sequences":["x"],"metadata":{"user_id":"u"},"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"tool_use","id":"c1","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"42"},{"type":"text","text":"go on"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[]}]}`,
	`{"model":"m","max_tokens":5,"messages":[]}`,
}

// checkMarshalOpenAI holds marshalOpenAI to json.Marshal's bytes for the
// chat request anthropicToOpenAIChat makes of body.
func checkMarshalOpenAI(t *testing.T, body []byte) {
	t.Helper()
	out, err := anthropicToOpenAIChat(body, "gpt", len(body)%2 == 0)
	if err != nil {
		return
	}
	want, werr := json.Marshal(out)
	got, gerr := marshalOpenAI(out)
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %s (%v)\nwant %s (%v)", body, got, gerr, want, werr)
	}
}

func TestMarshalOpenAIIsJSONMarshal(t *testing.T) {
	for _, c := range marshalOpenAICases {
		checkMarshalOpenAI(t, []byte(c))
	}
	checkMarshalOpenAI(t, longOpenAIChat(16<<10))
}

func FuzzMarshalOpenAI(f *testing.F) {
	for _, c := range marshalOpenAICases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkMarshalOpenAI(t, body) })
}
