package providers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"

	"switchyard/wire"
)

// A chat upstream that refuses streams its refusal in delta.refusal (the
// chat completions streaming chunk's "refusal" field). OpenAI's Responses
// API streams a refusal as its own content part: response.content_part.added
// with a {"type":"refusal"} part, response.refusal.delta events, then
// response.refusal.done and response.content_part.done (API reference,
// "Streaming events": response.refusal.delta / response.refusal.done, each
// with item_id, output_index, content_index and sequence_number). The sync
// translation already answers a refusal part (buildResponse); the stream
// relayed it as output_text, so a client checking for a refusal (the SDKs'
// refusal content part) saw model text instead, and the stored turn
// replayed the refusal as if the model had said it.
func TestHostile5StreamedRefusalIsARefusalPart(t *testing.T) {
	rq := &wire.Responses{ID: "resp_r", Store: true}
	var storedItems []wire.Item
	c := newChatToResponsesStream(rq, "m", 1, func(_ []byte, items []wire.Item) { storedItems = items })
	var out []byte
	for _, ch := range []string{
		`{"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}`,
		`{"id":"c","model":"m","choices":[{"index":0,"delta":{"refusal":"I can't "}}]}`,
		`{"id":"c","model":"m","choices":[{"index":0,"delta":{"refusal":"help with that."}}]}`,
		`{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`[DONE]`,
	} {
		b, _, err := c.event("", []byte(ch))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	evs := parseSSE(t, out)
	checkSequence(t, evs)
	var names []string
	var final responses.Response
	var refusalDelta strings.Builder
	for _, e := range evs {
		names = append(names, e.name)
		var u responses.ResponseStreamEventUnion // the SDK's reading of the event
		if err := json.Unmarshal([]byte(e.data), &u); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		switch e.name {
		case "response.output_text.delta":
			t.Fatalf("a refusal streamed as output text: %s", e.data)
		case "response.refusal.delta":
			if u.ContentIndex != 0 || u.ItemID == "" {
				t.Fatalf("refusal delta %s", e.data)
			}
			refusalDelta.WriteString(u.Delta)
		case "response.refusal.done":
			if u.Refusal != "I can't help with that." {
				t.Fatalf("refusal done %s", e.data)
			}
		case "response.content_part.added":
			if u.Part.Type != "refusal" {
				t.Fatalf("the part opened is %q, want refusal: %s", u.Part.Type, e.data)
			}
		case "response.completed":
			final = u.Response
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.refusal.delta response.refusal.delta response.refusal.done response.content_part.done " +
		"response.output_item.done response.completed"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if refusalDelta.String() != "I can't help with that." {
		t.Fatalf("refusal deltas %q", refusalDelta.String())
	}
	if len(final.Output) != 1 || len(final.Output[0].Content) != 1 || final.Output[0].Content[0].Type != "refusal" ||
		final.Output[0].Content[0].Refusal != "I can't help with that." {
		t.Fatalf("final output %s", final.RawJSON())
	}
	// the same answer sync is the same object's output
	sync, _, err := chatToResponses([]byte(`{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`), rq, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var so struct {
		Output json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(sync, &so)
	if got := final.JSON.Output.Raw(); got != string(so.Output) {
		t.Fatalf("stream output %s\n sync output %s", got, so.Output)
	}
	if len(storedItems) != 1 || len(storedItems[0].Content) != 1 || storedItems[0].Content[0].Type != "refusal" {
		t.Fatalf("stored %+v", storedItems)
	}
}

// Text and then a refusal in one message are two parts, content_index 0
// and 1, each opened and closed in turn.
func TestHostile5StreamedTextThenRefusal(t *testing.T) {
	rq := &wire.Responses{ID: "resp_r"}
	c := newChatToResponsesStream(rq, "m", 1, nil)
	var out []byte
	for _, ch := range []string{
		`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"Well, "}}]}`,
		`{"id":"c","model":"m","choices":[{"index":0,"delta":{"refusal":"no."}}]}`,
		`{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`[DONE]`,
	} {
		b, _, err := c.event("", []byte(ch))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	evs := parseSSE(t, out)
	checkSequence(t, evs)
	var names []string
	for _, e := range evs {
		var d struct {
			ContentIndex *int `json:"content_index"`
		}
		_ = json.Unmarshal([]byte(e.data), &d)
		n := e.name
		if d.ContentIndex != nil {
			n += "/" + string(rune('0'+*d.ContentIndex))
		}
		names = append(names, n)
	}
	want := "response.created response.in_progress response.output_item.added " +
		"response.content_part.added/0 response.output_text.delta/0 response.output_text.done/0 response.content_part.done/0 " +
		"response.content_part.added/1 response.refusal.delta/1 response.refusal.done/1 response.content_part.done/1 " +
		"response.output_item.done response.completed"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	var fin struct {
		Response struct {
			Output []struct {
				Content []struct{ Type, Text, Refusal string }
			}
		}
	}
	_ = json.Unmarshal([]byte(evs[len(evs)-1].data), &fin)
	if o := fin.Response.Output; len(o) != 1 || len(o[0].Content) != 2 || o[0].Content[0].Text != "Well, " || o[0].Content[1].Refusal != "no." {
		t.Fatalf("final %s", evs[len(evs)-1].data)
	}
}

// An Anthropic model that refuses ends with stop_reason "refusal" and no
// text (Messages API, "Handling stop reasons": refusal). The sync
// translation answers that with a refusal content part (status
// incomplete, reason content_filter); the stream must end in the same
// response object, or a streaming client (and the stored turn) sees an
// empty output where a sync one sees the refusal.
func TestHostile5AnthropicStreamRefusalMatchesSync(t *testing.T) {
	rq := &wire.Responses{ID: "resp_a", Store: true}
	var stored []byte
	c := newAnthropicToResponsesStream(rq, "m", 1, func(b []byte, _ []wire.Item) { stored = b })
	var out []byte
	for _, ev := range []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null},"usage":{"output_tokens":1}}`},
		{"message_stop", `{"type":"message_stop"}`},
	} {
		b, _, err := c.event(ev.name, []byte(ev.data))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	evs := parseSSE(t, out)
	checkSequence(t, evs)
	sync, _, err := anthropicToResponses([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":"refusal","usage":{"input_tokens":5,"output_tokens":1}}`), rq, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s, st struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(sync, &s)
	_ = json.Unmarshal(stored, &st)
	if st.Status != s.Status || string(st.Output) != string(s.Output) {
		t.Fatalf("stream ended in %s %s\nsync answered %s %s", st.Status, st.Output, s.Status, s.Output)
	}
}
