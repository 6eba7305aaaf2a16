package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

// captured is what a fake upstream saw.
type captured struct {
	mu     sync.Mutex
	path   string
	query  string
	header http.Header
	body   []byte
}

func (c *captured) record(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.path, c.query, c.header, c.body = r.URL.Path, r.URL.RawQuery, r.Header.Clone(), b
}

func openAIProvider(base string, headers map[string]string) *catalog.Provider {
	return &catalog.Provider{Provider: config.Provider{Name: "up", Kind: KindOpenAI, BaseURL: base, APIKey: "sk-provider", Headers: headers}}
}

func newAdapter(t *testing.T, p *catalog.Provider) Adapter {
	t.Helper()
	a, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

const syncChat = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-up","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}`

func TestOpenAISyncRewritesOnlyTheModel(t *testing.T) {
	var got captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		w.Header().Set("X-Request-Id", "req_123")
		w.Header().Set("Openai-Processing-Ms", "42")
		w.Header().Set("Set-Cookie", "secret=1")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, syncChat)
	}))
	defer srv.Close()
	p := openAIProvider(srv.URL+"/openai/", map[string]string{"api-version": "2024-10-21", "OpenAI-Organization": "org-1"})
	a := newAdapter(t, p)
	body := `{"model":"public",  "messages":[{"role":"user","content":"Hello"}],"temperature":0.3,"x_extra":{"keep":[1,2]}}`
	req := chatReq(t, body, wire.FormatOpenAI)
	resp, err := a.Do(context.Background(), deployment(p, "gpt-up"), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.path != "/openai/chat/completions" || got.query != "api-version=2024-10-21" {
		t.Fatalf("path %q query %q", got.path, got.query)
	}
	want := `{"model":"gpt-up",  "messages":[{"role":"user","content":"Hello"}],"temperature":0.3,"x_extra":{"keep":[1,2]}}`
	if string(got.body) != want {
		t.Fatalf("body\n got %s\nwant %s", got.body, want)
	}
	if h := got.header.Get("Authorization"); h != "Bearer sk-provider" {
		t.Fatalf("authorization %q", h)
	}
	if got.header.Get("Openai-Organization") != "org-1" || got.header.Get("Content-Type") != "application/json" {
		t.Fatalf("provider headers missing: %v", got.header)
	}
	if string(resp.Body) != syncChat || resp.Usage != (Usage{PromptTokens: 11, CompletionTokens: 2}) || resp.Status != 200 || resp.Stream != nil {
		t.Fatalf("response %+v", resp)
	}
	if resp.Header.Get("Upstream-Request-Id") != "req_123" || resp.Header.Get("Openai-Processing-Ms") != "42" || resp.Header.Get("Set-Cookie") != "" || len(resp.Header) != 2 {
		t.Fatalf("relayed headers %v", resp.Header)
	}
	if string(req.Client.Raw) != body {
		t.Fatal("the client body must not be modified")
	}
}

func TestOpenAIEmbeddingsAndImagesEndpoints(t *testing.T) {
	var got captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]}],"model":"e","usage":{"prompt_tokens":5,"total_tokens":5}}`)
			return
		}
		io.WriteString(w, `{"created":1,"data":[{"url":"https://x/y.png"}],"usage":{"input_tokens":7,"output_tokens":100,"total_tokens":107}}`)
	}))
	defer srv.Close()
	p := openAIProvider(srv.URL+"/v1", nil)
	a := newAdapter(t, p)
	c := parse(t, `{"model":"public","input":"hello"}`, catalog.OpEmbeddings, wire.FormatOpenAI)
	resp, err := a.Do(context.Background(), deployment(p, "emb-up"), &Request{Op: catalog.OpEmbeddings, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if got.path != "/v1/embeddings" || string(got.body) != `{"model":"emb-up","input":"hello"}` || resp.Usage.PromptTokens != 5 {
		t.Fatalf("embeddings: %s %s %+v", got.path, got.body, resp.Usage)
	}
	c = parse(t, `{"model":"public","prompt":"a cat","size":"1024x1024"}`, catalog.OpImages, wire.FormatOpenAI)
	resp, err = a.Do(context.Background(), deployment(p, "img-up"), &Request{Op: catalog.OpImages, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if got.path != "/v1/images/generations" || resp.Usage != (Usage{PromptTokens: 7, CompletionTokens: 100}) {
		t.Fatalf("images: %s %+v", got.path, resp.Usage)
	}
}

// sseServer writes the given events, flushing each, after waiting on gate
// (when set) before every event but the first.
func sseServer(t *testing.T, events []string, gate chan struct{}, got *captured) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got != nil {
			got.record(r)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Request-Id", "req_s")
		rc := http.NewResponseController(w)
		for i, ev := range events {
			if i > 0 && gate != nil {
				select {
				case <-gate:
				case <-r.Context().Done():
					return
				}
			}
			io.WriteString(w, ev)
			rc.Flush()
		}
	}))
}

const chunkHead = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":`

var openAIStreamEvents = []string{
	": keep-alive\n\n",
	"data: " + chunkHead + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n",
	"data: " + chunkHead + `[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\r\n\r\n",
	"data: " + chunkHead + `[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
	"data: " + chunkHead + `[],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}` + "\n\n",
	"data: [DONE]\n\n",
}

func TestOpenAIStreamRelaysEventByEvent(t *testing.T) {
	gate := make(chan struct{})
	var got captured
	srv := sseServer(t, openAIStreamEvents[1:], gate, &got)
	defer srv.Close()
	p := openAIProvider(srv.URL, nil)
	a := newAdapter(t, p)
	req := chatReq(t, `{"model":"public","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := a.Do(ctx, deployment(p, "gpt-up"), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Stream.Close()
	// Do returned with only the first event sent: nothing was buffered ahead.
	if got.header.Get("Accept") != "text/event-stream" {
		t.Fatalf("accept %q", got.header.Get("Accept"))
	}
	if want := `{"model":"gpt-up","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`; string(got.body) != want {
		t.Fatalf("upstream body %s", got.body)
	}
	first, err := resp.Stream.Next()
	if err != nil || string(first) != openAIStreamEvents[1] {
		t.Fatalf("first event %q %v", first, err)
	}
	var relayed []byte
	for range 4 {
		gate <- struct{}{}
	}
	relayed, err = drain(t, resp.Stream)
	if err != nil {
		t.Fatal(err)
	}
	evs := parseSSE(t, relayed)
	if len(evs) != 3 || evs[2].data != "[DONE]" || strings.Contains(string(relayed), `"usage"`) {
		t.Fatalf("relayed (usage chunk must be stripped):\n%s", relayed)
	}
	if u := resp.Stream.Usage(); u != (Usage{PromptTokens: 8, CompletionTokens: 1}) {
		t.Fatalf("usage %+v", u)
	}
	if resp.Header.Get("Upstream-Request-Id") != "req_s" || resp.TTFB <= 0 {
		t.Fatalf("header %v ttfb %v", resp.Header, resp.TTFB)
	}
	closeOnce, closeTwice := resp.Stream.Close(), resp.Stream.Close()
	if closeOnce != nil || closeTwice != nil {
		t.Fatalf("close twice: %v, %v", closeOnce, closeTwice)
	}
}

func TestOpenAIStreamKeepsUsageChunkWhenAsked(t *testing.T) {
	srv := sseServer(t, openAIStreamEvents, nil, nil)
	defer srv.Close()
	p := openAIProvider(srv.URL, nil)
	req := chatReq(t, `{"model":"public","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
	resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "gpt-up"), req)
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil {
		t.Fatal(err)
	}
	evs := parseSSE(t, all)
	if len(evs) != 5 || !strings.Contains(evs[3].data, `"usage"`) {
		t.Fatalf("relayed:\n%s", all)
	}
}

func TestOpenAIStreamFailures(t *testing.T) {
	p := openAIProvider("", nil)
	req := func() *Request {
		return chatReq(t, `{"model":"public","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
	}

	t.Run("error event mid-stream", func(t *testing.T) {
		srv := sseServer(t, []string{openAIStreamEvents[1], `data: {"error":{"message":"The server had an error","type":"server_error"}}` + "\n\n"}, nil, nil)
		defer srv.Close()
		p.BaseURL = srv.URL
		resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), req())
		if err != nil {
			t.Fatal(err)
		}
		_, err = drain(t, resp.Stream)
		wantClass(t, err, routing.ClassServerError)
	})

	t.Run("connection cut mid-event", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, openAIStreamEvents[1])
			http.NewResponseController(w).Flush()
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err == nil {
				buf.Flush()
				conn.Close()
			}
		}))
		defer srv.Close()
		p.BaseURL = srv.URL
		resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), req())
		if err != nil {
			t.Fatal(err)
		}
		_, err = drain(t, resp.Stream)
		wantClass(t, err, routing.ClassNetwork)
	})

	t.Run("clean end without DONE is completed", func(t *testing.T) {
		srv := sseServer(t, openAIStreamEvents[1:4], nil, nil)
		defer srv.Close()
		p.BaseURL = srv.URL
		resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), req())
		if err != nil {
			t.Fatal(err)
		}
		all, err := drain(t, resp.Stream)
		if err != nil || !bytes.HasSuffix(all, []byte("data: [DONE]\n\n")) {
			t.Fatalf("%v %q", err, all)
		}
	})

	t.Run("empty stream fails in Do", func(t *testing.T) {
		srv := sseServer(t, nil, nil, nil)
		defer srv.Close()
		p.BaseURL = srv.URL
		_, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), req())
		if err == nil {
			t.Fatal("want an error")
		}
	})

	t.Run("cancel while waiting for the next event", func(t *testing.T) {
		gate := make(chan struct{})
		defer close(gate)
		srv := sseServer(t, openAIStreamEvents[1:], gate, nil)
		defer srv.Close()
		p.BaseURL = srv.URL
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := newAdapter(t, p).Do(ctx, deployment(p, "m"), req())
		if err != nil {
			t.Fatal(err)
		}
		resp.Stream.Next() // the buffered first event
		cancel()
		_, err = resp.Stream.Next()
		wantClass(t, err, routing.ClassCanceled)
		resp.Stream.Close()
	})
}

func TestOpenAIErrors(t *testing.T) {
	handler := func(status int, body string, h map[string]string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for k, v := range h {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	tests := []struct {
		name       string
		h          http.HandlerFunc
		class      routing.Class
		retryAfter time.Duration
		code       string
	}{
		{"429 with Retry-After", handler(429, openAIRateLimit, map[string]string{"Retry-After": "3"}), routing.ClassRateLimited, 3 * time.Second, "rate_limit_exceeded"},
		{"429 with retry-after-ms", handler(429, openAIRateLimit, map[string]string{"retry-after-ms": "250"}), routing.ClassRateLimited, 250 * time.Millisecond, "rate_limit_exceeded"},
		{"context window", handler(400, openAIContextLength, nil), routing.ClassContextWindow, 0, "context_length_exceeded"},
		{"azure content filter", handler(400, azureContentFilter, nil), routing.ClassContentPolicy, 0, "content_filter"},
		{"auth", handler(401, openAIInvalidKey, nil), routing.ClassAuth, 0, "invalid_api_key"},
		{"5xx", handler(502, "<html>bad gateway</html>", nil), routing.ClassServerError, 0, ""},
		{"redirect is not followed", handler(302, "", map[string]string{"Location": "https://elsewhere.example/"}), routing.ClassServerError, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.h)
			defer srv.Close()
			p := openAIProvider(srv.URL, nil)
			_, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), chatReq(t, `{"model":"x","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
			e := wantClass(t, err, tt.class)
			if e.RetryAfter != tt.retryAfter || e.Code != tt.code || e.Status == 0 {
				t.Fatalf("got %+v", e)
			}
		})
	}

	t.Run("deadline before headers", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		p := openAIProvider(srv.URL, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := newAdapter(t, p).Do(ctx, deployment(p, "m"), chatReq(t, `{"model":"x","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
		wantClass(t, err, routing.ClassTimeout)
	})

	t.Run("client cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // so the server notices the client leaving
			cancel()
			<-r.Context().Done()
		}))
		defer srv.Close()
		p := openAIProvider(srv.URL, nil)
		_, err := newAdapter(t, p).Do(ctx, deployment(p, "m"), chatReq(t, `{"model":"x","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
		wantClass(t, err, routing.ClassCanceled)
	})

	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		p := openAIProvider(url, nil)
		_, err := newAdapter(t, p).Do(context.Background(), deployment(p, "m"), chatReq(t, `{"model":"x","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
		e := wantClass(t, err, routing.ClassNetwork)
		if strings.Contains(e.Message, url) {
			t.Fatalf("message leaks the URL: %q", e.Message)
		}
	})
}

func TestOpenAIBody(t *testing.T) {
	tests := []struct {
		name, in string
		stream   bool
		want     string
	}{
		{"sync unchanged but model", `{"model":"a","messages":[]}`, false, `{"model":"m\"x","messages":[]}`},
		{"sync drops a stray stream flag", `{"model":"a","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, false, `{"model":"m\"x","stream":false,"messages":[]}`},
		{"stream without options", `{"model":"a","stream":true,"messages":[]}`, true, `{"stream_options":{"include_usage":true},"model":"m\"x","stream":true,"messages":[]}`},
		{"stream forced on", `{"model":"a","messages":[]}`, true, `{"stream_options":{"include_usage":true},"stream":true,"model":"m\"x","messages":[]}`},
		// a body naming the model twice, or escaped, or in another case: the
		// gateway routed on the last (encoding/json), a parser upstream that
		// reads the last must not get the client's name instead of the
		// deployment's (a public name mapped to a cheaper upstream model
		// would otherwise reach the upstream as itself)
		{"one model however named", `{"model":"a","messages":[],"model":"gpt-4o","mod\u0065l":"b","MODEL":"c"}`, false, `{"model":"m\"x","messages":[]}`},
		{"one stream flag", `{"model":"a","stream":false,"messages":[],"stream":true,"Stream_Options":{}}`, true, `{"model":"m\"x","stream":true,"messages":[],"stream_options":{"include_usage":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := openAIBody([]byte(tt.in), `m"x`, catalog.OpChat, tt.stream)
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatal("invalid JSON")
			}
		})
	}
}

func TestNewRejectsBadProviders(t *testing.T) {
	for _, p := range []config.Provider{
		{Name: "x", Kind: "bogus"},
		{Name: "x", Kind: KindOpenAI, BaseURL: "ftp://host"},
		{Name: "x", Kind: KindAnthropic, BaseURL: "::"},
	} {
		if _, err := New(&catalog.Provider{Provider: p}); err == nil {
			t.Errorf("New(%+v) accepted", p)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) accepted")
	}
}

// TestAnthropicBodyOneModel: the Anthropic pass-through writes the
// deployment's model once, whatever other spellings of the key the client
// sent (TestOpenAIBody's case), and the stream flag the gateway decided.
func TestAnthropicBodyOneModel(t *testing.T) {
	for _, tc := range []struct {
		in     string
		stream bool
		want   string
	}{
		{`{"model":"a","max_tokens":5,"model":"claude-opus","mod\u0065l":"b"}`, false, `{"model":"up","max_tokens":5}`},
		{`{"model":"a","stream":false,"stream":true}`, true, `{"model":"up","stream":true}`},
		{`{"model":"a", "messages":[]}`, false, `{"model":"up", "messages":[]}`},
	} {
		got := anthropicBody([]byte(tc.in), "up", tc.stream)
		if string(got) != tc.want {
			t.Errorf("anthropicBody(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
