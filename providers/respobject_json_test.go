package providers

import (
	"bytes"
	"encoding/json"
	"testing"

	"switchyard/internal/agentturn"
	"switchyard/wire"
)

// respObjects are response objects of every shape appendJSON writes:
// echoed settings absent and present, raw members compact and not (space,
// <, >, &, U+2028), tools with and without a description or parameters,
// output items, a finished and an incomplete status.
func respObjects(t testing.TB) []*respObject {
	t.Helper()
	temp, topP, maxOut, par, strict := 0.25, 1e-7, 128, false, true
	full := &wire.Responses{
		ID: "resp_1", Instructions: "be <brief> & \u2028 \"kind\"", MaxOutputTokens: &maxOut, Temperature: &temp, TopP: &topP,
		ParallelToolCalls: &par, Text: json.RawMessage(`{ "format" : {"type":"text"}, "verbosity":"low" }`),
		Reasoning: json.RawMessage(`{"effort":"high","summary":"a <b> & c"}`), ToolChoice: json.RawMessage(`{"type":"function","name":"f"}`),
		Metadata: json.RawMessage("{\"k\":\"v \u2029\"}"), Store: true, PreviousResponseID: "resp_0", User: "u&1",
		Tools: []wire.Tool{
			{Name: "f", Description: "finds <things>", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), Strict: &strict},
			{Name: "g", Parameters: json.RawMessage("{\n  \"type\": \"object\"\n}")},
			{Name: "h"},
		},
	}
	agent, err := wire.ParseLimited([]byte(agentturn.Responses()), 1, wire.FormatResponses, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*respObject
	for _, rq := range []*wire.Responses{{ID: "resp_2"}, full, agent.Responses} {
		o := baseResponse(rq, respID(rq), 1700000000, "m")
		out = append(out, o)
		done := baseResponse(rq, respID(rq), 1700000000, "m")
		done.Output = []any{
			respMessage{ID: "msg_1", Type: "message", Status: "completed", Role: "assistant", Content: []any{newTextPart("hi <there>"), respRefusal{Type: "refusal", Refusal: "no"}}},
			respCall{ID: "fc_1", Type: "function_call", Status: "completed", Arguments: `{"a":1}`, CallID: "c", Name: "f"},
		}
		done.settle("stop", Usage{PromptTokens: 10, CompletionTokens: 5, CachedTokens: 2})
		cut := baseResponse(rq, respID(rq), 1700000000, "m")
		cut.settle("length", Usage{})
		out = append(out, done, cut)
	}
	return out
}

func TestRespObjectJSONIsMarshal(t *testing.T) {
	for i, o := range respObjects(t) {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.appendJSON(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("object %d:\n got %s (%v)\nwant %s", i, got, err, want)
		}
		tools, _ := appendRespTools(nil, o.Tools)
		ev, err := appendEvResponse(nil, "response.created", o, 3, tools)
		wantEv, _ := json.Marshal(evResponse{Type: "response.created", Response: o, SequenceNumber: 3})
		if err != nil || !bytes.Equal(ev, wantEv) {
			t.Fatalf("event %d:\n got %s (%v)\nwant %s", i, ev, err, wantEv)
		}
	}
}

func TestMarshalsRawAsIs(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"a":[1,2,"x y"]}`: true, `"a\"b"`: true, `{"a": 1}`: false, ` 1`: false, `"<"`: false, "\"\u2028\"": false,
		`"\u003c"`: true, `"a\\"`: true, `{"a":"b\\\" c"}`: true, `{"a":"b\\\\" ,"c":1}`: false, ``: false,
	} {
		if got := marshalsRawAsIs([]byte(raw)); got != want {
			t.Errorf("marshalsRawAsIs(%s) = %v, want %v", raw, got, want)
		}
	}
}

// BenchmarkRespObjectJSON writes the response object of an agent's turn
// (20 tools with 1.3 KB schemas echoed), by hand and with json.Marshal.
func BenchmarkRespObjectJSON(b *testing.B) {
	o := respObjects(b)[7]
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := o.appendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(o); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEmitterResponseEventsAreMarshal: the events that carry the response
// object are framed as appendEvent frames json.Marshal's bytes.
func TestEmitterResponseEventsAreMarshal(t *testing.T) {
	for i, o := range respObjects(t) {
		e := &respEmitter{seq: 4}
		e.emitResponse("response.created", o)
		data, _ := json.Marshal(evResponse{Type: "response.created", Response: o, SequenceNumber: 4})
		if want := appendEvent(nil, "response.created", data); !bytes.Equal(e.take(), want) {
			t.Fatalf("object %d: the event differs from json.Marshal's, framed", i)
		}
	}
}
