package providers

import (
	"context"
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

const anthropicSync = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"Hi!"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":3}}`

// fakeAnthropic answers /v1/messages like the API: JSON, or the recorded
// tool stream when the body asks for a stream.
func fakeAnthropic(t *testing.T, got *captured) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		w.Header().Set("Request-Id", "req_ant")
		if !strings.Contains(string(got.body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, anthropicSync)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, ev := range anthropicToolStream {
			io.WriteString(w, "event: "+ev.name+"\ndata: "+ev.data+"\n\n")
			rc.Flush()
		}
	}))
}

func anthropicProvider(base string) *catalog.Provider {
	return &catalog.Provider{Provider: config.Provider{Name: "ant", Kind: KindAnthropic, BaseURL: base, APIKey: "sk-ant-provider", Headers: map[string]string{"anthropic-beta": "tools-2024"}}}
}

func TestAnthropicPassthrough(t *testing.T) {
	var got captured
	srv := fakeAnthropic(t, &got)
	defer srv.Close()
	p := anthropicProvider(srv.URL + "/v1")
	a := newAdapter(t, p)
	body := `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`
	resp, err := a.Do(context.Background(), deployment(p, "claude-up"), chatReq(t, body, wire.FormatAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	if got.path != "/v1/messages" || string(got.body) != `{"model":"claude-up","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}` {
		t.Fatalf("upstream saw %s %s", got.path, got.body)
	}
	if got.header.Get("X-Api-Key") != "sk-ant-provider" || got.header.Get("Anthropic-Version") != "2023-06-01" || got.header.Get("Anthropic-Beta") != "tools-2024" || got.header.Get("Authorization") != "" {
		t.Fatalf("headers %v", got.header)
	}
	if string(resp.Body) != anthropicSync || resp.Usage != (Usage{PromptTokens: 15, CompletionTokens: 3, CachedTokens: 5}) || resp.Header.Get("Upstream-Request-Id") != "req_ant" {
		t.Fatalf("response %+v", resp)
	}

	resp, err = a.Do(context.Background(), deployment(p, "claude-up"), chatReq(t, `{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil {
		t.Fatal(err)
	}
	assertEvents(t, parseSSE(t, all), anthropicToolStream)
	if u := resp.Stream.Usage(); u != (Usage{PromptTokens: 472, CompletionTokens: 89}) {
		t.Fatalf("stream usage %+v", u)
	}
}

func TestAnthropicForOpenAIClient(t *testing.T) {
	var got captured
	srv := fakeAnthropic(t, &got)
	defer srv.Close()
	p := anthropicProvider(srv.URL + "/v1/")
	a := newAdapter(t, p)
	resp, err := a.Do(context.Background(), deployment(p, "claude-up"), chatReq(t, `{"model":"gpt","messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got.body, `{"model":"claude-up","max_tokens":4096,"system":"S","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`)
	if resp.Usage != (Usage{PromptTokens: 15, CompletionTokens: 3, CachedTokens: 5}) || !strings.Contains(string(resp.Body), `"object":"chat.completion"`) || !strings.Contains(string(resp.Body), `"content":"Hi!"`) {
		t.Fatalf("response %s %+v", resp.Body, resp.Usage)
	}

	req := chatReq(t, `{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
	resp, err = a.Do(context.Background(), deployment(p, "claude-up"), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got.body), `"stream":true`) {
		t.Fatalf("upstream body %s", got.body)
	}
	all, err := drain(t, resp.Stream)
	if err != nil {
		t.Fatal(err)
	}
	evs := parseSSE(t, all)
	if len(evs) != 9 || evs[8].data != "[DONE]" || !strings.Contains(evs[7].data, `"prompt_tokens":472`) {
		t.Fatalf("relayed:\n%s", dumpEvents(evs))
	}
}

func TestAnthropicErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(b), "overload"):
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(529)
			io.WriteString(w, anthropicOverloaded)
		case strings.Contains(string(b), "long"):
			w.WriteHeader(400)
			io.WriteString(w, anthropicTooLong)
		default:
			w.WriteHeader(401)
			io.WriteString(w, anthropicAuth)
		}
	}))
	defer srv.Close()
	p := anthropicProvider(srv.URL)
	a := newAdapter(t, p)
	do := func(text string, f wire.Format) error {
		body := `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"` + text + `"}]}`
		_, err := a.Do(context.Background(), deployment(p, "c"), chatReq(t, body, f))
		return err
	}
	e := wantClass(t, do("overload", wire.FormatAnthropic), routing.ClassServerError)
	if e.Status != 529 || e.RetryAfter != 2*time.Second || e.Type != "overloaded_error" {
		t.Fatalf("%+v", e)
	}
	wantClass(t, do("too long", wire.FormatOpenAI), routing.ClassContextWindow)
	wantClass(t, do("hi", wire.FormatAnthropic), routing.ClassAuth)

	c := parse(t, `{"model":"e","input":"x"}`, catalog.OpEmbeddings, wire.FormatOpenAI)
	_, err := a.Do(context.Background(), deployment(p, "c"), &Request{Op: catalog.OpEmbeddings, Client: c})
	wantClass(t, err, routing.ClassBadRequest)
}

func TestAnthropicStreamCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range anthropicToolStream[:5] {
			io.WriteString(w, "event: "+ev.name+"\ndata: "+ev.data+"\n\n")
		}
	}))
	defer srv.Close()
	p := anthropicProvider(srv.URL)
	resp, err := newAdapter(t, p).Do(context.Background(), deployment(p, "c"), chatReq(t, `{"model":"c","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}`, wire.FormatAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	_, err = drain(t, resp.Stream)
	wantClass(t, err, routing.ClassNetwork)
}

// TestBaseURLCredentialsAreSent: credentials in base_url's userinfo go to
// the upstream as basic auth, as an http.Client sends them (the adapters
// call the transport directly), on every call.
func TestBaseURLCredentialsAreSent(t *testing.T) {
	var got captured
	srv := fakeAnthropic(t, &got)
	defer srv.Close()
	p := anthropicProvider(strings.Replace(srv.URL, "http://", "http://gw:s%40cret@", 1) + "/v1")
	a := newAdapter(t, p)
	for range 2 {
		if _, err := a.Do(context.Background(), deployment(p, "claude-up"), chatReq(t, `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatAnthropic)); err != nil {
			t.Fatal(err)
		}
		u, pw, ok := (&http.Request{Header: got.header}).BasicAuth()
		if !ok || u != "gw" || pw != "s@cret" || got.header.Get("X-Api-Key") != "sk-ant-provider" {
			t.Fatalf("upstream headers %v, want basic auth gw:s@cret beside the api key", got.header)
		}
	}
}
