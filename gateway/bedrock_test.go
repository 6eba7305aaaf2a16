package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"switchyard/config"
	"switchyard/providers/bedrockfake"
)

// The AWS documentation's example credentials; the fake Bedrock refuses a
// request not signed with exactly these.
const (
	brAKID   = "AKIAIOSFODNN7EXAMPLE"
	brSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	brToken  = "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN0123456789abcdef"
)

// bedrockAnswer is a fake Bedrock that plays the radio-station example of
// the Bedrock user guide's "Call a tool with the Converse API": with tools
// and no tool result it asks for top_song, with a tool result it answers,
// and without tools it says hello; sync or as event-stream frames.
func bedrockAnswer(w http.ResponseWriter, c *bedrockfake.Call) {
	body := string(c.Body)
	switch {
	case strings.Contains(body, `"toolResult"`):
		bedrockText(w, c.Stream, "The top song on WZPZ is Elemental Hotel.")
	case strings.Contains(body, `"toolConfig"`):
		if c.Stream {
			bedrockfake.WriteFrames(w,
				bedrockfake.Event("messageStart", `{"role":"assistant"}`),
				bedrockfake.Event("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q","name":"top_song"}}}`),
				bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"sign\":"}}}`),
				bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"\"WZPZ\"}"}}}`),
				bedrockfake.Event("contentBlockStop", `{"contentBlockIndex":0}`),
				bedrockfake.Event("messageStop", `{"stopReason":"tool_use"}`),
				bedrockfake.Event("metadata", `{"usage":{"inputTokens":375,"outputTokens":59,"totalTokens":434},"metrics":{"latencyMs":9}}`))
			return
		}
		io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q","name":"top_song","input":{"sign":"WZPZ"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":375,"outputTokens":59,"totalTokens":434}}`)
	default:
		bedrockText(w, c.Stream, "Hello from Bedrock.")
	}
}

func bedrockText(w http.ResponseWriter, stream bool, text string) {
	q, _ := json.Marshal(text)
	if stream {
		half := len(text) / 2
		a, _ := json.Marshal(text[:half])
		b, _ := json.Marshal(text[half:])
		bedrockfake.WriteFrames(w,
			bedrockfake.Event("messageStart", `{"role":"assistant"}`),
			bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":`+string(a)+`}}`),
			bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":`+string(b)+`}}`),
			bedrockfake.Event("contentBlockStop", `{"contentBlockIndex":0}`),
			bedrockfake.Event("messageStop", `{"stopReason":"end_turn"}`),
			bedrockfake.Event("metadata", `{"usage":{"inputTokens":20,"outputTokens":8,"totalTokens":1028,"cacheReadInputTokens":1000},"metrics":{"latencyMs":9}}`))
		return
	}
	io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":`+string(q)+`}]}},"stopReason":"end_turn","usage":{"inputTokens":20,"outputTokens":8,"totalTokens":1028,"cacheReadInputTokens":1000}}`)
}

// newLoggedNode is newTestNode with the gateway's log kept for the test.
func newLoggedNode(t *testing.T, yml string) (*Node, *syncBuffer) {
	t.Helper()
	cfg, err := config.Load([]byte(yml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.DataDir = ""
	logs := &syncBuffer{}
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n, logs
}

// setAWSEnv puts the credentials in the environment only: the provider
// has no keys in its config, so the AWS default chain must find them.
func setAWSEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", brAKID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", brSecret)
	t.Setenv("AWS_SESSION_TOKEN", brToken)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func newFakeBedrock(t *testing.T) (*bedrockfake.Server, string) {
	t.Helper()
	f := &bedrockfake.Server{Creds: aws.Credentials{AccessKeyID: brAKID, SecretAccessKey: brSecret, SessionToken: brToken}, Answer: bedrockAnswer}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

var topSong = shared.FunctionDefinitionParam{
	Name:        "top_song",
	Description: openai.String("Get the most popular song played on a radio station."),
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
		"sign": map[string]any{"type": "string"}}, "required": []string{"sign"}},
}

// TestBedrockOfficialOpenAIClient: the official openai-go client uses a
// Bedrock deployment unchanged: sync, stream, tools (a full tool round
// trip), and the Responses API; SigV4 credentials come from the
// environment, the model is an inference profile ARN, and the cost follows
// SPEC 10.2 with cached input.
func TestBedrockOfficialOpenAIClient(t *testing.T) {
	setAWSEnv(t)
	fake, url := newFakeBedrock(t)
	n, _ := newLoggedNode(t, `
providers: [{name: aws, kind: bedrock, region: us-east-1, base_url: "`+url+`"}]
deployments:
  - {id: br, model: claude, provider: aws, upstream_model: "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20241022-v2:0",
     price: {input: 3, output: 15, cached_input: 0.3}}
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
`)
	gw := httptest.NewServer(n.Handler())
	defer gw.Close()
	var costs []string
	capture := func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if resp != nil {
			costs = append(costs, resp.Header.Get("X-Switchyard-Cost-Usd"))
		}
		return resp, err
	}
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0), option.WithMiddleware(capture))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// sync
	comp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "claude", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Message.Content != "Hello from Bedrock." || comp.Usage.PromptTokens != 1020 || comp.Usage.PromptTokensDetails.CachedTokens != 1000 {
		t.Fatalf("sync: %+v", comp)
	}
	// 20 uncached x 3 + 1000 cached x 0.3 + 8 out x 15, per million
	if len(costs) != 1 || costs[0] != "0.00048" {
		t.Fatalf("X-Switchyard-Cost-Usd %q, want 0.00048", costs)
	}

	// stream
	st := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "claude", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "Hello from Bedrock." || acc.Choices[0].FinishReason != "stop" || acc.Usage.PromptTokens != 1020 {
		t.Fatalf("stream: %+v", acc.ChatCompletion)
	}

	// tools: the model asks for top_song, the client answers, the model replies
	params := openai.ChatCompletionNewParams{
		Model: "claude", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the most popular song on WZPZ?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(topSong)},
	}
	comp, err = client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	calls := comp.Choices[0].Message.ToolCalls
	if comp.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "top_song" || calls[0].Function.Arguments != `{"sign":"WZPZ"}` {
		t.Fatalf("tool call: %+v", comp.Choices[0])
	}
	params.Messages = append(params.Messages, comp.Choices[0].Message.ToParam(), openai.ToolMessage(`{"song":"Elemental Hotel"}`, calls[0].ID))
	comp, err = client.Chat.Completions.New(ctx, params)
	if err != nil || comp.Choices[0].Message.Content != "The top song on WZPZ is Elemental Hotel." {
		t.Fatalf("after the tool result: %v %+v", err, comp)
	}
	last := fake.Calls()[len(fake.Calls())-1]
	if !strings.Contains(string(last.Body), `"toolResult":{"toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"`) {
		t.Fatalf("the tool result did not reach Bedrock: %s", last.Body)
	}

	// tools, streamed
	params.Messages = params.Messages[:1]
	st = client.Chat.Completions.NewStreaming(ctx, params)
	acc = openai.ChatCompletionAccumulator{}
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"sign":"WZPZ"}` || tc[0].ID != "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q" || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("streamed tool call: %+v", acc.Choices[0])
	}

	// the Responses API
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "claude", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil || r.OutputText() != "Hello from Bedrock." || r.Usage.InputTokensDetails.CachedTokens != 1000 {
		t.Fatalf("responses: %v %+v", err, r)
	}

	for _, c := range fake.Calls() {
		if !strings.HasPrefix(c.EscapedPath, "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic") {
			t.Fatalf("path %s", c.EscapedPath)
		}
	}
}

// TestBedrockAnthropicClient: an Anthropic-format client (POST
// /v1/messages, as the Anthropic SDKs send it) gets Messages, sync and
// streamed, with Bedrock's cache reads as cache_read_input_tokens.
func TestBedrockAnthropicClient(t *testing.T) {
	setAWSEnv(t)
	_, url := newFakeBedrock(t)
	n, _ := newLoggedNode(t, `
providers: [{name: aws, kind: bedrock, region: us-east-1, base_url: "`+url+`"}]
deployments: [{id: br, model: claude, provider: aws, upstream_model: anthropic.claude-3-haiku-20240307-v1:0}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
`)
	w := do(t, n.Handler(), "POST", "/v1/messages", testKey, `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "anthropic-version", "2023-06-01")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"text":"Hello from Bedrock."`) || !strings.Contains(w.Body.String(), `"cache_read_input_tokens":1000`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = do(t, n.Handler(), "POST", "/v1/messages", testKey, `{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "anthropic-version", "2023-06-01")
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, "event: message_start") || !strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Fatalf("%d %s", w.Code, body)
	}
}

// TestBedrockErrorsDriveFailover: Bedrock's error classes drive failover
// (a throttled deployment, then the next) and the fallback chains (a
// ValidationException about the input's length walks the context_window
// chain); an exception mid-stream ends the stream with an error event.
func TestBedrockErrorsDriveFailover(t *testing.T) {
	setAWSEnv(t)
	var modeV atomic.Value // read on the fake's goroutines
	modeV.Store("")
	mode := func() string { return modeV.Load().(string) }
	fake := &bedrockfake.Server{Creds: aws.Credentials{AccessKeyID: brAKID, SecretAccessKey: brSecret, SessionToken: brToken},
		Answer: func(w http.ResponseWriter, c *bedrockfake.Call) {
			switch {
			case c.ModelID == "throttled":
				bedrockfake.WriteError(w, 429, "ThrottlingException", "Too many requests, please wait before trying again.")
			case c.ModelID == "guarded":
				io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"guardrail_intervened","usage":{"inputTokens":9,"outputTokens":0,"totalTokens":9}}`)
			case c.ModelID == "small" && mode() == "long":
				bedrockfake.WriteError(w, 400, "ValidationException", "Input is too long for requested model.")
			case mode() == "midstream":
				bedrockfake.WriteFrames(w,
					bedrockfake.Event("messageStart", `{"role":"assistant"}`),
					bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hel"}}`),
					bedrockfake.Exception("modelStreamErrorException", "The model stream failed."))
			default:
				bedrockAnswer(w, c)
			}
		}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	n, _ := newLoggedNode(t, `
providers: [{name: aws, kind: bedrock, region: us-east-1, base_url: "`+srv.URL+`"}]
deployments:
  - {id: br-throttled, model: claude, provider: aws, upstream_model: throttled}
  - {id: br-ok, model: claude, provider: aws, upstream_model: fine}
  - {id: br-small, model: small, provider: aws, upstream_model: small}
  - {id: br-big, model: big, provider: aws, upstream_model: big}
  - {id: br-guarded, model: guarded, provider: aws, upstream_model: guarded}
models: [{name: claude, strategy: round_robin}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
routing:
  fallbacks:
    - {primary: small, reason: context_window, models: [big]}
    - {primary: guarded, reason: content_policy, models: [big]}
`)
	h := n.Handler()
	for i := 0; i < 2; i++ { // whichever the round robin tries first, the answer comes from br-ok
		id := "fo-" + string(rune('a'+i))
		w := do(t, h, "POST", "/v1/chat/completions", testKey, `{"model":"claude","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", id)
		if w.Code != 200 || w.Header().Get("X-Switchyard-Deployment") != "br-ok" {
			t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
		}
		if tl := timeline(auditOf(t, n, id)); tl != "br-ok:ok" && tl != "br-throttled:rate_limited br-ok:ok" {
			t.Fatalf("timeline %s", tl)
		}
	}

	modeV.Store("long")
	w := do(t, h, "POST", "/v1/chat/completions", testKey, `{"model":"small","messages":[{"role":"user","content":"a long prompt"}]}`, "X-Request-Id", "ctx-1")
	if w.Code != 200 || w.Header().Get("X-Switchyard-Deployment") != "br-big" || w.Header().Get("X-Switchyard-Degraded") != "true" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	if e := auditOf(t, n, "ctx-1"); e.FallbackReason != "context_window" || timeline(e) != "br-small:context_window br-big:ok" {
		t.Fatalf("reason %q timeline %s", e.FallbackReason, timeline(e))
	}

	// a guardrail that intervened before any content walks the content_policy chain
	w = do(t, h, "POST", "/v1/chat/completions", testKey, `{"model":"guarded","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "policy-1")
	if w.Code != 200 || w.Header().Get("X-Switchyard-Deployment") != "br-big" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	if e := auditOf(t, n, "policy-1"); e.FallbackReason != "content_policy" || timeline(e) != "br-guarded:content_policy br-big:ok" {
		t.Fatalf("reason %q timeline %s", e.FallbackReason, timeline(e))
	}

	modeV.Store("midstream")
	w = do(t, h, "POST", "/v1/chat/completions", testKey, `{"model":"big","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "mid-1")
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `"content":"Hel"`) || !strings.Contains(body, `"message":"The model stream failed."`) || strings.Contains(body, `"finish_reason":"stop"`) {
		t.Fatalf("%d %s", w.Code, body)
	}
	if tl := timeline(auditOf(t, n, "mid-1")); tl != "br-big:server_error" {
		t.Fatalf("timeline %s", tl)
	}
}

// TestBedrockRefusedSignature: when Bedrock refuses the signature, the
// client gets 502 upstream_auth_error with the fixed message, and neither
// the response, the audit entry nor the log holds a secret or the
// upstream's text.
func TestBedrockRefusedSignature(t *testing.T) {
	_, url := newFakeBedrock(t)
	wrong := "wrongSecretEXAMPLEwrongSecretEXAMPLEwrong"
	n, logs := newLoggedNode(t, `
providers: [{name: aws, kind: bedrock, region: us-east-1, base_url: "`+url+`",
  aws_access_key_id: `+brAKID+`, aws_secret_access_key: "`+wrong+`", aws_session_token: "`+brToken+`"}]
deployments: [{id: br, model: claude, provider: aws, upstream_model: m}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
`)
	for _, stream := range []string{"false", "true"} {
		id := "auth-" + stream
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"claude","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", id)
		if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), `"upstream_auth_error"`) {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		entry, _ := json.Marshal(auditOf(t, n, id))
		if !strings.Contains(string(entry), ":auth") && !strings.Contains(string(entry), `"auth"`) {
			t.Fatalf("audit entry %s", entry)
		}
		for _, where := range []struct{ name, text string }{{"response", w.Body.String()}, {"audit", string(entry)}, {"log", logs.String()}} {
			for _, secret := range []string{wrong, brToken, brAKID} {
				if strings.Contains(where.text, secret) {
					t.Fatalf("%s holds %q:\n%s", where.name, secret, where.text)
				}
			}
		}
		// the client never sees the upstream's own text (SPEC 15)
		if strings.Contains(w.Body.String(), "signature") {
			t.Fatalf("response relays the upstream's text: %s", w.Body)
		}
	}
}

// TestBedrockBearerKeyGateway: a Bedrock API key goes out as Bearer.
func TestBedrockBearerKeyGateway(t *testing.T) {
	fake := &bedrockfake.Server{APIKey: "ABSKexampleBedrockAPIKey0123456789", Answer: bedrockAnswer}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	n, _ := newLoggedNode(t, `
providers: [{name: aws, kind: bedrock, region: eu-west-1, base_url: "`+srv.URL+`", api_key: "`+fake.APIKey+`"}]
deployments: [{id: br, model: claude, provider: aws, upstream_model: m}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
`)
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"claude","messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != 200 || len(fake.Calls()) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestBedrockOfficialAnthropicClient: the official anthropic-sdk-go client
// uses a Bedrock deployment unchanged through POST /v1/messages: sync,
// stream, and a tool round trip.
func TestBedrockOfficialAnthropicClient(t *testing.T) {
	setAWSEnv(t)
	fake, url := newFakeBedrock(t)
	n, _ := newLoggedNode(t, `
providers: [{name: aws, kind: bedrock, region: us-east-1, base_url: "`+url+`"}]
deployments: [{id: br, model: claude, provider: aws, upstream_model: anthropic.claude-3-5-haiku-20241022-v1:0}]
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
`)
	gw := httptest.NewServer(n.Handler())
	defer gw.Close()
	client := anthropic.NewClient(anthropicopt.WithBaseURL(gw.URL), anthropicopt.WithAPIKey(testKey), anthropicopt.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from Bedrock." || msg.StopReason != "end_turn" || msg.Usage.CacheReadInputTokens != 1000 || msg.Usage.InputTokens != 20 {
		t.Fatalf("sync: %+v", msg)
	}

	st := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	acc := anthropic.Message{}
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != "Hello from Bedrock." || acc.Usage.OutputTokens != 8 {
		t.Fatalf("stream: %+v", acc)
	}

	params := anthropic.MessageNewParams{Model: "claude", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the most popular song on WZPZ?"))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "top_song", Description: anthropic.String("Get the most popular song played on a radio station."),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"sign": map[string]any{"type": "string"}}, Required: []string{"sign"}}}}},
	}
	st = client.Messages.NewStreaming(ctx, params)
	acc = anthropic.Message{}
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != "tool_use" || len(acc.Content) != 1 || acc.Content[0].Name != "top_song" || string(acc.Content[0].Input) != `{"sign":"WZPZ"}` {
		t.Fatalf("streamed tool use: %+v", acc)
	}
	params.Messages = append(params.Messages, acc.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(acc.Content[0].ID, "Elemental Hotel", false)))
	msg, err = client.Messages.New(ctx, params)
	if err != nil || msg.Content[0].Text != "The top song on WZPZ is Elemental Hotel." {
		t.Fatalf("after the tool result: %v %+v", err, msg)
	}
	last := fake.Calls()[len(fake.Calls())-1]
	if !strings.Contains(string(last.Body), `"toolResult":{"toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q","content":[{"text":"Elemental Hotel"}]}`) {
		t.Fatalf("the tool result did not reach Bedrock: %s", last.Body)
	}
}
