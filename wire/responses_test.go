package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"switchyard/catalog"
)

func TestParseResponses(t *testing.T) {
	body := `{"model":"normal","instructions":"Be brief.","reasoning":{"effort":"high"},"max_output_tokens":5000,
		"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}},"store":false,
		"metadata":{"session_id":"s-1"},"prompt_cache_key":"pck","previous_response_id":" resp_1 ",
		"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],
		"input":[{"role":"developer","content":"Use f."},{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"https://x/y.png"}]},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"},
			{"type":"item_reference","id":"msg_9"},{"type":"reasoning","id":"rs_1"}]}`
	r, err := Parse([]byte(body), catalog.OpChat, FormatResponses)
	if err != nil {
		t.Fatal(err)
	}
	rq := r.Responses
	if r.Format != FormatResponses || r.Model != "normal" || r.ReasoningEffort != "high" || r.MaxTokens != 5000 || !r.JSONSchema || r.Tools != 1 || len(r.ToolsRaw) == 0 {
		t.Fatalf("routing view: %+v", r)
	}
	if rq.Store || rq.PreviousResponseID != "resp_1" || r.PromptCacheKey != "pck" || r.MetadataSessionID != "s-1" {
		t.Fatalf("fields: %+v", rq)
	}
	if len(rq.Input) != 5 || len(rq.Refs) != 1 || rq.Refs[0] != "msg_9" {
		t.Fatalf("items (reasoning dropped, reference kept): %+v", rq.Input)
	}
	if r.System != "Be brief.\nUse f." {
		t.Fatalf("system %q", r.System)
	}
	// user, assistant tool call, tool result; system items live in System
	if len(r.Messages) != 3 || r.Messages[1].ToolCalls != 1 || !r.Messages[2].ToolResult || r.LastUserText() != "hi" {
		t.Fatalf("messages %+v", r.Messages)
	}
	// a string input is one user message; store defaults to true
	r, err = Parse([]byte(`{"model":"m","input":"hello"}`), catalog.OpChat, FormatResponses)
	if err != nil || !r.Responses.Store || len(r.Messages) != 1 || r.Messages[0].Text != "hello" || r.PromptTokens() < 2 {
		t.Fatalf("string input: %+v %v", r, err)
	}
	if err := r.ExpandResponses(make([]Item, DefaultMaxMessages+1), Limits{}); err == nil {
		t.Fatal("an expansion past the item bound must fail")
	}
}

func TestParseResponsesBadInput(t *testing.T) {
	for _, tt := range []struct{ body, param string }{
		{`{"model":"m","input":[{"type":"message","role":"narrator","content":"x"}]}`, "input[0].role"},
		{`{"model":"m","input":[{"type":"web_search_call"}]}`, "input[0].type"},
		{`{"model":"m","input":[{}]}`, "input[0].type"},
		{`{"model":"m","input":[{"type":"function_call","name":"f"}]}`, "input[0]"},
		{`{"model":"m","input":[{"type":"function_call_output"}]}`, "input[0].call_id"},
		{`{"model":"m","input":[{"type":"item_reference"}]}`, "input[0].id"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0]"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "input[0].content[0].type"},
		{`{"model":"m","input":[{"role":"user","content":7}]}`, "input[0].content"},
		{`{"model":"m","input":"x","tools":[{"type":"code_interpreter"}]}`, "tools[0].type"},
		{`{"model":"m","input":"x","tools":[{"type":"function"}]}`, "tools[0].name"},
		{`{"model":"m","input":"x","tool_choice":"sometimes"}`, "tool_choice"},
		{`{"model":"m","input":"x","tool_choice":{"type":"function"}}`, "tool_choice.name"},
		{`{"model":"m","input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type"},
		{`{"model":"m","input":"x","instructions":5}`, "instructions"},
		{`{"model":"m","input":"x","metadata":[1]}`, "metadata"},
		{`{"model":"m","input":"x","reasoning":"high"}`, "reasoning"},
		{`{"model":"m","input":"x","max_output_tokens":-1}`, "max_output_tokens"},
		{`{"model":"m","input":5}`, "input"},
		{`{"model":"m","stream":"yes","input":"x"}`, "stream"},
	} {
		_, err := Parse([]byte(tt.body), catalog.OpChat, FormatResponses)
		we, ok := err.(*Error)
		if !ok || we.Param != tt.param || we.Message == "" {
			t.Errorf("%s: got %v (param %q), want param %q", tt.body, err, paramOf(err), tt.param)
		}
	}
	_, err := Parse([]byte(`{"model":"m","input":[`+strings.Repeat(`"x",`, DefaultMaxMessages)+`"x"]}`), catalog.OpChat, FormatResponses)
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("item bound: %v", err)
	}
}

// FuzzParseResponses: no input panics the Responses parser or its routing
// view, and what parses keeps its invariants.
func FuzzParseResponses(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:,"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"r"}]},{"type":"item_reference","id":"i"}]}`,
		`{"model":"m","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"n","schema":{}}},"reasoning":{"effort":"high"},"previous_response_id":"resp_1"}`,
		`{"model":"m","input":[null,{"type":"reasoning"}]}`, `{"model":"m","input":[{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]}`,
		`[`, `{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkOnePass(t, body)
		r, err := Parse(body, catalog.OpChat, FormatResponses)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("non-input error %T %v", err, err)
			}
			return
		}
		if r.Responses == nil || r.Model == "" {
			t.Fatal("a parsed request has its typed form and a model")
		}
		if len(r.Responses.Input) > DefaultMaxMessages {
			t.Fatal("item bound")
		}
		_ = r.PromptTokens()
		_ = r.LastUserText()
		_ = r.ExpandResponses(append(r.Responses.Input, r.Responses.Input...), Limits{MaxMessages: 50})
	})
}

// TestResponsesMetadataHints: metadata's session_id and user_id are read
// as a map[string]any and a string assertion read them (the decode the
// parse used to make, kept here as the oracle): escaped keys, the last of
// a repeated key, a value that is not a string, keys in another case.
func TestResponsesMetadataHints(t *testing.T) {
	for _, md := range []string{
		`{"session_id":"s","user_id":"u"}`,
		`{"sess\u0069on_id":"s","\u0075ser_id":"u\u00e9\n"}`,
		`{"session_id":"a","session_id":"b","user_id":"u","user_id":7}`,
		`{"session_id":{"x":"y"},"user_id":["u"]}`,
		`{"Session_ID":"s","USER_ID":"u","other":"x"}`,
		`{"session_id":"\ud800x","user_id":"` + "\xff" + `"}`,
		`{"a":[{},[],1,"session_id"],"user_id":null}`,
		`{ }`,
	} {
		body := `{"model":"m","input":"x","metadata":` + md + `}`
		var oracle map[string]any
		if err := json.Unmarshal([]byte(md), &oracle); err != nil {
			t.Fatalf("%s: %v", md, err)
		}
		wantS, _ := oracle["session_id"].(string)
		wantU, _ := oracle["user_id"].(string)
		for _, onePass := range []bool{true, false} {
			r, err := parseResponsesWith([]byte(body), DefaultMaxMessages, onePass)
			if err != nil {
				t.Fatalf("%s: %v", md, err)
			}
			if r.MetadataSessionID != wantS || r.MetadataUserID != wantU {
				t.Errorf("%s (one pass %v): session %q user %q, want %q %q", md, onePass, r.MetadataSessionID, r.MetadataUserID, wantS, wantU)
			}
		}
	}
}
