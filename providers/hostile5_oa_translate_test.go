package providers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"switchyard/routing"
	"switchyard/wire"
)

// fakeToolChoiceOpenAI answers chat like OpenAI's Chat Completions API,
// which refuses a tool_choice (or parallel_tool_calls) in a request that
// declares no tools: 400 "Invalid value for 'tool_choice': 'tool_choice'
// is only allowed when 'tools' are specified." (the chat reference,
// platform.openai.com/docs/api-reference/chat/create, tool_choice: "none
// is the default when no tools are present").
func fakeToolChoiceOpenAI(t *testing.T, got *captured) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		var in map[string]json.RawMessage
		_ = json.Unmarshal(got.body, &in)
		w.Header().Set("Content-Type", "application/json")
		for _, k := range []string{"tool_choice", "parallel_tool_calls"} {
			if in[k] != nil && in["tools"] == nil {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":{"message":"Invalid value for '`+k+`': '`+k+`' is only allowed when 'tools' are specified.","type":"invalid_request_error","param":"`+k+`","code":null}}`)
				return
			}
		}
		io.WriteString(w, syncChat)
	}))
}

// TestHostile5OAToolChoiceWithoutTools: an Anthropic-format client may send
// tool_choice with no tools (the Messages API takes it: an agent's final,
// tool-less summarising turn keeps its tool_choice). The translation sent
// it on as OpenAI's tool_choice, which OpenAI refuses without tools, so
// every OpenAI deployment answered 400 to a request the client did not get
// wrong (SPEC 10: translation both ways; the OpenAI-to-Anthropic direction
// already sends tool_choice only with tools). Without tools there is
// nothing to choose: the field is left out; with tools it still goes.
func TestHostile5OAToolChoiceWithoutTools(t *testing.T) {
	var got captured
	srv := fakeToolChoiceOpenAI(t, &got)
	defer srv.Close()
	p := openAIProvider(srv.URL+"/v1", nil)
	a := newAdapter(t, p)
	const tools = `,"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}]`
	for _, tc := range []struct {
		name, choice, tools string
		want                string // the tool_choice the upstream saw; "" none
	}{
		{name: "auto, no tools", choice: `{"type":"auto"}`},
		{name: "any, no tools", choice: `{"type":"any"}`},
		{name: "named tool, no tools", choice: `{"type":"tool","name":"f"}`},
		{name: "none, no tools", choice: `{"type":"none"}`},
		{name: "auto without parallel, no tools", choice: `{"type":"auto","disable_parallel_tool_use":true}`},
		{name: "any with tools", choice: `{"type":"any"}`, tools: tools, want: `"required"`},
		{name: "named with tools", choice: `{"type":"tool","name":"f"}`, tools: tools, want: `{"type":"function","function":{"name":"f"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"claude","max_tokens":64,"tool_choice":` + tc.choice + tc.tools + `,"messages":[{"role":"user","content":"Hi"}]}`
			resp, err := a.Do(context.Background(), deployment(p, "gpt-4o"), chatReq(t, body, wire.FormatAnthropic))
			if err != nil {
				t.Fatalf("upstream refused %s: %v", got.body, err)
			}
			if resp.Status != http.StatusOK {
				t.Fatalf("status %d", resp.Status)
			}
			var sent map[string]json.RawMessage
			if err := json.Unmarshal(got.body, &sent); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if sent["tool_choice"] != nil {
					t.Fatalf("tool_choice sent without tools: %s", got.body)
				}
				return
			}
			assertJSON(t, sent["tool_choice"], tc.want)
		})
	}
}

// TestHostile5OAStructuredOutputAnthropic: a JSON-schema answer format
// crosses the translation both ways instead of being dropped, which left a
// client that asked for schema-valid JSON with free text and no sign of it.
// OpenAI's chat request names it response_format {"type":"json_schema",
// "json_schema":{"name","schema","strict"}} (platform.openai.com/docs/
// api-reference/chat/create, response_format; guide "Structured
// Outputs"); the Messages API names it output_config {"format":{"type":
// "json_schema","schema"}} (platform.claude.com/docs/en/build-with-claude/
// structured-outputs, "JSON outputs (output_config.format)"). A model that
// lacks the feature answers 400, a bad request the gateway fails over from,
// as for any request a deployment cannot serve.
func TestHostile5OAStructuredOutputAnthropic(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	t.Run("openai client, anthropic deployment", func(t *testing.T) {
		var got captured
		srv := fakeAnthropic(t, &got)
		defer srv.Close()
		p := anthropicProvider(srv.URL + "/v1")
		a := newAdapter(t, p)
		body := `{"model":"m","messages":[{"role":"user","content":"Where?"}],"response_format":{"type":"json_schema","json_schema":{"name":"place","strict":true,"schema":` + schema + `}}}`
		if _, err := a.Do(context.Background(), deployment(p, "claude-up"), chatReq(t, body, wire.FormatOpenAI)); err != nil {
			t.Fatal(err)
		}
		var sent map[string]json.RawMessage
		if err := json.Unmarshal(got.body, &sent); err != nil {
			t.Fatal(err)
		}
		if sent["output_config"] == nil {
			t.Fatalf("response_format json_schema dropped: upstream saw %s", got.body)
		}
		assertJSON(t, sent["output_config"], `{"format":{"type":"json_schema","schema":`+schema+`}}`)
	})
	t.Run("anthropic client, openai deployment", func(t *testing.T) {
		var got captured
		srv := fakeToolChoiceOpenAI(t, &got)
		defer srv.Close()
		p := openAIProvider(srv.URL+"/v1", nil)
		a := newAdapter(t, p)
		body := `{"model":"claude","max_tokens":64,"output_config":{"format":{"type":"json_schema","schema":` + schema + `}},"messages":[{"role":"user","content":"Where?"}]}`
		if _, err := a.Do(context.Background(), deployment(p, "gpt-4o"), chatReq(t, body, wire.FormatAnthropic)); err != nil {
			t.Fatal(err)
		}
		var sent map[string]json.RawMessage
		if err := json.Unmarshal(got.body, &sent); err != nil {
			t.Fatal(err)
		}
		if sent["response_format"] == nil {
			t.Fatalf("output_config.format dropped: upstream saw %s", got.body)
		}
		assertJSON(t, sent["response_format"], `{"type":"json_schema","json_schema":{"name":"output","schema":`+schema+`}}`)
	})
	t.Run("unchanged without a format", func(t *testing.T) {
		out, err := openAIToAnthropicRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}}`), "c", false)
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, out, `{"model":"c","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`)
		oa, err := anthropicToOpenAIRequest([]byte(`{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`), "g", false)
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, oa, `{"model":"g","messages":[{"role":"user","content":"x"}],"max_tokens":5}`)
	})
}

// TestHostile5OAManyChoicesRefused: "n" asks OpenAI's chat for that many
// choices (chat reference, n: "How many chat completion choices to
// generate for each input message"); the Messages API has one answer. The
// translation dropped n, so a client asking for 3 choices got 1 (and an
// SDK caller reading choices[1] an index error), with no sign why. The
// attempt is a bad request naming n, like any request a deployment cannot
// serve: the gateway tries the pool's other deployments. n of 1 (or
// absent) is served.
func TestHostile5OAManyChoicesRefused(t *testing.T) {
	for _, tc := range []struct {
		n    string
		want bool // refused
	}{{`3`, true}, {`2`, true}, {`1`, false}, {`null`, false}} {
		_, err := openAIToAnthropicRequest([]byte(`{"model":"m","n":`+tc.n+`,"messages":[{"role":"user","content":"x"}]}`), "c", false)
		if !tc.want {
			if err != nil {
				t.Fatalf("n=%s: %v", tc.n, err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("n=%s: served with one choice", tc.n)
		}
		e := wantClass(t, err, routing.ClassBadRequest)
		if e.Status != http.StatusBadRequest {
			t.Fatalf("n=%s: %+v", tc.n, e)
		}
	}
}

// TestHostile5OAToolIDsForAnthropic: the Messages API takes a tool_use id
// (and the tool_result's tool_use_id naming it) only when it matches
// ^[a-zA-Z0-9_-]+$ (Messages reference, tool_use content block id; it
// answers 400 "messages.1.content.0.tool_use.id: String should match
// pattern '^[a-zA-Z0-9_-]+$'"). OpenAI-compatible servers name calls
// otherwise: Moonshot's Kimi "functions.get_weather:0", others with
// spaces or none at all. A conversation such a deployment answered once
// (or that failed over to an Anthropic deployment mid-way) was sent on
// with those ids, and every later turn of it answered 400 on every
// Anthropic deployment. An id outside the pattern is rewritten the same
// way wherever it appears (so a result still names its call), distinct
// ids stay distinct, and a valid id is left as it is.
func TestHostile5OAToolIDsForAnthropic(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"go"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":"{}"}},
			{"id":"functions.get_weather:1","type":"function","function":{"name":"get_weather","arguments":"{}"}},
			{"id":"functions_get_weather_0","type":"function","function":{"name":"get_weather","arguments":"{}"}},
			{"id":"call 7","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"functions.get_weather:0","content":"a"},
		{"role":"tool","tool_call_id":"functions.get_weather:1","content":"b"},
		{"role":"tool","tool_call_id":"functions_get_weather_0","content":"c"},
		{"role":"tool","tool_call_id":"call 7","content":"d"}]}`
	out, err := openAIToAnthropicRequest([]byte(body), "claude", false)
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Messages []struct {
			Content []anBlock `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(out, &req); err != nil || len(req.Messages) != 3 {
		t.Fatalf("%s: %v", out, err)
	}
	valid := func(id string) bool {
		for _, c := range id {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return false
			}
		}
		return id != ""
	}
	uses, results := req.Messages[1].Content, req.Messages[2].Content
	if len(uses) != 4 || len(results) != 4 {
		t.Fatalf("%s", out)
	}
	seen := map[string]bool{}
	for i := range uses {
		id := uses[i].ID
		if !valid(id) {
			t.Fatalf("tool_use id %q outside ^[a-zA-Z0-9_-]+$: %s", id, out)
		}
		if results[i].ToolUseID != id {
			t.Fatalf("tool_result %d names %q, its call is %q", i, results[i].ToolUseID, id)
		}
		if seen[id] {
			t.Fatalf("two calls share id %q: %s", id, out)
		}
		seen[id] = true
	}
	if uses[2].ID != "functions_get_weather_0" {
		t.Fatalf("a valid id was rewritten: %q", uses[2].ID)
	}
}

// TestHostile5OAToolIDsToAnthropicClient: the other way, an Anthropic
// client of an OpenAI-compatible deployment that names its calls
// "functions.get_weather:0" got that id as tool_use.id, sync and streamed.
// The client sends it back in its next turn, and when that turn reaches an
// Anthropic deployment (the pool's other kind, a failover, a fallback
// model) the Messages API answers 400 for the rest of the conversation.
// The client gets an id of the Messages pattern; a stream keeps one block
// for the call whose every delta repeats the id.
func TestHostile5OAToolIDsToAnthropicClient(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	sync := `{"id":"chatcmpl-k","object":"chat.completion","created":1,"model":"kimi","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`
	out, err := openAIToAnthropicResponse([]byte(sync))
	if err != nil {
		t.Fatal(err)
	}
	var msg anResponse
	if err := json.Unmarshal(out, &msg); err != nil || len(msg.Content) != 1 {
		t.Fatalf("%s: %v", out, err)
	}
	syncID := msg.Content[0].ID
	if !valid.MatchString(syncID) {
		t.Fatalf("sync tool_use id %q: %s", syncID, out)
	}

	c := newOpenAIToAnthropicStream("kimi", 5)
	var all []byte
	for _, ch := range []string{
		`{"id":"chatcmpl-k","model":"kimi","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
		`{"id":"chatcmpl-k","model":"kimi","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"functions.get_weather:0","function":{"arguments":"{\"city\":"}}]}}]}`,
		`{"id":"chatcmpl-k","model":"kimi","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"functions.get_weather:0","function":{"arguments":"\"Paris\"}"}}]}}]}`,
		`{"id":"chatcmpl-k","model":"kimi","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`[DONE]`,
	} {
		b, _, err := c.event("", []byte(ch))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	var starts []string
	for _, ev := range parseSSE(t, all) {
		if ev.name != "content_block_start" {
			continue
		}
		var s struct {
			ContentBlock anBlock `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(ev.data), &s); err != nil {
			t.Fatal(err)
		}
		starts = append(starts, s.ContentBlock.ID)
	}
	if len(starts) != 1 || !valid.MatchString(starts[0]) || starts[0] != syncID {
		t.Fatalf("stream tool_use blocks %q (sync %q):\n%s", starts, syncID, all)
	}
}
