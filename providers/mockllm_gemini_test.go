package providers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

// TestMockVertex drives the vertex adapter against `switchyard mockllm`:
// its token endpoint, Gemini models and Claude models, sync and stream.
func TestMockVertex(t *testing.T) {
	mock := httptest.NewServer(MockHandler(config.Simulate{OutputTokens: 4, ContextTokens: 100000, ErrorStatus: 503}, 7))
	defer mock.Close()
	f := newFakeGoogle(t) // only for its service-account key
	p := vertexProvider(f, "us-east5")
	p.BaseURL = mock.URL
	p.CredentialsJSON = strings.Replace(f.keyJSON(), f.srv.URL+"/token", mock.URL+"/token", 1)
	a := newVertexAdapter(t, p)
	ctx := context.Background()
	for _, model := range []string{"gemini-2.5-flash", "claude-sonnet-4@20250514"} {
		resp, err := a.Do(ctx, deployment(p, model), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"hello"}]}`, wire.FormatOpenAI))
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if resp.Usage.CompletionTokens != 4 || !strings.Contains(string(resp.Body), `"chat.completion"`) {
			t.Fatalf("%s: %s %+v", model, resp.Body, resp.Usage)
		}
		resp, err = a.Do(ctx, deployment(p, model), chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`, wire.FormatOpenAI))
		if err != nil {
			t.Fatalf("%s stream: %v", model, err)
		}
		all, err := drain(t, resp.Stream)
		if err != nil || !strings.HasSuffix(string(all), "data: [DONE]\n\n") || resp.Stream.Usage().CompletionTokens != 4 {
			t.Fatalf("%s stream: %s %v %+v", model, all, err, resp.Stream.Usage())
		}
	}
}

func TestMockGoogleSurface(t *testing.T) {
	mock := httptest.NewServer(MockHandler(config.Simulate{OutputTokens: 2, ContextTokens: 1000, ErrorRate: 1, ErrorStatus: 429}, 1))
	defer mock.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(mock.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/token", "grant_type=x"); code != 200 || !strings.Contains(body, `"access_token":"ya29.mock-1"`) {
		t.Fatalf("token: %d %s", code, body)
	}
	code, body := post("/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if code != 429 || Classify(KindGemini, code, []byte(body)) != routing.ClassRateLimited || !strings.Contains(body, `"status":"RESOURCE_EXHAUSTED"`) {
		t.Fatalf("simulated error: %d %s", code, body)
	}
	if code, body := post("/v1/projects/p/locations/l/publishers/anthropic/models/claude-x:rawPredict", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`); code != 400 || !strings.Contains(body, "anthropic_version") {
		t.Fatalf("rawPredict without anthropic_version: %d %s", code, body)
	}
	if code, _ := post("/v1beta/models/x:unknownMethod", `{}`); code != 404 {
		t.Fatalf("unknown method: %d", code)
	}
}
