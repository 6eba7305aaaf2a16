package providers

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

func mockServer(t *testing.T, prof config.Simulate) (*httptest.Server, *MockServer) {
	t.Helper()
	h := MockHandler(prof, 1)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h.(*MockServer)
}

func TestMockDrivenByOpenAIAdapter(t *testing.T) {
	srv, _ := mockServer(t, config.Simulate{TTFB: time.Millisecond, TokensPerSecond: 1e6, OutputTokens: 6})
	p := openAIProvider(srv.URL+"/v1", nil)
	a := newAdapter(t, p)
	d := deployment(p, "mock-model")

	t.Run("sync", func(t *testing.T) {
		req := chatReq(t, smallChat, wire.FormatOpenAI)
		resp, err := a.Do(context.Background(), d, req)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp.Body), `"model":"mock-model"`) || !strings.Contains(string(resp.Body), `"content":"sim token 1 sim token 2"`) {
			t.Fatalf("%s", resp.Body)
		}
		if resp.Usage != (Usage{PromptTokens: req.PromptTokens, CompletionTokens: 6}) {
			t.Fatalf("usage %+v want prompt %d", resp.Usage, req.PromptTokens)
		}
		if resp.Header.Get("Upstream-Request-Id") == "" || resp.TTFB < time.Millisecond {
			t.Fatalf("headers %v ttfb %v", resp.Header, resp.TTFB)
		}
	})

	t.Run("stream strips usage but records it", func(t *testing.T) {
		req := chatReq(t, `{"model":"x","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
		resp, err := a.Do(context.Background(), d, req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Stream.Close()
		all, err := drain(t, resp.Stream)
		if err != nil {
			t.Fatal(err)
		}
		evs := parseSSE(t, all)
		if len(evs) != 8 || evs[7].data != "[DONE]" || strings.Contains(string(all), `"usage"`) {
			t.Fatalf("relayed:\n%s", dumpEvents(evs))
		}
		if u := resp.Stream.Usage(); u != (Usage{PromptTokens: req.PromptTokens, CompletionTokens: 6}) {
			t.Fatalf("usage %+v", u)
		}
	})

	t.Run("anthropic client through the openai adapter", func(t *testing.T) {
		req := chatReq(t, `{"model":"c","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatAnthropic)
		resp, err := a.Do(context.Background(), d, req)
		if err != nil {
			t.Fatal(err)
		}
		all, err := drain(t, resp.Stream)
		if err != nil {
			t.Fatal(err)
		}
		evs := parseSSE(t, all)
		names := make([]string, len(evs))
		for i, e := range evs {
			names[i] = e.name
		}
		want := "message_start content_block_start " + strings.Repeat("content_block_delta ", 6) + "content_block_stop message_delta message_stop"
		if strings.Join(names, " ") != want {
			t.Fatalf("events:\n%s", dumpEvents(evs))
		}
		if !strings.Contains(evs[len(evs)-2].data, `"output_tokens":6`) {
			t.Fatalf("message_delta %s", evs[len(evs)-2].data)
		}
	})

	t.Run("embeddings and images", func(t *testing.T) {
		c := parse(t, `{"model":"e","input":["a","b"]}`, catalog.OpEmbeddings, wire.FormatOpenAI)
		resp, err := a.Do(context.Background(), d, &Request{Op: catalog.OpEmbeddings, Client: c})
		if err != nil || strings.Count(string(resp.Body), `"object":"embedding"`) != 2 {
			t.Fatalf("%v %s", err, resp.Body)
		}
		c = parse(t, `{"model":"i","prompt":"cat"}`, catalog.OpImages, wire.FormatOpenAI)
		resp, err = a.Do(context.Background(), d, &Request{Op: catalog.OpImages, Client: c})
		if err != nil || !strings.Contains(string(resp.Body), `"url":"https://`) {
			t.Fatalf("%v %s", err, resp.Body)
		}
	})
}

func TestMockErrorsThroughAdapters(t *testing.T) {
	srv, mock := mockServer(t, config.Simulate{TTFB: 0, ErrorRate: 1, ErrorStatus: 429})
	p := openAIProvider(srv.URL+"/v1", nil)
	a := newAdapter(t, p)
	d := deployment(p, "m")
	_, err := a.Do(context.Background(), d, chatReq(t, smallChat, wire.FormatOpenAI))
	if e := wantClass(t, err, routing.ClassRateLimited); e.RetryAfter != time.Second || e.Code != "rate_limit_exceeded" {
		t.Fatalf("%+v", e)
	}

	mock.SetProfile(config.Simulate{ContextTokens: 5})
	_, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("word ", 50)+`"}]}`, wire.FormatOpenAI))
	wantClass(t, err, routing.ClassContextWindow)

	mock.SetProfile(config.Simulate{ContentPolicyWords: []string{"nope"}})
	_, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","messages":[{"role":"user","content":"nope"}]}`, wire.FormatOpenAI))
	wantClass(t, err, routing.ClassContentPolicy)

	// The anthropic adapter against /v1/messages sees Anthropic error shapes.
	ap := anthropicProvider(srv.URL + "/v1")
	an := newAdapter(t, ap)
	mock.SetProfile(config.Simulate{ErrorRate: 1, ErrorStatus: 529})
	_, err = an.Do(context.Background(), deployment(ap, "c"), chatReq(t, `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, wire.FormatAnthropic))
	if e := wantClass(t, err, routing.ClassServerError); e.Type != "overloaded_error" || e.Status != 529 {
		t.Fatalf("%+v", e)
	}
	mock.SetProfile(config.Simulate{ContextTokens: 5})
	_, err = an.Do(context.Background(), deployment(ap, "c"), chatReq(t, `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"`+strings.Repeat("word ", 50)+`"}]}`, wire.FormatOpenAI))
	wantClass(t, err, routing.ClassContextWindow)
}

func TestMockAnthropicEndpoint(t *testing.T) {
	srv, _ := mockServer(t, config.Simulate{TTFB: 0, TokensPerSecond: 1e6, OutputTokens: 4})
	ap := anthropicProvider(srv.URL + "/v1")
	an := newAdapter(t, ap)
	d := deployment(ap, "claude-mock")
	resp, err := an.Do(context.Background(), d, chatReq(t, `{"model":"c","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Body), `"model":"claude-mock"`) || resp.Usage.CompletionTokens != 4 {
		t.Fatalf("%s", resp.Body)
	}
	// An OpenAI client streaming from the Anthropic endpoint, translated.
	req := chatReq(t, `{"model":"g","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
	resp, err = an.Do(context.Background(), d, req)
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil {
		t.Fatal(err)
	}
	evs := parseSSE(t, all)
	// role, 4 tokens, finish, usage, [DONE]
	if len(evs) != 8 || !strings.Contains(evs[6].data, `"completion_tokens":4`) || evs[7].data != "[DONE]" {
		t.Fatalf("relayed:\n%s", dumpEvents(evs))
	}
}

func TestMockHTTPSurface(t *testing.T) {
	srv, _ := mockServer(t, config.Simulate{TTFB: 0})
	get := func(method, path, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get("GET", "/healthz", ""); resp.StatusCode != 200 || body != "ok\n" {
		t.Fatalf("healthz %d %q", resp.StatusCode, body)
	}
	if resp, body := get("POST", "/v1/nope", "{}"); resp.StatusCode != 404 || !strings.Contains(body, `"error":{"message"`) {
		t.Fatalf("unknown path %d %s", resp.StatusCode, body)
	}
	if resp, _ := get("GET", "/v1/chat/completions", ""); resp.StatusCode != 405 {
		t.Fatalf("GET chat %d", resp.StatusCode)
	}
	if resp, body := get("POST", "/v1/chat/completions", `{"model":`); resp.StatusCode != 400 || !strings.Contains(body, "not valid JSON") {
		t.Fatalf("bad json %d %s", resp.StatusCode, body)
	}
	if resp, body := get("POST", "/v1/messages", `{"model":"c","messages":[{"role":"user","content":"x"}]}`); resp.StatusCode != 400 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "max_tokens") {
		t.Fatalf("anthropic missing max_tokens %d %s", resp.StatusCode, body)
	}
	resp, body := get("POST", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream %v %q", resp.Header, body)
	}
}

func TestMockFlags(t *testing.T) {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	read := MockFlags(fs)
	if err := fs.Parse([]string{"-ttfb", "5ms", "-tps", "100", "-error-rate", "0.25", "-error-status", "429", "-context-tokens", "4096", "-output-tokens", "32", "-content-policy-words", "a, b,"}); err != nil {
		t.Fatal(err)
	}
	p, err := read()
	if err != nil {
		t.Fatal(err)
	}
	want := config.Simulate{TTFB: 5 * time.Millisecond, TokensPerSecond: 100, ErrorRate: 0.25, ErrorStatus: 429, ContextTokens: 4096, OutputTokens: 32, EmbeddingDims: 8, ContentPolicyWords: []string{"a", "b"}}
	if p.TTFB != want.TTFB || p.TokensPerSecond != want.TokensPerSecond || p.ErrorRate != want.ErrorRate || p.ErrorStatus != want.ErrorStatus ||
		p.ContextTokens != want.ContextTokens || p.OutputTokens != want.OutputTokens || p.EmbeddingDims != 8 || strings.Join(p.ContentPolicyWords, ",") != "a,b" {
		t.Fatalf("got %+v", p)
	}

	fs = flag.NewFlagSet("mockllm", flag.ContinueOnError)
	read = MockFlags(fs)
	fs.Parse([]string{"-error-rate", "2", "-error-status", "200"})
	if _, err := read(); err == nil || !strings.Contains(err.Error(), "-error-rate") || !strings.Contains(err.Error(), "-error-status") {
		t.Fatalf("want both problems named, got %v", err)
	}
}
