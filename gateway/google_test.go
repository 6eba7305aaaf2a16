package gateway

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// End to end over loopback: the official openai-go client on the gateway's
// side, a fake Gemini API and a fake Vertex AI with a token endpoint that
// verifies the service account's signed JWT on the other (SPEC 10).

// fakeGoogleAPIs serves the Gemini API under /v1beta, Vertex AI under /v1,
// and the OAuth2 token endpoint at /token (/token-refuse always refuses).
// Answers depend on the request text: "weather" calls a function, "huge"
// is over the context window, "forbidden" is a blocked prompt.
type fakeGoogleAPIs struct {
	key     *rsa.PrivateKey
	fetches atomic.Int32

	mu      sync.Mutex
	bodies  []string
	badAuth []string
}

func (f *fakeGoogleAPIs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/token-refuse":
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
		return
	case "/token":
		r.ParseForm()
		parts := strings.Split(r.PostForm.Get("assertion"), ".")
		if len(parts) != 3 {
			w.WriteHeader(400)
			return
		}
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if rsa.VerifyPKCS1v15(&f.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		n := f.fetches.Add(1)
		fmt.Fprintf(w, `{"access_token":"ya29.e2e-%d","token_type":"Bearer","expires_in":3600}`, n)
		return
	}
	body, _ := io.ReadAll(r.Body)
	text := string(body)
	f.mu.Lock()
	f.bodies = append(f.bodies, r.URL.Path+" "+text)
	if strings.HasPrefix(r.URL.Path, "/v1beta/") && r.Header.Get("X-Goog-Api-Key") != "AIzaSy-e2e-key" ||
		strings.HasPrefix(r.URL.Path, "/v1/") && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ya29.e2e-") {
		f.badAuth = append(f.badAuth, r.URL.Path)
	}
	f.mu.Unlock()
	stream := strings.Contains(r.URL.Path, ":stream")
	switch {
	case strings.Contains(text, "huge"):
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"code":400,"message":"The input token count (3000000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`)
		return
	case strings.HasSuffix(r.URL.Path, ":batchEmbedContents"):
		io.WriteString(w, `{"embeddings":[{"values":[0.5,0.25]},{"values":[1,0]}]}`)
		return
	case strings.Contains(r.URL.Path, "/publishers/anthropic/"):
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range []string{
				`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_v","type":"message","role":"assistant","model":"claude-sonnet-4","content":[],"stop_reason":null,"usage":{"input_tokens":9,"output_tokens":1}}}`,
				`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Claude on Vertex"}}`,
				`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
				`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}`,
				`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
			} {
				io.WriteString(w, ev+"\n\n")
			}
			return
		}
		io.WriteString(w, `{"id":"msg_v","type":"message","role":"assistant","model":"claude-sonnet-4","content":[{"type":"text","text":"Claude on Vertex"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":4}}`)
		return
	}
	var answer string
	switch {
	case strings.Contains(text, "forbidden"):
		answer = `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":4,"totalTokenCount":4}}`
	case strings.Contains(text, "weather") && !strings.Contains(text, "functionResponse"):
		answer = `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},"finishReason":"STOP","index":0}]`
	default:
		answer = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Bonjour"}]},"finishReason":"STOP","index":0}]`
	}
	if strings.HasPrefix(answer, `{"candidates"`) {
		answer += `,"usageMetadata":{"promptTokenCount":1000,"candidatesTokenCount":10,"thoughtsTokenCount":10,"cachedContentTokenCount":800,"totalTokenCount":1020},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	if strings.Contains(answer, `"text":"Bonjour"`) {
		// two events: the text arrives in pieces, the last carries the finish
		io.WriteString(w, `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Bon"}]},"index":0}],"modelVersion":"gemini-2.5-flash"}`+"\n\n")
		answer = strings.Replace(answer, `"Bonjour"`, `"jour"`, 1)
	}
	io.WriteString(w, "data: "+answer+"\n\n")
}

func (f *fakeGoogleAPIs) keyJSON(tokenURI string) string {
	der, _ := x509.MarshalPKCS8PrivateKey(f.key)
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "proj", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "gw@proj.iam.gserviceaccount.com", "token_uri": tokenURI,
	})
	return string(b)
}

func googleNode(t *testing.T) (*Node, *httptest.Server, *fakeGoogleAPIs) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGoogleAPIs{key: key}
	up := httptest.NewServer(f)
	t.Cleanup(up.Close)
	yml := `
providers:
  - {name: google, kind: gemini, base_url: "` + up.URL + `/v1beta", api_key: "AIzaSy-e2e-key"}
  - {name: vx, kind: vertex, base_url: "` + up.URL + `", project: proj, region: europe-west4, credentials_json: '` + f.keyJSON(up.URL+"/token") + `'}
  - {name: vx-broken, kind: vertex, base_url: "` + up.URL + `", project: proj, region: global, credentials_json: '` + f.keyJSON(up.URL+"/token-refuse") + `'}
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 0, output_tokens: 3}}
deployments:
  - {id: gem, model: gemini, provider: google, upstream_model: gemini-2.5-flash, price: {input: 1, output: 2, cached_input: 0.25}}
  - {id: gem-emb, model: gemini-emb, provider: google, upstream_model: text-embedding-004, operations: [embeddings]}
  - {id: vx-gem, model: vx-gemini, provider: vx, upstream_model: gemini-2.5-pro}
  - {id: vx-claude, model: vx-claude, provider: vx, upstream_model: claude-sonnet-4@20250514}
  - {id: vx-dead, model: vx-dead, provider: vx-broken, upstream_model: gemini-2.5-pro}
  - {id: big, model: big, provider: sim}
  - {id: safe, model: safe, provider: sim}
teams: [{name: t, keys: ["sk-test"], models: ["*"]}]
routing:
  fallbacks:
    - {primary: gemini, reason: context_window, models: [big]}
    - {primary: gemini, reason: content_policy, models: [safe]}
`
	n := newTestNode(t, yml) // its Close stops the vertex token refresh
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(srv.Close)
	return n, srv, f
}

func TestGoogleEndToEnd(t *testing.T) {
	n, srv, f := googleNode(t)
	c := sdk(srv.URL, testKey)
	ctx := bounded(t)
	user := func(s string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(s)}}
	}

	t.Run("gemini sync and cost", func(t *testing.T) {
		p := user("hello")
		p.Model = "gemini"
		r, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.Choices[0].Message.Content != "Bonjour" || r.Usage.PromptTokens != 1000 || r.Usage.CompletionTokens != 20 ||
			r.Usage.PromptTokensDetails.CachedTokens != 800 {
			t.Fatalf("answer %+v usage %+v", r.Choices[0].Message, r.Usage)
		}
		// SPEC 10.2: 200 uncached x 1 + 800 cached x 0.25 + 20 output x 2,
		// per million (the in-process handler has written the audit entry
		// when it returns)
		if w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"gemini","messages":[{"role":"user","content":"hello"}]}`, "X-Request-Id", "cost-1"); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if got := auditOf(t, n, "cost-1").CostUSD; got < 0.00043999 || got > 0.00044001 {
			t.Fatalf("cost %v, want 0.00044", got)
		}
	})

	t.Run("gemini stream", func(t *testing.T) {
		p := user("hello")
		p.Model = "gemini"
		s := c.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Choices[0].Message.Content != "Bonjour" || acc.Choices[0].FinishReason != "stop" {
			t.Fatalf("stream %+v", acc.Choices[0])
		}
	})

	t.Run("gemini tools round trip", func(t *testing.T) {
		tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})}
		p := user("weather in Paris?")
		p.Model, p.Tools = "gemini", tools
		r, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		calls := r.Choices[0].Message.ToolCalls
		if len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris"}` || r.Choices[0].FinishReason != "tool_calls" || calls[0].ID == "" {
			t.Fatalf("tool call %+v", r.Choices[0])
		}
		p.Messages = append(p.Messages, r.Choices[0].Message.ToParam(), openai.ToolMessage(`{"temp_c":18}`, calls[0].ID))
		r, err = c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.Choices[0].Message.Content != "Bonjour" {
			t.Fatalf("after the tool result %+v", r.Choices[0])
		}
		f.mu.Lock()
		last := f.bodies[len(f.bodies)-1]
		f.mu.Unlock()
		if !strings.Contains(last, `"functionResponse":{"name":"get_weather","response":{"temp_c":18}}`) {
			t.Fatalf("upstream got %s", last)
		}

		// the same through the stream
		p.Messages = p.Messages[:1]
		s := c.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"city":"Paris"}` {
			t.Fatalf("streamed tool call %+v", acc.Choices[0].Message)
		}
	})

	t.Run("gemini for Messages and Responses clients", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/messages", strings.NewReader(
			`{"model":"gemini","max_tokens":64,"stream":true,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"messages":[{"role":"user","content":"weather in Paris?"}]}`))
		req.Header.Set("X-Api-Key", testKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"event: message_start", `"type":"tool_use"`, `"name":"get_weather"`, `"partial_json":"{\"city\":\"Paris\"}"`, `"stop_reason":"tool_use"`, "event: message_stop"} {
			if !strings.Contains(string(b), want) {
				t.Fatalf("messages stream lacks %s:\n%s", want, b)
			}
		}
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: "gemini", Instructions: openai.String("Be brief."),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.OutputText() != "Bonjour" || r.Status != "completed" || r.Usage.InputTokens != 1000 || r.Usage.InputTokensDetails.CachedTokens != 800 {
			t.Fatalf("responses %q %q %+v", r.OutputText(), r.Status, r.Usage)
		}
		s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "gemini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		})
		var text strings.Builder
		completed := false
		for s.Next() {
			ev := s.Current()
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed":
				completed = true
			}
		}
		if err := s.Err(); err != nil || !completed || text.String() != "Bonjour" {
			t.Fatalf("responses stream %q completed=%v %v", text.String(), completed, err)
		}
	})

	t.Run("gemini embeddings", func(t *testing.T) {
		e, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "gemini-emb", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Data) != 2 || e.Data[0].Embedding[0] != 0.5 || e.Data[1].Index != 1 {
			t.Fatalf("embeddings %+v", e.Data)
		}
	})

	t.Run("vertex gemini and claude", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			p := user("hello")
			p.Model = "vx-gemini"
			r, err := c.Chat.Completions.New(ctx, p)
			if err != nil || r.Choices[0].Message.Content != "Bonjour" {
				t.Fatalf("vertex gemini %v %+v", err, r)
			}
		}
		p := user("hello")
		p.Model = "vx-claude"
		s := c.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil || acc.Choices[0].Message.Content != "Claude on Vertex" {
			t.Fatalf("vertex claude stream %v %+v", err, acc.Choices)
		}
		// an Anthropic-format client of Claude on Vertex
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/messages", strings.NewReader(`{"model":"vx-claude","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Api-Key", testKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"text":"Claude on Vertex"`) {
			t.Fatalf("messages via vertex: %d %s", resp.StatusCode, b)
		}
		f.mu.Lock()
		last, bad := f.bodies[len(f.bodies)-1], f.badAuth
		f.mu.Unlock()
		if !strings.Contains(last, "/v1/projects/proj/locations/europe-west4/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict") ||
			!strings.Contains(last, `"anthropic_version":"vertex-2023-10-16"`) || strings.Contains(last, `"model"`) {
			t.Fatalf("claude request %s", last)
		}
		if len(bad) > 0 {
			t.Fatalf("requests without the right credential: %v", bad)
		}
		// one fetch for the working vertex provider; the refusing one never got a token
		if n := f.fetches.Load(); n != 1 {
			t.Fatalf("%d token fetches for 5 vertex requests, want 1", n)
		}
	})

	t.Run("refused token is 502 upstream_auth_error", func(t *testing.T) {
		p := user("hello")
		p.Model = "vx-dead"
		_, err := c.Chat.Completions.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Type != "upstream_auth_error" {
			t.Fatalf("want 502 upstream_auth_error, got %v", err)
		}
	})

	t.Run("context window walks its chain", func(t *testing.T) {
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"gemini","messages":[{"role":"user","content":"huge prompt"}]}`)
		if w.Code != 200 || w.Header().Get("X-Switchyard-Deployment") != "big" || w.Header().Get("X-Switchyard-Degraded") != "true" {
			t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
		}
	})

	t.Run("blocked prompt walks the content_policy chain", func(t *testing.T) {
		for _, stream := range []string{"false", "true"} {
			w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, `{"model":"gemini","stream":`+stream+`,"messages":[{"role":"user","content":"forbidden words"}]}`)
			if w.Code != 200 || w.Header().Get("X-Switchyard-Deployment") != "safe" {
				t.Fatalf("stream=%s: %d %v %s", stream, w.Code, w.Header(), w.Body)
			}
		}
	})
}
