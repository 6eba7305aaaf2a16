package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"switchyard/config"
	"switchyard/providers"
)

// recordingUpstream is switchyard mockllm behind a recorder of the bodies
// it receives, so a test can assert what reached the upstream.
type recordingUpstream struct {
	h      http.Handler
	mu     sync.Mutex
	bodies []string
	hdrs   []http.Header
}

func newRecordingUpstream(t *testing.T) (*recordingUpstream, *httptest.Server) {
	u := &recordingUpstream{h: providers.MockHandler(config.Simulate{OutputTokens: 6, TokensPerSecond: 0}, 1)}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, srv
}

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, string(b))
	u.hdrs = append(u.hdrs, r.Header.Clone())
	u.mu.Unlock()
	r.Body = io.NopCloser(strings.NewReader(string(b)))
	u.h.ServeHTTP(w, r)
}

func (u *recordingUpstream) last() (string, http.Header) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) == 0 {
		return "", nil
	}
	return u.bodies[len(u.bodies)-1], u.hdrs[len(u.hdrs)-1]
}

const respYAML = `
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 0, output_tokens: 6}}
  - {name: oai, kind: openai, base_url: "${UPSTREAM}/v1", api_key: up-key, forward_headers: [X-Trace-Tag]}
  - {name: ant, kind: anthropic, base_url: "${UPSTREAM}/v1", api_key: up-key}
deployments:
  - {id: d-sim, model: sim, provider: sim}
  - {id: d-oai, model: oai, provider: oai}
  - {id: d-ant, model: ant, provider: ant}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
  - {name: other, keys: ["sk-other"], models: ["*"]}
`

func respNode(t *testing.T) (*Node, *httptest.Server, *recordingUpstream) {
	t.Helper()
	up, upSrv := newRecordingUpstream(t)
	n := newTestNode(t, strings.ReplaceAll(respYAML, "${UPSTREAM}", upSrv.URL))
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(srv.Close)
	return n, srv, up
}

func sdk(url, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// readResponsesStream reads a Responses event stream to its end, checking
// that sequence numbers count up from 0: the event types in order, the
// text of its deltas and the response.completed event's response.
func readResponsesStream(t *testing.T, st *ssestream.Stream[responses.ResponseStreamEventUnion]) (types []string, text string, final responses.Response) {
	t.Helper()
	var b strings.Builder
	seq := int64(-1)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq+1 {
			t.Fatalf("sequence %d after %d", ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			b.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return types, b.String(), final
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestResponsesSDKEveryAdapter(t *testing.T) {
	_, srv, up := respNode(t)
	c := sdk(srv.URL, testKey)
	ctx := bounded(t)
	for _, model := range []string{"sim", "oai", "ant"} {
		t.Run(model, func(t *testing.T) {
			// sync
			r, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Instructions: openai.String("Be brief."),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(r.ID, "resp_") || r.Status != "completed" || r.OutputText() != "sim token 1 sim token 2" {
				t.Fatalf("sync: id %q status %q text %q", r.ID, r.Status, r.OutputText())
			}
			if r.Usage.OutputTokens != 6 || r.Usage.InputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+6 {
				t.Fatalf("usage %+v", r.Usage)
			}
			// stream
			st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
				Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stream please")},
			})
			types, text, final := readResponsesStream(t, st)
			want := "response.created response.in_progress response.output_item.added response.content_part.added"
			if got := strings.Join(types, " "); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "response.output_text.done response.content_part.done response.output_item.done response.completed") {
				t.Fatalf("event order: %s", got)
			}
			if text != "sim token 1 sim token 2" || final.OutputText() != text || final.Status != "completed" || final.Usage.OutputTokens != 6 {
				t.Fatalf("stream: text %q final %q %s %+v", text, final.OutputText(), final.Status, final.Usage)
			}
			// a follow-up sees the stored turn at the upstream
			r2, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, PreviousResponseID: openai.String(final.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")},
			})
			if err != nil {
				t.Fatal(err)
			}
			if model != "sim" {
				body, _ := up.last()
				if !strings.Contains(body, "stream please") || !strings.Contains(body, "sim token 1 sim token 2") || !strings.Contains(body, "and then?") {
					t.Fatalf("upstream did not get the stored turn: %s", body)
				}
			}
			if r2.PreviousResponseID != final.ID {
				t.Fatalf("previous_response_id echo %q", r2.PreviousResponseID)
			}
		})
	}
}

func TestResponsesStoreEndpoints(t *testing.T) {
	_, srv, _ := respNode(t)
	c := sdk(srv.URL, testKey)
	ctx := bounded(t)
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != r.ID || got.OutputText() != r.OutputText() {
		t.Fatalf("get: %v %+v", err, got)
	}
	// another team's id is 404 everywhere: GET, DELETE, previous_response_id
	o := sdk(srv.URL, "sk-other")
	var apiErr *openai.Error
	if _, err := o.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("other team get: %v", err)
	}
	if err := o.Responses.Delete(ctx, r.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("other team delete: %v", err)
	}
	_, err = o.Responses.New(ctx, responses.ResponseNewParams{Model: "sim", PreviousResponseID: openai.String(r.ID), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "previous_response_id" {
		t.Fatalf("other team previous_response_id: %v", err)
	}
	if err := c.Responses.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("after delete: %v", err)
	}
	// store: false keeps nothing
	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "sim", Store: openai.Bool(false), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil || !strings.Contains(r.RawJSON(), `"store":false`) {
		t.Fatalf("store false: %v %s", err, r.RawJSON())
	}
	if _, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("store false get: %v", err)
	}
	if _, err := c.Responses.Get(ctx, "resp_unknown", responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown: %v", err)
	}
}

func TestResponsesToolLoopAndLimits(t *testing.T) {
	_, srv, up := respNode(t)
	c := sdk(srv.URL, testKey)
	ctx := bounded(t)
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name: "get_weather", Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	}}
	for _, model := range []string{"sim", "oai"} {
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: model, Tools: []responses.ToolUnionParam{tool},
			ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
			Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("weather in Paris?")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if model == "oai" {
			// mockllm answers text; the request must carry the tool to the upstream
			body, _ := up.last()
			if !strings.Contains(body, `"tool_choice":"required"`) || !strings.Contains(body, `"name":"get_weather"`) {
				t.Fatalf("tools not sent upstream: %s", body)
			}
			continue
		}
		if len(r.Output) != 1 || r.Output[0].Type != "function_call" {
			t.Fatalf("want one function_call, got %+v", r.Output)
		}
		call := r.Output[0].AsFunctionCall()
		if call.Name != "get_weather" || call.CallID == "" {
			t.Fatalf("call %+v", call)
		}
		out := responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(call.CallID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("18C")},
		}}
		r2, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: model, PreviousResponseID: openai.String(r.ID), Tools: []responses.ToolUnionParam{tool},
			ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
			Input:      responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if r2.OutputText() == "" {
			t.Fatalf("after the tool result the answer is text: %+v", r2.Output)
		}
	}
	// max_output_tokens hit: incomplete
	for _, model := range []string{"sim", "oai", "ant"} {
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model, MaxOutputTokens: openai.Int(3), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("long")}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || r.OutputText() != "sim token 1" {
			t.Fatalf("%s: status %q reason %q text %q", model, r.Status, r.IncompleteDetails.Reason, r.OutputText())
		}
	}
}

func TestResponsesItemReference(t *testing.T) {
	_, srv, up := respNode(t)
	c := sdk(srv.URL, testKey)
	ctx := bounded(t)
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "oai", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("first question")}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"oai","input":[{"role":"user","content":"first question"},{"type":"item_reference","id":"` + r.Output[0].ID + `"},{"role":"user","content":"second"}]}`
	w := do(t, srv.Config.Handler, "POST", "/v1/responses", testKey, body)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	sent, _ := up.last()
	var chat struct {
		Messages []struct{ Role, Content string }
	}
	_ = json.Unmarshal([]byte(sent), &chat)
	if len(chat.Messages) != 3 || chat.Messages[1].Role != "assistant" || chat.Messages[1].Content != "sim token 1 sim token 2" {
		t.Fatalf("item_reference not expanded: %s", sent)
	}
	w = do(t, srv.Config.Handler, "POST", "/v1/responses", "sk-other", body)
	if w.Code != 404 || !strings.Contains(w.Body.String(), "input[1].id") {
		t.Fatalf("another team's item: %d %s", w.Code, w.Body)
	}
}

func TestResponsesBadInput(t *testing.T) {
	n, _, _ := respNode(t)
	big := `{"model":"sim","input":"` + strings.Repeat("x", 11<<20) + `"}`
	for _, tt := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"model":"sim","input":[{"type":"message"}]}`, 400, "input[0].role"},
		{`{"model":"sim","input":[{"type":"computer_call","id":"x"}]}`, 400, "computer_call"},
		{`{"model":"sim","input":[42]}`, 400, "input[0]"},
		{`{"model":"sim","input":{"role":"user"}}`, 400, "input must be a string or an array"},
		{`{"model":"sim","input":"hi","tools":[{"type":"web_search"}]}`, 400, `built-in tool \"web_search\"`},
		{`{"model":"sim","input":"hi","tools":[{"type":"file_search","vector_store_ids":[]}]}`, 400, "file_search"},
		{`{"model":"sim","input":"hi","tool_choice":{"type":"web_search_preview"}}`, 400, "web_search_preview"},
		{`{"model":"sim","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, 400, "input_file"},
		{`{"model":"sim","input":"hi","text":{"format":{"type":"json_schema"}}}`, 400, "json_schema"},
		{`{"model":"sim","input":"hi","max_output_tokens":0}`, 400, "max_output_tokens"},
		{`{"model":"sim"}`, 400, "input"},
		{`{"input":"hi"}`, 400, "model"},
		{`{"model":"sim","input":"hi",`, 400, "not valid JSON"},
		{`{"model":"sim","input":"hi","previous_response_id":"resp_nope"}`, 404, "previous_response_id"},
		{`{"model":"sim","input":[{"type":"item_reference","id":"msg_nope"}]}`, 404, "msg_nope"},
		{big, 413, "max_body_bytes"},
	} {
		w := do(t, n.Handler(), "POST", "/v1/responses", testKey, tt.body)
		if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.want) {
			t.Errorf("%.80s: %d %s (want %d %q)", tt.body, w.Code, w.Body, tt.status, tt.want)
		}
		var e struct {
			Error struct{ Message, Type string } `json:"error"`
		}
		if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Message == "" {
			t.Errorf("error body not in the OpenAI shape: %s", w.Body)
		}
	}
}

func TestModelRetrieveCountTokensHeaders(t *testing.T) {
	n, srv, up := respNode(t)
	c := sdk(srv.URL, testKey)
	ctx := bounded(t)
	m, err := c.Models.Get(ctx, "oai")
	if err != nil || m.ID != "oai" {
		t.Fatalf("models.retrieve: %v %+v", err, m)
	}
	var apiErr *openai.Error
	if _, err := c.Models.Get(ctx, "nope"); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown model: %v", err)
	}
	w := do(t, n.Handler(), "POST", "/v1/messages/count_tokens", testKey, `{"model":"ant","messages":[{"role":"user","content":"hello world, count me"}]}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"input_tokens":`) {
		t.Fatalf("count_tokens: %d %s", w.Code, w.Body)
	}
	w = do(t, n.Handler(), "POST", "/v1/messages/count_tokens", testKey, `{"model":"ant"}`)
	if w.Code != 400 || !strings.Contains(w.Body.String(), `"type":"error"`) {
		t.Fatalf("count_tokens bad input must be the Anthropic shape: %d %s", w.Code, w.Body)
	}
	// forwarded headers: anthropic-beta to anthropic, the provider's list to openai, never the key
	w = do(t, n.Handler(), "POST", "/v1/messages", testKey, `{"model":"ant","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		"Anthropic-Beta", "prompt-caching-2024-07-31", "X-Trace-Tag", "t1", "X-Request-Id", "rid-1")
	if w.Code != 200 || w.Header().Get("Request-Id") != "rid-1" || w.Header().Get("X-Request-Id") != "rid-1" {
		t.Fatalf("request-id: %d %v", w.Code, w.Header())
	}
	_, h := up.last()
	if h.Get("Anthropic-Beta") != "prompt-caching-2024-07-31" || h.Get("X-Trace-Tag") != "" || h.Get("X-Api-Key") != "up-key" {
		t.Fatalf("anthropic upstream headers: %v", h)
	}
	w = do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"oai","messages":[{"role":"user","content":"hi"}]}`,
		"Anthropic-Beta", "x", "X-Trace-Tag", "t2")
	_, h = up.last()
	if w.Code != 200 || h.Get("X-Trace-Tag") != "t2" || h.Get("Anthropic-Beta") != "" || h.Get("Authorization") != "Bearer up-key" {
		t.Fatalf("openai upstream headers: %d %v", w.Code, h)
	}
}
