package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/providers/bedrockfake"
	"switchyard/routing"
	"switchyard/wire"
)

// Golden fixtures of the Bedrock translations, one per format pair, under
// testdata/bedrock (run `go test -run Bedrock -update` to rewrite the
// expected files, and review the diff). The upstream shapes follow the
// Bedrock Runtime API reference and user guide:
//
//   - req_*.converse.golden.json: "Converse" (Request Syntax: messages,
//     system, inferenceConfig, toolConfig), "ContentBlock", "ImageBlock",
//     "ToolUseBlock", "ToolResultBlock", "ToolSpecification", "ToolChoice";
//     the tool is the top_song example of the user guide's "Call a tool with
//     the Converse API".
//   - resp_*.json: "Converse" (Response Syntax: output.message, stopReason,
//     usage, metrics) and "TokenUsage" (cacheReadInputTokens,
//     cacheWriteInputTokens beside inputTokens).
//   - stream_*.json, as frames: "ConverseStream" and
//     "ConverseStreamOutput" (messageStart, contentBlockStart,
//     contentBlockDelta, contentBlockStop, messageStop, metadata), with
//     "ContentBlockDelta" (text, toolUse.input as a JSON fragment,
//     reasoningContent) and "ConverseStreamMetadataEvent".

const bedrockDir = "bedrock"

func bedrockFixture(t *testing.T, name string) []byte {
	t.Helper()
	return readFixture(t, filepath.Join("..", bedrockDir, name))
}

func bedrockGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden(t, filepath.Join("..", bedrockDir, name), got)
}

// bedrockClientReq parses a client fixture (a Responses one from
// testdata/responses) with a fixed response id.
func bedrockClientReq(t *testing.T, body []byte, f wire.Format, stream bool) *Request {
	t.Helper()
	c, err := wire.Parse(body, catalog.OpChat, f)
	if err != nil {
		t.Fatal(err)
	}
	if c.Responses != nil {
		c.Responses.ID = "resp_test"
	}
	return &Request{Op: catalog.OpChat, Stream: stream, Client: c, WantUsage: true, PromptTokens: c.PromptTokens()}
}

func TestBedrockRequestGolden(t *testing.T) {
	cases := []struct {
		name   string
		body   []byte
		format wire.Format
	}{
		{"req_chat_tools", bedrockFixture(t, "req_chat_tools.json"), wire.FormatOpenAI},
		{"req_anthropic_tools", bedrockFixture(t, "req_anthropic_tools.json"), wire.FormatAnthropic},
		{"req_responses_tools", readFixture(t, "req_tools.json"), wire.FormatResponses},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cv, err := converseRequest(bedrockClientReq(t, tc.body, tc.format, false), "anthropic.claude-3-5-sonnet-20241022-v2:0")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(cv)
			bedrockGolden(t, tc.name+".converse.golden.json", b)
		})
	}
}

// TestBedrockRequestRefusals: what Converse cannot take is a 400 naming it.
func TestBedrockRequestRefusals(t *testing.T) {
	for _, tc := range []struct {
		body   string
		format wire.Format
		want   string
	}{
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, wire.FormatOpenAI, "not by URL"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`, wire.FormatOpenAI, "tiff"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}]}`, wire.FormatAnthropic, "document"},
	} {
		_, err := converseRequest(bedrockClientReq(t, []byte(tc.body), tc.format, false), "m")
		e := wantClass(t, err, routing.ClassBadRequest)
		if !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s: %q does not mention %q", tc.body, e.Message, tc.want)
		}
	}
}

func TestBedrockResponseGolden(t *testing.T) {
	formats := []struct {
		suffix string
		format wire.Format
		body   []byte
	}{
		{"openai", wire.FormatOpenAI, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)},
		{"anthropic", wire.FormatAnthropic, []byte(`{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)},
		{"responses", wire.FormatResponses, readFixture(t, "req_tools.json")},
	}
	usages := map[string]Usage{
		"resp_text":              {PromptTokens: 1225, CompletionTokens: 14, CachedTokens: 1000, CacheWriteTokens: 200},
		"resp_tools":             {PromptTokens: 375, CompletionTokens: 59},
		"resp_max":               {PromptTokens: 12, CompletionTokens: 1},
		"resp_guardrail_partial": {PromptTokens: 30},
	}
	for name, want := range usages {
		for _, f := range formats {
			t.Run(name+"/"+f.suffix, func(t *testing.T) {
				req := bedrockClientReq(t, f.body, f.format, false)
				var stored []byte
				req.ResponsesDone = func(b []byte, _ []wire.Item) { stored = b }
				out, u, err := converseToClient(bedrockFixture(t, name+".json"), req, "msg_bdrk_test", "claude-up", 1700000000)
				if err != nil {
					t.Fatal(err)
				}
				if u != want {
					t.Fatalf("usage %+v, want %+v", u, want)
				}
				if f.format == wire.FormatResponses {
					assertJSON(t, stored, string(out))
				}
				bedrockGolden(t, name+"."+f.suffix+".golden.json", out)
			})
		}
	}
}

// streamFixture encodes a stream fixture as event-stream frames with the
// SDK's encoder.
func streamFixture(t *testing.T, name string) []byte {
	t.Helper()
	var frames []struct {
		Type, Name string
		Payload    json.RawMessage
	}
	if err := json.Unmarshal(bedrockFixture(t, name), &frames); err != nil {
		t.Fatal(err)
	}
	var fs []bedrockfake.Frame
	for _, f := range frames {
		fs = append(fs, bedrockfake.Frame{Type: f.Type, Name: f.Name, Payload: string(f.Payload)})
	}
	return bedrockfake.Bytes(fs...)
}

// runFrames translates an event-stream body as bedrockStream does, frame
// by frame, returning the client bytes and the end error (nil at a clean
// end).
func runFrames(ev *bedrockEvents, body []byte) ([]byte, error) {
	r := newFrameReader(bytes.NewReader(body))
	var out []byte
	for {
		m, err := r.next()
		if err == io.EOF {
			b, err := ev.eof()
			return append(out, b...), err
		}
		if err != nil {
			return out, err
		}
		b, done, err := ev.frame(&m)
		out = append(out, b...)
		if err != nil || done {
			return out, err
		}
	}
}

func TestBedrockStreamGolden(t *testing.T) {
	formats := []struct {
		suffix string
		format wire.Format
		body   []byte
	}{
		{"openai", wire.FormatOpenAI, []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)},
		{"anthropic", wire.FormatAnthropic, []byte(`{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)},
		{"responses", wire.FormatResponses, readFixture(t, "req_tools.json")},
	}
	usages := map[string]Usage{
		"stream_text":       {PromptTokens: 1025, CompletionTokens: 14, CachedTokens: 1000},
		"stream_tools":      {PromptTokens: 375, CompletionTokens: 59},
		"stream_nometadata": {},
	}
	for name, want := range usages {
		body := streamFixture(t, name+".json")
		for _, f := range formats {
			t.Run(name+"/"+f.suffix, func(t *testing.T) {
				req := bedrockClientReq(t, f.body, f.format, true)
				ev := newBedrockEvents(req, "msg_bdrk_test", "claude-up", 1700000000)
				out, err := runFrames(ev, body)
				if err != nil {
					t.Fatal(err)
				}
				if u := ev.pivot.u; u != want {
					t.Fatalf("usage %+v, want %+v", u, want)
				}
				evs := parseSSE(t, out)
				last := evs[len(evs)-1]
				switch f.format {
				case wire.FormatOpenAI:
					if last.data != "[DONE]" {
						t.Fatalf("last event %+v", last)
					}
				case wire.FormatAnthropic:
					if last.name != "message_stop" {
						t.Fatalf("last event %+v", last)
					}
				case wire.FormatResponses:
					checkSequence(t, evs)
				}
				bedrockGolden(t, name+"."+f.suffix+".golden.sse", out)
			})
		}
	}
}

// TestBedrockFrameErrors: a malformed body ends the stream with a clean
// error of the right class, never a panic.
func TestBedrockFrameErrors(t *testing.T) {
	good := streamFixture(t, "stream_text.json")
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	huge := []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}
	inconsistent := []byte{0, 0, 0, 20, 0, 0, 0, 200, 0, 0, 0, 0}
	for _, tc := range []struct {
		name string
		body []byte
		want routing.Class
	}{
		{"bad crc", badCRC, routing.ClassServerError},
		{"truncated", good[:len(good)-7], routing.ClassNetwork},
		{"huge frame", huge, routing.ClassServerError},
		{"inconsistent lengths", inconsistent, routing.ClassServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := bedrockClientReq(t, []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`), wire.FormatOpenAI, true)
			s := &bedrockStream{ctx: t.Context(), body: io.NopCloser(bytes.NewReader(tc.body)), ev: newBedrockEvents(req, "id", "m", 1), r: newFrameReader(bytes.NewReader(tc.body))}
			_, err := drain(t, s)
			var e *Error
			if !errors.As(err, &e) || e.Class != tc.want {
				t.Fatalf("err %v, want class %s", err, tc.want)
			}
		})
	}
}
