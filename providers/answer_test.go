package providers

import (
	"bytes"
	"encoding/json"
	"testing"

	"switchyard/wire"
)

// TestAnswerRendering: a neutral answer goes through the live translators;
// the Anthropic id derives from the completion id, and a stream ends once.
func TestAnswerRendering(t *testing.T) {
	a := &Answer{ID: "chatcmpl-abc", Created: 7, Model: "m", Text: "hi", ToolCalls: []AnswerCall{{ID: "c", Name: "f", Arguments: `{"x":1}`}},
		Finish: "tool_calls", Usage: Usage{PromptTokens: 2, CompletionTokens: 3}}
	body, err := RenderAnswer(wire.FormatAnthropic, nil, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m anResponse
	if err := json.Unmarshal(body, &m); err != nil || m.ID != "msg_abc" || *m.StopReason != "tool_use" || len(m.Content) != 2 || m.Usage.OutputTokens != 3 {
		t.Fatalf("%v %s", err, body)
	}
	if _, err := RenderAnswer(wire.FormatResponses, nil, a, nil); err == nil {
		t.Fatal("a Responses rendering without the client's request")
	}
	if _, err := NewAnswerStream(wire.FormatResponses, nil, "x", 1, "m", 0, false, nil); err == nil {
		t.Fatal("a Responses stream without the client's request")
	}
	s, err := NewAnswerStream(wire.FormatOpenAI, nil, "chatcmpl-abc", 7, "m", 2, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := append(s.Text("hi"), s.ToolCall(0, "c", "f", "")...)
	out = append(out, s.ToolCall(0, "", "", `{"x":1}`)...)
	out = append(out, s.ToolCall(0, "", "", "")...) // nothing to say
	out = append(out, s.Finish("tool_calls", a.Usage)...)
	if n := bytes.Count(out, []byte("data: ")); n != 6 { // role, text, tool start, args, finish, [DONE]
		t.Fatalf("%d events:\n%s", n, out)
	}
	if s.Finish("stop", a.Usage) != nil {
		t.Fatal("a second finish")
	}
}
