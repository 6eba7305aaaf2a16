package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// SPEC 18 for the Responses API, with the official openai-go client: a
// Responses request shares its entry with the same conversation sent as
// chat, both ways, sync and streamed; a hit gets a fresh id and, with store
// true, is stored under it like any response (GET and previous_response_id
// find it); store false stores nothing; a request that continues stored
// state is never cached.
func TestResponsesCached(t *testing.T) {
	fc, up := newFakeChat(t)
	calls := &fc.calls
	n := cacheNode(t, up.URL, ", price: {input: 1000, output: 1000}", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("sk-a"), option.WithMaxRetries(0))
	ctx := bounded(t)
	input := func(s string) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
	}

	// a chat answer, replayed to a Responses client as a sync hit
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", `{"model":"m","messages":[{"role":"user","content":"what is it?"}]}`); w.Code != 200 {
		t.Fatalf("chat: %d %s", w.Code, w.Body)
	}
	var hr *http.Response
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: input("what is it?")}, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	if hr.Header.Get("X-Switchyard-Cache") != "hit" || calls.Load() != 1 || r.OutputText() != "the answer" || r.Status != "completed" ||
		!strings.HasPrefix(r.ID, "resp_") || r.Usage.OutputTokens != 3 {
		t.Fatalf("a Responses hit: cache=%q calls=%d id=%q text=%q status=%q usage=%+v", hr.Header.Get("X-Switchyard-Cache"), calls.Load(), r.ID, r.OutputText(), r.Status, r.Usage)
	}
	// stored under its own id (store defaults to true) ...
	got, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != r.ID || got.OutputText() != "the answer" {
		t.Fatalf("the hit was not stored under its id: %v %+v", err, got)
	}
	// ... so a follow-up continues it; that follow-up is not cacheable
	r2, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(r.ID), Input: input("and then?")}, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	sent := fc.lastBody()
	if hr.Header.Get("X-Switchyard-Cache") != "" || calls.Load() != 2 || r2.PreviousResponseID != r.ID ||
		!strings.Contains(sent, "what is it?") || !strings.Contains(sent, "the answer") || !strings.Contains(sent, "and then?") {
		t.Fatalf("follow-up of a hit: cache=%q calls=%d upstream got %s", hr.Header.Get("X-Switchyard-Cache"), calls.Load(), sent)
	}

	// the same entry as a Responses stream: every event in order, a fresh id
	st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Input: input("what is it?")}, option.WithResponseInto(&hr))
	types, text, final := readResponsesStream(t, st)
	all := strings.Join(types, " ")
	if hr.Header.Get("X-Switchyard-Cache") != "hit" || calls.Load() != 2 || text != "the answer" ||
		!strings.HasPrefix(all, "response.created response.in_progress") || !strings.HasSuffix(all, "response.completed") ||
		final.ID == r.ID || final.OutputText() != "the answer" {
		t.Fatalf("a streamed Responses hit: cache=%q calls=%d text=%q events %s final %q", hr.Header.Get("X-Switchyard-Cache"), calls.Load(), text, all, final.ID)
	}

	// a Responses stream that misses stores its answer; a chat client hits it
	st = c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Instructions: openai.String("Be brief."), Input: input("stream it")}, option.WithResponseInto(&hr))
	for st.Next() {
	}
	if err := st.Err(); err != nil || hr.Header.Get("X-Switchyard-Cache") != "miss" || calls.Load() != 3 {
		t.Fatalf("a streamed Responses miss: %v cache=%q calls=%d", err, hr.Header.Get("X-Switchyard-Cache"), calls.Load())
	}
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"stream it"}]}`)
	if !answered(w.Header()) || calls.Load() != 3 || !strings.Contains(w.Body.String(), `"streamed answer"`) {
		t.Fatalf("a chat replay of a stored Responses stream: cache=%q calls=%d %s", w.Header().Get("X-Switchyard-Cache"), calls.Load(), w.Body)
	}

	// a sync Responses miss stores too; a hit with store false stores nothing
	if _, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: input("sync miss")}, option.WithResponseInto(&hr)); err != nil ||
		hr.Header.Get("X-Switchyard-Cache") != "miss" || calls.Load() != 4 {
		t.Fatalf("a sync Responses miss: %v cache=%q calls=%d", err, hr.Header.Get("X-Switchyard-Cache"), calls.Load())
	}
	r3, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Store: openai.Bool(false), Input: input("sync miss")}, option.WithResponseInto(&hr))
	if err != nil || !answered(hr.Header) || calls.Load() != 4 || r3.OutputText() != "the answer" {
		t.Fatalf("store false hit: %v cache=%q calls=%d", err, hr.Header.Get("X-Switchyard-Cache"), calls.Load())
	}
	if _, err := c.Responses.Get(ctx, r3.ID, responses.ResponseGetParams{}); err == nil {
		t.Fatalf("a store:false hit was stored as %s", r3.ID)
	}
}

// answered reports an answer from the cache: a hit, or, for the request
// right after the one that stored it, coalesced (its client can read the
// whole answer before the leader has ended its flight).
func answered(h http.Header) bool {
	c := h.Get("X-Switchyard-Cache")
	return c == "hit" || c == "coalesced"
}

// SPEC 18 end to end with both official SDKs: a tool call stored from an
// openai-go chat stream is replayed, without another upstream call, to
// anthropic-sdk-go as a sync message and as an event stream, and to
// openai-go as a sync chat answer and a Responses function call, each
// parsed by its SDK.
func TestCacheAcrossSDKs(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_up","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	n := cacheNode(t, up.URL, "", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	ctx := bounded(t)
	schema := map[string]any{"city": map[string]any{"type": "string"}}
	const prompt = "weather in Paris?"

	// stored from an OpenAI chat stream
	oc := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("sk-a"), option.WithMaxRetries(0))
	var hr *http.Response
	st := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "m", MaxTokens: openai.Int(64),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": schema},
		})},
	}, option.WithResponseInto(&hr))
	acc := openai.ChatCompletionAccumulator{}
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil || hr.Header.Get("X-Switchyard-Cache") != "miss" || len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("the stored stream: %v cache=%q %+v", err, hr.Header.Get("X-Switchyard-Cache"), acc.Choices)
	}

	// replayed to anthropic-sdk-go, sync and streamed
	ac := anthropic.NewClient(anthropicoption.WithBaseURL(srv.URL+"/"), anthropicoption.WithAPIKey("sk-a"), anthropicoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model: "m", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: schema},
		}}},
	}
	toolUse := func(where string, m anthropic.Message) {
		t.Helper()
		if m.StopReason != "tool_use" || len(m.Content) != 1 || m.Content[0].Type != "tool_use" {
			t.Fatalf("%s: %+v", where, m)
		}
		u := m.Content[0].AsToolUse()
		var in map[string]string
		if err := json.Unmarshal(u.Input, &in); err != nil || in["city"] != "Paris" || u.Name != "get_weather" || u.ID == "" {
			t.Fatalf("%s: tool use %+v %v", where, u, err)
		}
	}
	var ah *http.Response
	msg, err := ac.Messages.New(ctx, params, anthropicoption.WithResponseInto(&ah))
	if err != nil || !answered(ah.Header) || calls.Load() != 1 {
		t.Fatalf("anthropic sync: %v cache=%q calls=%d", err, ah.Header.Get("X-Switchyard-Cache"), calls.Load())
	}
	toolUse("anthropic sync", *msg)
	as := ac.Messages.NewStreaming(ctx, params, anthropicoption.WithResponseInto(&ah))
	am := anthropic.Message{}
	for as.Next() {
		if err := am.Accumulate(as.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := as.Err(); err != nil || ah.Header.Get("X-Switchyard-Cache") != "hit" || calls.Load() != 1 {
		t.Fatalf("anthropic stream: %v cache=%q calls=%d", err, ah.Header.Get("X-Switchyard-Cache"), calls.Load())
	}
	toolUse("anthropic stream", am)

	// and to openai-go as a sync chat answer and a Responses function call
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "m", MaxTokens: openai.Int(64),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": schema},
		})},
	}, option.WithResponseInto(&hr))
	if err != nil || hr.Header.Get("X-Switchyard-Cache") != "hit" || len(cc.Choices) != 1 || cc.Choices[0].FinishReason != "tool_calls" ||
		len(cc.Choices[0].Message.ToolCalls) != 1 || cc.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("openai sync: %v cache=%q %+v", err, hr.Header.Get("X-Switchyard-Cache"), cc)
	}
	r, err := oc.Responses.New(ctx, responses.ResponseNewParams{
		Model: "m", MaxOutputTokens: openai.Int(64),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name: "get_weather", Parameters: map[string]any{"type": "object", "properties": schema},
		}}},
	}, option.WithResponseInto(&hr))
	if err != nil || hr.Header.Get("X-Switchyard-Cache") != "hit" || calls.Load() != 1 {
		t.Fatalf("responses: %v cache=%q calls=%d", err, hr.Header.Get("X-Switchyard-Cache"), calls.Load())
	}
	var fc *responses.ResponseFunctionToolCall
	for _, it := range r.Output {
		if it.Type == "function_call" {
			c := it.AsFunctionCall()
			fc = &c
		}
	}
	if fc == nil || fc.Name != "get_weather" || fc.Arguments != `{"city":"Paris"}` || fc.CallID == "" {
		t.Fatalf("responses function call: %+v", r.Output)
	}
}
