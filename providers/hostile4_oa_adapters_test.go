package providers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/routing"
	"switchyard/wire"
)

// TestHostile4OAForcedToolStopReason: OpenAI answers a request whose
// tool_choice forces a function with finish_reason "stop", not
// "tool_calls" (OpenAI function-calling guide, "tool_choice": with a forced
// function the finish reason is stop; vLLM does the same for a named
// tool_choice, vllm-project/vllm#49496). The Anthropic Messages API ends
// every turn that calls a tool with stop_reason "tool_use", and the
// Anthropic SDKs' tool loops (and agents such as Claude Code) run tools
// only on that stop reason: an Anthropic-format client of an OpenAI
// deployment forcing a tool got "end_turn" beside its tool_use block and
// never ran the tool. A turn with tool calls that ended normally is a
// tool_use turn, sync and streaming, as the Gemini translation already
// treats STOP with function calls (SPEC 10).
func TestHostile4OAForcedToolStopReason(t *testing.T) {
	for _, tc := range []struct {
		name, finish, want string
	}{
		{"forced function, finish stop", `"stop"`, "tool_use"},
		{"no finish reason at all", `null`, "tool_use"},
		{"tool_calls", `"tool_calls"`, "tool_use"},
		{"cut by length stays max_tokens", `"length"`, "max_tokens"},
	} {
		t.Run("sync "+tc.name, func(t *testing.T) {
			body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-up","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":` + tc.finish + `}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`
			out, err := openAIToAnthropicResponse([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			var msg struct {
				StopReason string `json:"stop_reason"`
			}
			if err := json.Unmarshal(out, &msg); err != nil {
				t.Fatal(err)
			}
			if msg.StopReason != tc.want {
				t.Fatalf("stop_reason %q, want %q: %s", msg.StopReason, tc.want, out)
			}
		})
		t.Run("stream "+tc.name, func(t *testing.T) {
			c := newOpenAIToAnthropicStream("m", 3)
			var all []byte
			for _, ch := range []string{
				chunkHead + `[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
				chunkHead + `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}`,
				chunkHead + `[{"index":0,"delta":{},"finish_reason":` + tc.finish + `}]}`,
				"[DONE]",
			} {
				out, _, err := c.event("", []byte(ch))
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, out...)
			}
			var stop string
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
				t.Fatalf("stop_reason %q, want %q:\n%s", stop, tc.want, all)
			}
		})
	}
}

// TestHostile4OAStreamErrorNull: an OpenAI-compatible server may write
// "error": null in every chunk (Foundry Local does,
// microsoft/foundry-local#273); null is no error. The relay took the
// member's presence for a mid-stream error event and ended every stream
// of such a deployment at its first chunk (server_error: fail over, and
// the deployment cooled down for serving normally). An error object or
// string is still an error.
func TestHostile4OAStreamErrorNull(t *testing.T) {
	head := `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-up","error":null,"choices":`
	events := []string{
		"data: " + head + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n",
		"data: " + head + `[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n",
		"data: " + head + `[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
		"data: [DONE]\n\n",
	}
	for _, f := range []struct {
		name   string
		format wire.Format
		body   string
		want   string
	}{
		{"openai client", wire.FormatOpenAI, `{"model":"public","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, `"content":"Hi"`},
		{"anthropic client", wire.FormatAnthropic, `{"model":"public","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`, `"text":"Hi"`},
		{"responses client", wire.FormatResponses, `{"model":"public","stream":true,"input":"Hi"}`, `"delta":"Hi"`},
	} {
		t.Run(f.name, func(t *testing.T) {
			srv := sseServer(t, events, nil, nil)
			defer srv.Close()
			p := openAIProvider(srv.URL, nil)
			resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), chatReq(t, f.body, f.format))
			if err != nil {
				t.Fatalf("a chunk with \"error\":null failed the attempt: %v", err)
			}
			defer resp.Stream.Close()
			all, err := drain(t, resp.Stream)
			if err != nil {
				t.Fatalf("%v after %s", err, all)
			}
			if !strings.Contains(string(all), f.want) {
				t.Fatalf("answer not relayed:\n%s", all)
			}
		})
	}
	// an error object or string is still an error
	for _, data := range []string{`{"error":{"message":"boom","code":502}}`, `{"error":"boom"}`} {
		if _, _, err := (&openAIRelay{}).event("", []byte(data)); err == nil {
			t.Fatalf("%s relayed as a chunk", data)
		}
		if _, _, err := newOpenAIToAnthropicStream("m", 1).event("", []byte(data)); err == nil {
			t.Fatalf("%s translated as a chunk", data)
		}
	}
}

// TestHostile4OASyncErrorIn200: OpenRouter, an OpenAI-compatible API SPEC
// 10 names, answers HTTP 200 with {"error":{"code","message"}} when the
// model fails after the request was accepted ("Otherwise, the returned
// HTTP response status will be 200 and any error occurred while the LLM is
// producing the output will be emitted in the response body",
// openrouter.ai/docs/api-reference/errors). The adapter took that body for
// an answer: an OpenAI-format client got a 200 whose body is an error (and
// the response cache may keep it), an Anthropic-format client an empty
// message ending "end_turn", and no other deployment was tried. It is a
// failed attempt (server_error, so the gateway fails over), for every
// client format and operation; the upstream text it carries goes through
// the scrubber like any upstream error (SPEC 15). "error": null is no
// error.
func TestHostile4OASyncErrorIn200(t *testing.T) {
	errBody := `{"error":{"code":502,"message":"Provider returned error from 10.0.0.7:8443","metadata":{"provider_name":"X"}},"user_id":"u1"}`
	okNull := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-up","error":null,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	serve := func(body string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
	}
	for _, tc := range []struct {
		name   string
		format wire.Format
		body   string
	}{
		{"openai client", wire.FormatOpenAI, `{"model":"public","messages":[{"role":"user","content":"Hi"}]}`},
		{"anthropic client", wire.FormatAnthropic, `{"model":"public","max_tokens":9,"messages":[{"role":"user","content":"Hi"}]}`},
		{"responses client", wire.FormatResponses, `{"model":"public","input":"Hi"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(errBody)
			defer srv.Close()
			p := openAIProvider(srv.URL, nil)
			resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), chatReq(t, tc.body, tc.format))
			if err == nil {
				t.Fatalf("a 200 carrying an error was served as an answer: %s", resp.Body)
			}
			e := wantClass(t, err, routing.ClassServerError)
			if strings.Contains(e.Message, "10.0.0.7") {
				t.Fatalf("upstream address relayed: %q", e.Message)
			}
			if !strings.Contains(e.Message, "Provider returned error") {
				t.Fatalf("message %q", e.Message)
			}
		})
	}
	t.Run("embeddings", func(t *testing.T) {
		srv := serve(errBody)
		defer srv.Close()
		p := openAIProvider(srv.URL, nil)
		c := parse(t, `{"model":"public","input":"hi"}`, catalog.OpEmbeddings, wire.FormatOpenAI)
		_, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), &Request{Op: c.Op, Client: c})
		wantClass(t, err, routing.ClassServerError)
	})
	t.Run("error null is an answer", func(t *testing.T) {
		srv := serve(okNull)
		defer srv.Close()
		p := openAIProvider(srv.URL, nil)
		resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), chatReq(t, `{"model":"public","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
		if err != nil || resp.Usage.PromptTokens != 3 {
			t.Fatalf("%v %+v", err, resp)
		}
	})
}

// TestHostile4OASyncBodyNotJSON: a 2xx whose body is no JSON object (a
// base_url that reaches a web page or a health endpoint answering 200 to
// any POST, an empty body, a close-delimited body cut short) was relayed
// to an OpenAI-format or Anthropic-format client as its answer: a 200 the
// official SDKs fail to parse, counted a success for routing (the broken
// deployment looks healthy and keeps its traffic) and offered to the
// response cache. The translating paths already refuse it as malformed
// (upstreamGarbage); the pass-through paths must too: a server_error the
// gateway fails over from (SPEC 14: upstream bodies are bounded and checked).
func TestHostile4OASyncBodyNotJSON(t *testing.T) {
	for _, body := range []string{
		"",
		"<html><body>OK</body></html>",
		`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hel`,
	} {
		for _, tc := range []struct {
			name   string
			kind   func(string) *catalog.Provider
			format wire.Format
			req    string
		}{
			{"openai", func(u string) *catalog.Provider { return openAIProvider(u, nil) }, wire.FormatOpenAI, `{"model":"public","messages":[{"role":"user","content":"Hi"}]}`},
			{"anthropic", anthropicProvider, wire.FormatAnthropic, `{"model":"public","max_tokens":9,"messages":[{"role":"user","content":"Hi"}]}`},
		} {
			t.Run(tc.name+" "+wire.Truncate(body, 12), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Connection", "close") // close-delimited: a short body ends cleanly
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusOK)
					io.WriteString(w, body)
				}))
				defer srv.Close()
				p := tc.kind(srv.URL)
				resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), chatReq(t, tc.req, tc.format))
				if err == nil {
					t.Fatalf("a 200 whose body is no JSON object was served as the answer: %q", resp.Body)
				}
				if e := wantClass(t, err, routing.ClassServerError); e.Status >= 200 && e.Status < 300 {
					t.Fatalf("a failed attempt carries status %d: the client would get it", e.Status)
				}
			})
		}
	}
}

// TestHostile4OAImagesStream: the Images API streams partial images when
// the body says "stream": true (gpt-image models: image_generation.
// partial_image events, then image_generation.completed carrying the
// usage; OpenAI image generation guide, "Streaming"). The adapter streams
// chat only: it forwarded the flag, read the event stream as a sync body
// (up to 64 MiB held), relayed it as the JSON answer no SDK parses and
// found no usage in it, so the image was never charged to the team (a way
// around its spend limits); now that such a body is refused as not JSON,
// every deployment would generate and bill an image that is thrown away.
// The attempt is refused before any upstream call, as a bad request.
func TestHostile4OAImagesStream(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: image_generation.completed\ndata: {\"type\":\"image_generation.completed\",\"b64_json\":\"AAAA\",\"usage\":{\"input_tokens\":50,\"output_tokens\":4000,\"total_tokens\":4050}}\n\n")
	}))
	defer srv.Close()
	p := openAIProvider(srv.URL, nil)
	c := parse(t, `{"model":"public","prompt":"an otter","stream":true,"partial_images":2}`, catalog.OpImages, wire.FormatOpenAI)
	resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), &Request{Op: catalog.OpImages, Stream: c.Stream, Client: c})
	if err == nil {
		t.Fatalf("an image stream was served as a sync answer with usage %+v: %q", resp.Usage, resp.Body)
	}
	wantClass(t, err, routing.ClassBadRequest)
	if calls != 0 {
		t.Fatalf("the upstream was called %d times for a request the adapter cannot serve", calls)
	}
}

// TestHostile4OAStreamCutMidLine: a body that ends cleanly in the middle
// of a data: line (a close-delimited HTTP/1.x body, a proxy that ends the
// chunked body when its upstream drops) was dispatched as a last event
// anyway (the SSE standard discards an event the end of the stream cuts
// short): the pass-through relayed the half chunk, whose JSON no SDK
// parses, and when the cut fell after the finish_reason it also wrote
// [DONE], so the gateway recorded a complete answer (SPEC 7.1: a cut
// stream ends with the error event). A last line that lacks only its
// line ending but holds a whole value is still dispatched.
func TestHostile4OAStreamCutMidLine(t *testing.T) {
	role := "data: " + chunkHead + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	text := "data: " + chunkHead + `[{"index":0,"delta":{"content":"The answer is"},"finish_reason":null}]}` + "\n\n"
	whole := chunkHead + `[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		name string
		last string
		cut  bool
	}{
		{"cut after finish_reason", "data: " + whole[:len(whole)-5], true},
		{"cut inside the text", "data: " + chunkHead + `[{"index":0,"delta":{"content":"42, bec`, true},
		{"whole chunk without its line ending", "data: " + whole, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sseServer(t, []string{role, text, tc.last}, nil, nil)
			defer srv.Close()
			p := openAIProvider(srv.URL, nil)
			req := chatReq(t, `{"model":"public","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
			resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Stream.Close()
			all, err := drain(t, resp.Stream)
			if !tc.cut {
				if err != nil || !strings.HasSuffix(string(all), "data: [DONE]\n\n") {
					t.Fatalf("%v %q", err, all)
				}
				return
			}
			wantClass(t, err, routing.ClassNetwork)
			if strings.Contains(string(all), "[DONE]") {
				t.Fatalf("a stream cut mid-line was completed with [DONE]:\n%s", all)
			}
			for _, ev := range parseSSE(t, all) {
				if !json.Valid([]byte(ev.data)) {
					t.Fatalf("relayed a cut chunk: %q", ev.data)
				}
			}
		})
	}
}
