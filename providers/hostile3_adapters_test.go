package providers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"switchyard/routing"
	"switchyard/wire"
)

// TestHostile3OpenAIStreamCleanEndBeforeFinish: an OpenAI-compatible
// stream whose body ends cleanly (a proxy closing an HTTP/1.1 body, the
// last chunk of a chunked body, an HTTP/2 END_STREAM) before any choice
// carried a finish_reason was cut in the middle of the answer: the client
// must get the error event (SPEC 7.1), not a [DONE] that presents the
// half answer as complete. Every documented stream ends with a chunk whose
// finish_reason is set (stop, length, tool_calls, content_filter), then
// [DONE]; a server that omits only [DONE] after that chunk still completes.
func TestHostile3OpenAIStreamCleanEndBeforeFinish(t *testing.T) {
	role := "data: " + chunkHead + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	text := "data: " + chunkHead + `[{"index":0,"delta":{"content":"The answer is"},"finish_reason":null}]}` + "\n\n"
	tool := "data: " + chunkHead + `[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":null}]}` + "\n\n"
	finish := "data: " + chunkHead + `[{"index":0,"delta":{},"finish_reason": "length"}]}` + "\n\n"
	for _, tc := range []struct {
		name   string
		events []string
		cut    bool
	}{
		{"cut after text", []string{role, text}, true},
		{"cut inside a tool call's arguments", []string{role, tool}, true},
		{"finish chunk then clean end", []string{role, text, finish}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sseServer(t, tc.events, nil, nil)
			defer srv.Close()
			p := openAIProvider(srv.URL, nil)
			req := chatReq(t, `{"model":"public","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
			resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Stream.Close()
			all, err := drain(t, resp.Stream)
			if tc.cut {
				wantClass(t, err, routing.ClassNetwork)
				if strings.Contains(string(all), "[DONE]") {
					t.Fatalf("a cut stream was completed with [DONE]:\n%s", all)
				}
				return
			}
			if err != nil || !strings.HasSuffix(string(all), "data: [DONE]\n\n") {
				t.Fatalf("%v %q", err, all)
			}
		})
	}
}

// TestHostile3RetryAfterHuge: SPEC 6 uses an upstream's Retry-After when
// it is longer than the cooldown, capped at cooldown_max. A Retry-After
// beyond what a time.Duration holds must still read as "very long", never
// wrap around to a negative duration that routing ignores (the deployment
// would then come back after cooldown_base instead of cooldown_max), and
// what is not a delay at all (NaN) is absent.
func TestHostile3RetryAfterHuge(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header, value string
		long          bool // want a positive wait of at least a day
	}{
		{"Retry-After", "99999999999", true},
		{"Retry-After", "1e300", true},
		{"Retry-After", "Inf", true},
		{"Retry-After-Ms", "1e30", true},
		{"Retry-After", "NaN", false},
		{"Retry-After-Ms", "NaN", false},
		{"Retry-After", "-Inf", false},
	} {
		h := http.Header{}
		h.Set(tc.header, tc.value)
		got := parseRetryAfter(h, now)
		if tc.long && got < 24*time.Hour {
			t.Errorf("%s: %s read as %v, want a wait of at least a day", tc.header, tc.value, got)
		}
		if !tc.long && got != 0 {
			t.Errorf("%s: %s read as %v, want 0", tc.header, tc.value, got)
		}
	}
	// and through the adapter, on a real 429
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "99999999999")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	}))
	defer srv.Close()
	p := openAIProvider(srv.URL, nil)
	_, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), chatReq(t, `{"model":"public","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
	if e := wantClass(t, err, routing.ClassRateLimited); e.RetryAfter < 24*time.Hour {
		t.Fatalf("RetryAfter %v", e.RetryAfter)
	}
}

// feedAnthropicToOpenAI runs Anthropic events through the OpenAI-client
// converter and returns, per OpenAI tool_calls index, the arguments a
// client accumulates, and the finish reason.
func feedAnthropicToOpenAI(t *testing.T, evs []sseEvent) (map[int]string, string) {
	t.Helper()
	c := newAnthropicToOpenAIStream("claude", 1, false)
	var out []byte
	for _, ev := range evs {
		b, _, err := c.event(ev.name, []byte(ev.data))
		if err != nil {
			t.Fatalf("%s: %v", ev.name, err)
		}
		out = append(out, b...)
	}
	args := map[int]string{}
	finish := ""
	for _, ev := range parseSSE(t, out) {
		if ev.data == "[DONE]" {
			continue
		}
		var ch oaChunk
		if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				args[*tc.Index] += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	return args, finish
}

// TestHostile3AnthropicStreamToolWithoutInput: a tool whose input is empty
// streams as content_block_start (input {}), an input_json_delta with
// partial_json "" and content_block_stop (the Messages streaming
// reference). An OpenAI client accumulates function.arguments from the
// deltas and parses it as JSON, so the call must read "{}" (as the sync
// translation gives through jsonObjectOr), not "", which is no JSON;
// a call that streamed its arguments gets nothing added, also when two
// calls run in parallel.
func TestHostile3AnthropicStreamToolWithoutInput(t *testing.T) {
	start := sseEvent{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`}
	end := []sseEvent{
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
	noInput := func(i int, id string) []sseEvent {
		n := string(rune('0' + i))
		return []sseEvent{
			{"content_block_start", `{"type":"content_block_start","index":` + n + `,"content_block":{"type":"tool_use","id":"` + id + `","name":"get_time","input":{}}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":` + n + `,"delta":{"type":"input_json_delta","partial_json":""}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":` + n + `}`},
		}
	}
	withInput := func(i int, id string) []sseEvent {
		n := string(rune('0' + i))
		return []sseEvent{
			{"content_block_start", `{"type":"content_block_start","index":` + n + `,"content_block":{"type":"tool_use","id":"` + id + `","name":"get_weather","input":{}}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":` + n + `,"delta":{"type":"input_json_delta","partial_json":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":` + n + `,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":` + n + `,"delta":{"type":"input_json_delta","partial_json":" \"Paris\"}"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":` + n + `}`},
		}
	}
	text := []sseEvent{
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking."}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
	}
	cat := func(parts ...[]sseEvent) []sseEvent {
		out := []sseEvent{start}
		for _, p := range parts {
			out = append(out, p...)
		}
		return append(out, end...)
	}
	for _, tc := range []struct {
		name string
		evs  []sseEvent
		want map[int]string
	}{
		{"one call without input", cat(noInput(0, "toolu_a")), map[int]string{0: "{}"}},
		{"text then a call without input", cat(text, noInput(1, "toolu_a")), map[int]string{0: "{}"}},
		{"parallel: without, then with input", cat(noInput(0, "toolu_a"), withInput(1, "toolu_b")), map[int]string{0: "{}", 1: `{"city": "Paris"}`}},
		{"parallel: with, then without input", cat(withInput(0, "toolu_a"), noInput(1, "toolu_b")), map[int]string{0: `{"city": "Paris"}`, 1: "{}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, finish := feedAnthropicToOpenAI(t, tc.evs)
			if finish != "tool_calls" {
				t.Fatalf("finish %q", finish)
			}
			if len(args) != len(tc.want) {
				t.Fatalf("calls %v, want %v", args, tc.want)
			}
			for i, w := range tc.want {
				if args[i] != w {
					t.Fatalf("call %d arguments %q, want %q", i, args[i], w)
				}
				if !json.Valid([]byte(args[i])) {
					t.Fatalf("call %d arguments %q are not JSON", i, args[i])
				}
			}
		})
	}
}

// TestHostile3OpenAIStreamRefusalStopReason: an OpenAI model that refuses
// streams the refusal in delta.refusal and ends with finish_reason "stop"
// (Chat Completions streaming reference). The sync translation presents
// that answer to an Anthropic client with stop_reason "refusal"; the
// stream must end the same way, not with end_turn.
func TestHostile3OpenAIStreamRefusalStopReason(t *testing.T) {
	syncBody := `{"id":"chatcmpl-r","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}`
	out, err := openAIToAnthropicResponse([]byte(syncBody))
	if err != nil {
		t.Fatal(err)
	}
	var msg anResponse
	if err := json.Unmarshal(out, &msg); err != nil || msg.StopReason == nil {
		t.Fatalf("%s %v", out, err)
	}
	syncStop := *msg.StopReason

	head := `{"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":`
	for _, tc := range []struct {
		name   string
		chunks []string
		want   string
	}{
		{"refusal", []string{
			head + `[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"finish_reason":null}]}`,
			head + `[{"index":0,"delta":{"refusal":"I can't "},"finish_reason":null}]}`,
			head + `[{"index":0,"delta":{"refusal":"help with that."},"finish_reason":null}]}`,
			head + `[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			head + `[],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}`,
			"[DONE]",
		}, syncStop},
		{"ordinary text keeps end_turn", []string{
			head + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			head + `[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`,
			head + `[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			"[DONE]",
		}, "end_turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newOpenAIToAnthropicStream("gpt-x", 5)
			var all []byte
			for _, ch := range tc.chunks {
				b, _, err := c.event("", []byte(ch))
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, b...)
			}
			stop := ""
			for _, ev := range parseSSE(t, all) {
				if ev.name == "message_delta" {
					var d anMessageDelta
					if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
						t.Fatal(err)
					}
					stop = d.Delta.StopReason
				}
			}
			if stop != tc.want {
				t.Fatalf("stream stop_reason %q, want %q (sync gives %q)\n%s", stop, tc.want, syncStop, all)
			}
		})
	}
	if syncStop != "refusal" {
		t.Fatalf("sync stop_reason %q", syncStop)
	}
}

// TestHostile3AnthropicUsageHostileCounts: SPEC 14 takes an upstream count
// over 100 million as 100 million. Anthropic's input_tokens excludes the
// cache reads and writes (SPEC 10.2), so the prompt is their sum: counts
// that fit an int one by one must not wrap that sum around to a negative
// number (clamped to 0: the request charged nothing), and a count written
// as any JSON number (exponent, fraction, beyond int64) is believed up to
// the cap instead of losing the usage or failing the answer.
func TestHostile3AnthropicUsageHostileCounts(t *testing.T) {
	const max = MaxUsageTokens
	for _, tc := range []struct {
		usage string
		want  Usage // after Clamped
	}{
		{`{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"output_tokens":3}`, Usage{max, 3, max, 0, 0}},
		{`{"input_tokens":4611686018427387904,"cache_creation_input_tokens":4611686018427387904,"cache_read_input_tokens":4611686018427387904,"output_tokens":1}`, Usage{max, 1, max, max, 0}},
		{`{"input_tokens":10,"output_tokens":99999999999999999999}`, Usage{10, max, 0, 0, 0}},
		{`{"input_tokens":1e3,"cache_read_input_tokens":2.0,"output_tokens":7}`, Usage{1002, 7, 2, 0, 0}},
		{`{"input_tokens":-5,"output_tokens":7}`, Usage{0, 7, 0, 0, 0}},
	} {
		body := `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":` + tc.usage + `}`
		// an Anthropic client: the usage read from the passed-through body
		if got, _ := anthropicUsageOf([]byte(body)).Clamped(); got != tc.want {
			t.Errorf("anthropicUsageOf %s: %+v, want %+v", tc.usage, got, tc.want)
		}
		// an OpenAI client: the answer is translated, not failed
		_, u, err := anthropicToOpenAIResponse([]byte(body), 1)
		if err != nil {
			t.Errorf("anthropicToOpenAIResponse %s: %v", tc.usage, err)
			continue
		}
		if got, _ := u.Clamped(); got != tc.want {
			t.Errorf("anthropicToOpenAIResponse %s: %+v, want %+v", tc.usage, got, tc.want)
		}
	}
	// and in a stream: message_delta's cumulative counts
	c := &anthropicRelay{}
	for _, ev := range []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"output_tokens":1}}}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2e9}}`},
		{"message_stop", `{"type":"message_stop"}`},
	} {
		if _, _, err := c.event(ev.name, []byte(ev.data)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := c.usage().Clamped(); got != (Usage{max, max, max, 0, 0}) {
		t.Errorf("stream usage %+v", got)
	}
}

// TestHostile3OpenAIUsageOddNumbersAnthropicClient: an OpenAI-compatible
// upstream whose usage counts are JSON numbers the usage scanner does not
// take as integers (1e2, 9.0, beyond int64) serves an OpenAI client its
// answer (usage unknown, charged by estimate: SPEC 14). The same answer to
// an Anthropic client, sync or streamed, must be served too, not failed
// as malformed JSON at its usage, after the upstream charged for it.
func TestHostile3OpenAIUsageOddNumbersAnthropicClient(t *testing.T) {
	for _, usage := range []string{
		`{"prompt_tokens":1e2,"completion_tokens":2,"total_tokens":3}`,
		`{"prompt_tokens":9.0,"completion_tokens":2,"total_tokens":3}`,
		`{"prompt_tokens":5,"completion_tokens":99999999999999999999,"total_tokens":3}`,
	} {
		body := `{"id":"chatcmpl-u","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":` + usage + `}`
		out, err := openAIToAnthropicResponse([]byte(body))
		if err != nil {
			t.Errorf("sync, usage %s: %v", usage, err)
		} else if !strings.Contains(string(out), `"text":"Hello"`) {
			t.Errorf("sync, usage %s: %s", usage, out)
		}

		c := newOpenAIToAnthropicStream("gpt-x", 5)
		head := `{"id":"chatcmpl-u","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":`
		var all []byte
		var serr error
		for _, ch := range []string{
			head + `[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
			head + `[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			head + `[],"usage":` + usage + `}`,
			"[DONE]",
		} {
			b, _, err := c.event("", []byte(ch))
			if err != nil {
				serr = err
				break
			}
			all = append(all, b...)
		}
		if serr != nil || !strings.Contains(string(all), "message_stop") {
			t.Errorf("stream, usage %s: %v\n%s", usage, serr, all)
		}
	}
}
