package providers

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/routing"
	"switchyard/wire"
)

// Golden tests of both Responses translation pairs. Inputs and expected
// outputs live in testdata/responses; `go test ./providers -run Responses
// -update` rewrites the expected files (review the diff before committing).
var update = flag.Bool("update", false, "rewrite golden files under testdata/responses")

const goldenDir = "testdata/responses"

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with the golden file (JSON by value, SSE by text).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if strings.HasSuffix(name, ".json") {
		var buf bytes.Buffer
		if err := json.Indent(&buf, got, "", "  "); err != nil {
			t.Fatalf("%s: invalid JSON %s", name, got)
		}
		got = append(buf.Bytes(), '\n')
	}
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if strings.HasSuffix(name, ".json") {
		assertJSON(t, got, string(want))
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// responsesReq parses a fixture request with a fixed response id.
func responsesReq(t *testing.T, name string) *wire.Responses {
	t.Helper()
	r, err := wire.Parse(readFixture(t, name), catalog.OpChat, wire.FormatResponses)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r.Responses.ID = "resp_test"
	return r.Responses
}

func TestResponsesRequestGolden(t *testing.T) {
	for _, name := range []string{"req_text", "req_tools", "req_named_tool", "req_images_schema"} {
		t.Run(name, func(t *testing.T) {
			rq := responsesReq(t, name+".json")
			chat, err := responsesToChatBody(rq, "gpt-up", strings.Contains(name, "named"))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".chat.golden.json", chat)
			an, err := responsesToAnthropicBody(rq, "claude-up", strings.Contains(name, "named"))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".anthropic.golden.json", an)
		})
	}
}

func TestResponsesResponseGolden(t *testing.T) {
	tests := []struct {
		upstream, req string
		anthropic     bool
		usage         Usage
	}{
		{"chat_text", "req_text", false, Usage{PromptTokens: 12, CompletionTokens: 3, CachedTokens: 8}},
		{"chat_tools", "req_tools", false, Usage{PromptTokens: 40, CompletionTokens: 20}},
		{"chat_length", "req_text", false, Usage{PromptTokens: 5, CompletionTokens: 2}},
		{"anthropic_tools", "req_tools", true, Usage{PromptTokens: 60, CompletionTokens: 30, CachedTokens: 10}},
		{"anthropic_max", "req_text", true, Usage{PromptTokens: 5, CompletionTokens: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.upstream, func(t *testing.T) {
			rq := responsesReq(t, tt.req+".json")
			raw := readFixture(t, tt.upstream+".json")
			var got []byte
			var u Usage
			var err error
			if tt.anthropic {
				got, u, err = anthropicToResponses(raw, rq, 1700000000, func(b []byte, out []wire.Item) { checkItems(t, b, out) })
			} else {
				got, u, err = chatToResponses(raw, rq, 1700000000, func(b []byte, out []wire.Item) { checkItems(t, b, out) })
			}
			if err != nil {
				t.Fatal(err)
			}
			if u != tt.usage {
				t.Fatalf("usage %+v, want %+v", u, tt.usage)
			}
			golden(t, tt.upstream+".responses.golden.json", got)
		})
	}
}

// feedFile runs a converter over an upstream SSE fixture.
func feedFile(t *testing.T, c converter, name string) ([]byte, bool) {
	t.Helper()
	r := newSSEReader(bytes.NewReader(readFixture(t, name)))
	var out []byte
	for {
		ev, data, err := r.next()
		if err != nil {
			return out, false
		}
		b, done, err := c.event(ev, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, b...)
		if done {
			return out, true
		}
	}
}

func TestResponsesStreamGolden(t *testing.T) {
	tests := []struct {
		upstream, req string
		anthropic     bool
		final         string // the last event's name
		usage         Usage
	}{
		{"chat_stream_text", "req_text", false, "response.completed", Usage{PromptTokens: 9, CompletionTokens: 2, CachedTokens: 4}},
		{"chat_stream_tools", "req_tools", false, "response.completed", Usage{PromptTokens: 30, CompletionTokens: 12}},
		{"chat_stream_length", "req_text", false, "response.incomplete", Usage{PromptTokens: 4, CompletionTokens: 1}},
		{"anthropic_stream_tools", "req_tools", true, "response.completed", Usage{PromptTokens: 25, CompletionTokens: 15, CachedTokens: 12, CacheWriteTokens: 8}},
		{"anthropic_stream_max", "req_text", true, "response.incomplete", Usage{PromptTokens: 5, CompletionTokens: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.upstream, func(t *testing.T) {
			rq := responsesReq(t, tt.req+".json")
			var stored []byte
			var items []wire.Item
			done := func(b []byte, out []wire.Item) { stored, items = b, out }
			var c converter
			if tt.anthropic {
				c = newAnthropicToResponsesStream(rq, "up", 1700000000, done)
			} else {
				c = newChatToResponsesStream(rq, "up", 1700000000, done)
			}
			out, ended := feedFile(t, c, tt.upstream+".sse")
			if !ended {
				t.Fatal("the upstream end marker must end the stream")
			}
			if c.usage() != tt.usage {
				t.Fatalf("usage %+v, want %+v", c.usage(), tt.usage)
			}
			golden(t, tt.upstream+".golden.sse", out)
			evs := parseSSE(t, out)
			checkSequence(t, evs)
			last := evs[len(evs)-1]
			if last.name != tt.final {
				t.Fatalf("last event %s, want %s", last.name, tt.final)
			}
			// what the store receives is the response the final event carries
			var fin struct {
				Response json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal([]byte(last.data), &fin); err != nil {
				t.Fatal(err)
			}
			assertJSON(t, stored, string(fin.Response))
			checkItems(t, stored, items)
		})
	}
}

// checkItems: the typed items handed to the store are the object's output.
func checkItems(t *testing.T, body []byte, items []wire.Item) {
	t.Helper()
	var o struct {
		Output []wire.Item `json:"output"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(o.Output)
	b, _ := json.Marshal(items)
	if string(a) != string(b) {
		t.Fatalf("store items differ from the output:\n%s\n%s", a, b)
	}
}

// checkSequence asserts the stream contract of SPEC 10.1: every event
// names its type in the event: line and in data.type, sequence numbers
// count up from 0, and created/in_progress come first.
func checkSequence(t *testing.T, evs []sseEvent) {
	t.Helper()
	if len(evs) < 3 || evs[0].name != "response.created" || evs[1].name != "response.in_progress" {
		t.Fatalf("stream must open with response.created, response.in_progress:\n%s", dumpEvents(evs))
	}
	for i, e := range evs {
		var d struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(e.data), &d); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if d.Type != e.name || d.Seq == nil || *d.Seq != i {
			t.Fatalf("event %d: type %q seq %v (event: %s)", i, d.Type, d.Seq, e.name)
		}
	}
}

func TestResponsesStreamErrors(t *testing.T) {
	rq := responsesReq(t, "req_text.json")
	c := newChatToResponsesStream(rq, "m", 1, nil)
	if _, _, err := c.event("", []byte(`{"error":{"message":"overloaded","type":"server_error"}}`)); err == nil {
		t.Fatal("an error chunk must fail the stream")
	}
	c = newChatToResponsesStream(rq, "m", 1, nil)
	if _, err := c.eof(); err == nil {
		t.Fatal("a stream cut before its finish must fail")
	}
	c = newChatToResponsesStream(rq, "m", 1, nil)
	_, _, _ = c.event("", []byte(`{"id":"x","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}`))
	out, err := c.eof()
	if err != nil || !bytes.Contains(out, []byte("response.completed")) {
		t.Fatalf("a finished stream without [DONE] completes: %v %s", err, out)
	}
	a := newAnthropicToResponsesStream(rq, "m", 1, nil)
	if _, _, err := a.event("error", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)); err == nil {
		t.Fatal("an Anthropic error event must fail the stream")
	}
	if _, err := a.eof(); err == nil {
		t.Fatal("an Anthropic stream without message_stop is cut")
	}
	if _, _, err := a.event("message_start", []byte(`{not json`)); err == nil {
		t.Fatal("garbage must fail")
	}
}

func TestResponsesRequestRefusals(t *testing.T) {
	rq := responsesReq(t, "req_text.json")
	rq.Input = []wire.Item{{Type: "message", Role: "assistant", Content: []wire.Part{{Type: "input_image", ImageURL: "https://x"}}}}
	_, err := responsesToChatBody(rq, "m", false)
	wantClass(t, err, routing.ClassBadRequest)
	rq.Input = []wire.Item{{Type: "item_reference", ID: "msg_1"}}
	_, err = responsesToChatBody(rq, "m", false)
	wantClass(t, err, routing.ClassBadRequest)
}

// TestForwardAllowlist: only listed client headers go upstream, never a
// credential or hop-by-hop header, whatever the list says (SPEC 15).
func TestForwardAllowlist(t *testing.T) {
	u := newHTTPUpstream("https://api.example/v1", http.Header{"Authorization": {"Bearer up-key"}}, []string{"x-trace-tag", "Authorization", "X-Api-Key", "Cookie", "Host", " X-Trace-Tag "})
	if len(u.forward) != 1 || u.forward[0] != "X-Trace-Tag" {
		t.Fatalf("allowlist %v", u.forward)
	}
	client := http.Header{"Authorization": {"Bearer client-key"}, "X-Api-Key": {"k"}, "Cookie": {"c"}, "X-Trace-Tag": {"t"}}
	h := u.headers(false, client)
	if h.Get("Authorization") != "Bearer up-key" || h.Get("X-Api-Key") != "" || h.Get("Cookie") != "" || h.Get("X-Trace-Tag") != "t" {
		t.Fatalf("headers %v", h)
	}
	if u.sync.Get("X-Trace-Tag") != "" {
		t.Fatal("the shared prebuilt headers must not be modified")
	}
	if got := u.headers(true, http.Header{}); got.Get("Accept") != "text/event-stream" || got.Get("X-Trace-Tag") != "" {
		t.Fatalf("no client header: the prebuilt stream map, got %v", got)
	}
}

// TestResponsesStreamHeldBounded: a Responses stream holds its answer for
// the .done events and the final object, so an upstream that streams text,
// arguments or tool calls without end (within the request's timeout) is
// cut once what is held passes the cap, as a sync body is (SPEC 14): a
// server_error, and nothing more held. Before, each kept growing.
func TestResponsesStreamHeldBounded(t *testing.T) {
	defer func(n int) { maxRespHeld = n }(maxRespHeld)
	maxRespHeld = 4 << 10
	rq := responsesReq(t, "req_text.json")
	chunk := strings.Repeat("x", 100)
	cases := []struct {
		name  string
		conv  func() converter
		event func(i int) (string, []byte)
	}{
		{"chat text", func() converter { return newChatToResponsesStream(rq, "m", 1, nil) }, func(int) (string, []byte) {
			return "", []byte(`{"id":"c","choices":[{"index":0,"delta":{"content":"` + chunk + `"}}]}`)
		}},
		{"chat arguments", func() converter { return newChatToResponsesStream(rq, "m", 1, nil) }, func(int) (string, []byte) {
			return "", []byte(`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"` + chunk + `"}}]}}]}`)
		}},
		{"chat tool calls", func() converter { return newChatToResponsesStream(rq, "m", 1, nil) }, func(i int) (string, []byte) {
			return "", []byte(fmt.Sprintf(`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"call_%d","function":{"name":"f","arguments":""}}]}}]}`, i, i))
		}},
		{"anthropic text", func() converter { return newAnthropicToResponsesStream(rq, "m", 1, nil) }, func(int) (string, []byte) {
			return "content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + chunk + `"}}`)
		}},
		{"anthropic tool calls", func() converter { return newAnthropicToResponsesStream(rq, "m", 1, nil) }, func(i int) (string, []byte) {
			return "content_block_start", []byte(fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_%d","name":"f","input":{}}}`, i, i))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.conv()
			var err error
			n := 0
			for ; n < 10_000 && err == nil; n++ {
				name, data := tc.event(n)
				_, _, err = c.event(name, data)
			}
			e := wantClass(t, err, routing.ClassServerError)
			if !strings.Contains(e.Message, "exceeds") {
				t.Fatalf("message %q", e.Message)
			}
			if n > 100 {
				t.Fatalf("cut after %d events; want within the cap (4 KiB) plus one event", n)
			}
		})
	}
	// under the cap a stream completes as before
	c := newChatToResponsesStream(rq, "m", 1, nil)
	if _, _, err := c.event("", []byte(`{"id":"c","choices":[{"index":0,"delta":{"content":"`+chunk+`"},"finish_reason":"stop"}]}`)); err != nil {
		t.Fatal(err)
	}
	if out, _, err := c.event("", []byte(`[DONE]`)); err != nil || !bytes.Contains(out, []byte("response.completed")) {
		t.Fatalf("%v %s", err, out)
	}
}
