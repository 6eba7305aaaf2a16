package cache

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anssestream "github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/openai/openai-go/v3"
	oassestream "github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"switchyard/catalog"
	"switchyard/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var t0 = time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)

// entries are the answers every format and mode must replay.
var entries = map[string]*Entry{
	"text": {Text: "Hello, \"world\".\nBye <3", Finish: "stop", Usage: Usage{PromptTokens: 12, CompletionTokens: 7, CachedTokens: 4},
		Model: "gpt-x", Deployment: "dep-1", StoredAt: t0},
	"tools": {Text: "Let me check.", ToolCalls: []ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		{ID: "call_2", Name: "get_time", Arguments: `{"tz":"CET"}`}}, Finish: "tool_calls",
		Usage: Usage{PromptTokens: 30, CompletionTokens: 20}, Model: "gpt-x", Deployment: "dep-1", StoredAt: t0},
	"length": {Text: "cut", Finish: "length", Usage: Usage{PromptTokens: 3, CompletionTokens: 1}, Model: "claude-x", Deployment: "dep-2", Tier: "hard", StoredAt: t0},
}

var formats = []struct {
	name   string
	format wire.Format
}{{"openai", wire.FormatOpenAI}, {"anthropic", wire.FormatAnthropic}, {"responses", wire.FormatResponses}}

// clientReq is a parsed client request of format, as the gateway has it.
func clientReq(t testing.TB, f wire.Format, stream bool) *wire.Request {
	t.Helper()
	var body string
	switch f {
	case wire.FormatOpenAI:
		body = `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`
	case wire.FormatAnthropic:
		body = `{"model":"gpt-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	case wire.FormatResponses:
		body = `{"model":"gpt-x","input":"hi"}`
	}
	r, err := wire.Parse([]byte(body), catalog.OpChat, f)
	if err != nil {
		t.Fatal(err)
	}
	r.Stream = stream
	if r.Responses != nil {
		r.Responses.ID = "resp_0123abcd"
	}
	return r
}

func target(t testing.TB, f wire.Format, stream bool) Target {
	return Target{Format: f, Stream: stream, IncludeUsage: true, Client: clientReq(t, f, stream), Now: t0.Add(time.Hour)}
}

var idRe = regexp.MustCompile(`(chatcmpl-|msg_)[0-9a-f]{24}`)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = idRe.ReplaceAll(got, []byte("${1}ID"))
	path := filepath.Join("testdata", "replay", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cache -run Replay -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// sdkAnswer is what an official SDK read from a replay.
type sdkAnswer struct {
	text   string
	calls  []ToolCall
	finish string
	prompt int
	output int
}

func sseResponse(b []byte) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(b))}
}

// readWithSDK parses a replay with the official SDK of its format.
func readWithSDK(t *testing.T, f wire.Format, stream bool, out []byte) sdkAnswer {
	t.Helper()
	var a sdkAnswer
	switch {
	case f == wire.FormatOpenAI && !stream:
		var cc openai.ChatCompletion
		if err := json.Unmarshal(out, &cc); err != nil {
			t.Fatal(err)
		}
		return openAISDK(t, cc)
	case f == wire.FormatOpenAI:
		st := oassestream.NewStream[openai.ChatCompletionChunk](oassestream.NewDecoder(sseResponse(out)), nil)
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		return openAISDK(t, acc.ChatCompletion)
	case f == wire.FormatAnthropic && !stream:
		var m anthropic.Message
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		return anthropicSDK(m)
	case f == wire.FormatAnthropic:
		st := anssestream.NewStream[anthropic.MessageStreamEventUnion](anssestream.NewDecoder(sseResponse(out)), nil)
		var m anthropic.Message
		for st.Next() {
			if err := m.Accumulate(st.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		return anthropicSDK(m)
	case f == wire.FormatResponses && !stream:
		var r responses.Response
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		return responsesSDK(r)
	default:
		st := oassestream.NewStream[responses.ResponseStreamEventUnion](oassestream.NewDecoder(sseResponse(out)), nil)
		var final *responses.Response
		var text strings.Builder
		seq := int64(-1)
		for st.Next() {
			ev := st.Current()
			if ev.SequenceNumber != seq+1 {
				t.Fatalf("sequence_number %d after %d", ev.SequenceNumber, seq)
			}
			seq = ev.SequenceNumber
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed", "response.incomplete":
				r := ev.Response
				final = &r
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if final == nil {
			t.Fatal("no terminal event")
		}
		a = responsesSDK(*final)
		if text.String() != a.text {
			t.Fatalf("deltas %q, final %q", text.String(), a.text)
		}
		return a
	}
}

func openAISDK(t *testing.T, cc openai.ChatCompletion) sdkAnswer {
	if len(cc.Choices) != 1 {
		t.Fatalf("%d choices", len(cc.Choices))
	}
	if !strings.HasPrefix(cc.ID, "chatcmpl-") || cc.Created != t0.Add(time.Hour).Unix() {
		t.Fatalf("id %q created %d", cc.ID, cc.Created)
	}
	c := cc.Choices[0]
	a := sdkAnswer{text: c.Message.Content, finish: c.FinishReason, prompt: int(cc.Usage.PromptTokens), output: int(cc.Usage.CompletionTokens)}
	for _, tc := range c.Message.ToolCalls {
		a.calls = append(a.calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return a
}

func anthropicSDK(m anthropic.Message) sdkAnswer {
	// Anthropic's input_tokens leaves out the cache reads and writes (SPEC 10.2)
	a := sdkAnswer{prompt: int(m.Usage.InputTokens + m.Usage.CacheReadInputTokens + m.Usage.CacheCreationInputTokens), output: int(m.Usage.OutputTokens)}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			a.text += b.Text
		case "tool_use":
			a.calls = append(a.calls, ToolCall{ID: b.ID, Name: b.Name, Arguments: compactJSON(b.Input)})
		}
	}
	a.finish = finishOfStop(string(m.StopReason))
	return a
}

func responsesSDK(r responses.Response) sdkAnswer {
	a := sdkAnswer{prompt: int(r.Usage.InputTokens), output: int(r.Usage.OutputTokens), finish: "stop"}
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				a.text += c.Text
			}
		case "function_call":
			a.calls = append(a.calls, ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments.OfString})
			a.finish = "tool_calls"
		}
	}
	if r.Status == "incomplete" {
		a.finish = "length"
	}
	return a
}

func checkAnswer(t *testing.T, e *Entry, a sdkAnswer) {
	t.Helper()
	want := sdkAnswer{text: e.Text, calls: e.ToolCalls, finish: e.Finish, prompt: e.Usage.PromptTokens, output: e.Usage.CompletionTokens}
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Fatalf("the SDK read\n%+v\nwant\n%+v", a, want)
	}
}

// TestReplayGolden renders each entry in every format and mode, compares
// with the golden file and has the official SDK parse it.
func TestReplayGolden(t *testing.T) {
	for name, e := range entries {
		for _, f := range formats {
			for _, stream := range []bool{false, true} {
				mode := map[bool]string{false: "sync", true: "stream"}[stream]
				t.Run(name+"/"+f.name+"/"+mode, func(t *testing.T) {
					out, err := Render(e, target(t, f.format, stream))
					if err != nil {
						t.Fatal(err)
					}
					golden(t, fmt.Sprintf("%s-%s-%s.txt", name, f.name, mode), out)
					checkAnswer(t, e, readWithSDK(t, f.format, stream, out))
				})
			}
		}
	}
}

// TestReplayFreshIDs: two hits of one entry get different ids.
func TestReplayFreshIDs(t *testing.T) {
	e := entries["text"]
	a, _ := Render(e, target(t, wire.FormatOpenAI, false))
	b, _ := Render(e, target(t, wire.FormatOpenAI, false))
	ida := idRe.Find(a)
	if ida == nil || bytes.Equal(ida, idRe.Find(b)) {
		t.Fatalf("ids %s and %s", ida, idRe.Find(b))
	}
}

// TestReplayUsageChunk: an OpenAI stream client gets the usage chunk only
// when it asked for it, and the stream ends with [DONE] either way.
func TestReplayUsageChunk(t *testing.T) {
	e := entries["text"]
	for _, want := range []bool{false, true} {
		tg := target(t, wire.FormatOpenAI, true)
		tg.IncludeUsage = want
		out, err := Render(e, tg)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(out, []byte(`"usage":`)); got != want {
			t.Fatalf("include_usage %v: usage chunk present %v\n%s", want, got, out)
		}
		if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
			t.Fatalf("no [DONE] at the end:\n%s", out)
		}
	}
}

// TestRoundTrip stores an answer from every format and mode (rendered, then
// read back as the gateway would read an upstream answer) and replays it in
// every other format and mode, each read by the SDK.
func TestRoundTrip(t *testing.T) {
	for name, e := range entries {
		for _, from := range formats {
			for _, fromStream := range []bool{false, true} {
				out, err := Render(e, target(t, from.format, fromStream))
				if err != nil {
					t.Fatal(err)
				}
				meta := Meta{Tier: e.Tier, Model: e.Model, Deployment: e.Deployment, Now: t0}
				var stored *Entry
				if fromStream {
					acc := NewAccumulator(from.format, 1<<20)
					acc.Add(out, nil)
					stored, err = acc.Entry(meta, Usage{})
				} else {
					stored, err = FromBody(catalog.OpChat, from.format, out, meta)
				}
				if err != nil {
					t.Fatalf("%s from %s stream=%v: %v", name, from.name, fromStream, err)
				}
				dec, err := Decode(stored.Encode(nil))
				if err != nil {
					t.Fatal(err)
				}
				for _, to := range formats {
					for _, toStream := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/%s-%v/%s-%v", name, from.name, fromStream, to.name, toStream), func(t *testing.T) {
							got, err := Render(dec, target(t, to.format, toStream))
							if err != nil {
								t.Fatal(err)
							}
							a := readWithSDK(t, to.format, toStream, got)
							want := *e
							if from.format != wire.FormatOpenAI || fromStream {
								want.Usage.CachedTokens = 0 // the other formats' renderings do not show cached tokens
							}
							checkAnswer(t, &want, a)
						})
					}
				}
			}
		}
	}
}

func TestReplayEmbeddings(t *testing.T) {
	e := &Entry{Embeddings: true, Vectors: [][]float64{{0.25, -1.5, 3}, {0.125, 0, -0.5}}, Usage: Usage{PromptTokens: 5}, Model: "emb", StoredAt: t0}
	for _, enc := range []string{"", "base64"} {
		out, err := Render(e, Target{Format: wire.FormatOpenAI, EncodingFormat: enc, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "embeddings-"+map[string]string{"": "float", "base64": "base64"}[enc]+".json", out)
		back, err := FromBody(catalog.OpEmbeddings, wire.FormatOpenAI, out, Meta{Model: "emb", Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(back.Vectors) != fmt.Sprint(e.Vectors) || back.Usage != e.Usage {
			t.Fatalf("%s: read back %v %v", enc, back.Vectors, back.Usage)
		}
		var r openai.CreateEmbeddingResponse
		if err := json.Unmarshal(out, &r); err != nil || len(r.Data) != 2 || r.Usage.PromptTokens != 5 {
			t.Fatalf("SDK: %v %+v", err, r)
		}
	}
	if _, err := Render(e, Target{Format: wire.FormatOpenAI, Stream: true}); err == nil {
		t.Fatal("embeddings streamed")
	}
}
