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
	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

// fakeGemini speaks the Gemini API as its reference documents it
// (https://ai.google.dev/api/generate-content, .../api/embeddings): the
// fixture response for generateContent, the fixture SSE stream for
// streamGenerateContent?alt=sse, and embeddings for batchEmbedContents.
// A request whose text says "fail:" gets the error body that follows.
func fakeGemini(t *testing.T, got *captured, sync, stream string) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		if i := strings.Index(string(got.body), "fail:"); i >= 0 {
			var status int
			var body string
			switch {
			case strings.Contains(string(got.body), "fail:quota"):
				status, body = 429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`
			case strings.Contains(string(got.body), "fail:long"):
				status, body = 400, `{"error":{"code":400,"message":"The input token count (2000000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`
			default:
				status, body = 403, `{"error":{"code":403,"message":"Permission denied for key AIzaSy-provider-key-0123456789 from 10.1.2.3:443","status":"PERMISSION_DENIED"}}`
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, ":batchEmbedContents"):
			var in struct {
				Requests []json.RawMessage `json:"requests"`
			}
			json.Unmarshal(got.body, &in)
			w.Header().Set("Content-Type", "application/json")
			out := `{"embeddings":[`
			for i := range in.Requests {
				if i > 0 {
					out += ","
				}
				out += `{"values":[0.25,-0.5,1]}`
			}
			io.WriteString(w, out+`]}`)
		case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, sync)
		}
	}))
}

func geminiProvider(base string) *catalog.Provider {
	return &catalog.Provider{Provider: config.Provider{Name: "goog", Kind: KindGemini, BaseURL: base, APIKey: "AIzaSy-provider-key-0123456789"}}
}

func TestGeminiAdapterChat(t *testing.T) {
	var got captured
	srv := fakeGemini(t, &got, string(geminiFixture(t, "resp_tools.json")), string(geminiFixture(t, "stream_text.sse")))
	defer srv.Close()
	p := geminiProvider(srv.URL + "/v1beta")
	a := newAdapter(t, p)
	d := deployment(p, "gemini-2.5-pro")

	body := `{"model":"public","messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
	resp, err := a.Do(context.Background(), d, chatReq(t, body, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	if got.path != "/v1beta/models/gemini-2.5-pro:generateContent" || got.header.Get("X-Goog-Api-Key") != "AIzaSy-provider-key-0123456789" || got.header.Get("Authorization") != "" {
		t.Fatalf("upstream saw %s %v", got.path, got.header)
	}
	if !strings.Contains(string(got.body), `"functionDeclarations"`) || strings.Contains(string(got.body), `"model"`) {
		t.Fatalf("upstream body %s", got.body)
	}
	var out oaResponse
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		t.Fatal(err)
	}
	if m := out.Choices[0].Message; len(m.ToolCalls) != 2 || m.ToolCalls[0].ID == m.ToolCalls[1].ID || !strings.HasPrefix(m.ToolCalls[0].ID, "call_") ||
		m.ToolCalls[1].Function.Arguments != `{"city":"Rome"}` || *out.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("response %s", resp.Body)
	}
	if resp.Usage != (Usage{PromptTokens: 50, CompletionTokens: 20}) {
		t.Fatalf("usage %+v", resp.Usage)
	}

	// stream: alt=sse, translated event by event, usage after the end
	resp, err = a.Do(context.Background(), d, chatReq(t, `{"model":"public","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Capital?"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	if got.path != "/v1beta/models/gemini-2.5-pro:streamGenerateContent" || got.query != "alt=sse" || got.header.Get("Accept") != "text/event-stream" {
		t.Fatalf("stream upstream saw %s?%s %v", got.path, got.query, got.header)
	}
	all, err := drain(t, resp.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Stream.Ended() || !strings.HasSuffix(string(all), "data: [DONE]\n\n") || !strings.Contains(string(all), `"cached_tokens":100`) {
		t.Fatalf("stream %s", all)
	}
	if u := resp.Stream.Usage(); u != (Usage{PromptTokens: 120, CompletionTokens: 39, CachedTokens: 100, ReasoningTokens: 30}) {
		t.Fatalf("stream usage %+v", u)
	}

	// Anthropic and Responses clients
	resp, err = a.Do(context.Background(), d, chatReq(t, `{"model":"public","max_tokens":50,"messages":[{"role":"user","content":"Weather?"}]}`, wire.FormatAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Body), `"stop_reason":"tool_use"`) || !strings.Contains(string(got.body), `"maxOutputTokens":50`) {
		t.Fatalf("anthropic client: %s (sent %s)", resp.Body, got.body)
	}
	rreq := chatReq(t, `{"model":"public","input":"Weather?","stream":true}`, wire.FormatResponses)
	resp, err = a.Do(context.Background(), d, rreq)
	if err != nil {
		t.Fatal(err)
	}
	all, err = drain(t, resp.Stream)
	if err != nil {
		t.Fatal(err)
	}
	evs := parseSSE(t, all)
	if evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
		t.Fatalf("responses stream %s", dumpEvents(evs))
	}
}

func TestGeminiAdapterEmbeddings(t *testing.T) {
	var got captured
	srv := fakeGemini(t, &got, "", "")
	defer srv.Close()
	p := geminiProvider(srv.URL + "/v1beta")
	a := newAdapter(t, p)
	c := parse(t, `{"model":"public","input":["a","b"],"dimensions":3}`, catalog.OpEmbeddings, wire.FormatOpenAI)
	resp, err := a.Do(context.Background(), deployment(p, "text-embedding-004"), &Request{Op: catalog.OpEmbeddings, Client: c, PromptTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got.path != "/v1beta/models/text-embedding-004:batchEmbedContents" {
		t.Fatalf("path %s", got.path)
	}
	assertJSON(t, got.body, `{"requests":[{"model":"models/text-embedding-004","content":{"parts":[{"text":"a"}]},"outputDimensionality":3},{"model":"models/text-embedding-004","content":{"parts":[{"text":"b"}]},"outputDimensionality":3}]}`)
	assertJSON(t, resp.Body, `{"object":"list","model":"text-embedding-004","data":[{"object":"embedding","index":0,"embedding":[0.25,-0.5,1]},{"object":"embedding","index":1,"embedding":[0.25,-0.5,1]}],"usage":{"prompt_tokens":2,"completion_tokens":0,"total_tokens":2}}`)

	c = parse(t, `{"model":"public","input":"a","encoding_format":"base64"}`, catalog.OpEmbeddings, wire.FormatOpenAI)
	resp, err = a.Do(context.Background(), deployment(p, "text-embedding-004"), &Request{Op: catalog.OpEmbeddings, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Body), `"embedding":"AACAPgAAAL8AAIA/"`) {
		t.Fatalf("base64 embedding %s", resp.Body)
	}
}

func TestGeminiAdapterErrors(t *testing.T) {
	var got captured
	srv := fakeGemini(t, &got, "", "")
	defer srv.Close()
	p := geminiProvider(srv.URL)
	a := newAdapter(t, p)
	d := deployment(p, "gemini-2.5-flash")
	for _, tc := range []struct {
		text  string
		class routing.Class
	}{
		{"fail:quota", routing.ClassRateLimited},
		{"fail:long", routing.ClassContextWindow},
		{"fail:denied", routing.ClassAuth},
	} {
		for _, stream := range []bool{false, true} {
			body := `{"model":"public","messages":[{"role":"user","content":"` + tc.text + `"}]}`
			req := chatReq(t, body, wire.FormatOpenAI)
			req.Stream = stream
			_, err := a.Do(context.Background(), d, req)
			e := wantClass(t, err, tc.class)
			if strings.Contains(e.Message, "AIzaSy-provider") || strings.Contains(string(e.body), "AIzaSy-provider") || strings.Contains(e.Message, "10.1.2.3") {
				t.Fatalf("credential or address relayed: %q %s", e.Message, e.body)
			}
		}
	}
	if got.path != "/models/gemini-2.5-flash:streamGenerateContent" {
		t.Fatalf("path %s", got.path)
	}
	_, err := a.Do(context.Background(), d, &Request{Op: catalog.OpImages, Client: parse(t, `{"model":"m","prompt":"x"}`, catalog.OpImages, wire.FormatOpenAI)})
	wantClass(t, err, routing.ClassBadRequest)
}

// TestGeminiAgainstMock runs the adapter against `switchyard mockllm`'s
// Gemini paths: the mock and the adapter agree on the wire format.
func TestGeminiAgainstMock(t *testing.T) {
	srv := httptest.NewServer(MockHandler(config.Simulate{OutputTokens: 5, ContextTokens: 1000, ErrorStatus: 503, EmbeddingDims: 4, ContentPolicyWords: []string{"forbidden"}}, 1))
	defer srv.Close()
	p := geminiProvider(srv.URL + "/v1beta")
	a := newAdapter(t, p)
	d := deployment(p, "gemini-2.5-flash")
	resp, err := a.Do(context.Background(), d, chatReq(t, `{"model":"m","messages":[{"role":"user","content":"hello"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CompletionTokens != 5 || !strings.Contains(string(resp.Body), `"finish_reason":"stop"`) {
		t.Fatalf("mock sync %s %+v", resp.Body, resp.Usage)
	}
	resp, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`, wire.FormatAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil || !strings.HasSuffix(string(all), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || resp.Stream.Usage().CompletionTokens != 5 {
		t.Fatalf("mock stream %s %v %+v", all, err, resp.Stream.Usage())
	}
	_, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","messages":[{"role":"user","content":"this is forbidden"}]}`, wire.FormatOpenAI))
	wantClass(t, err, routing.ClassContentPolicy)
	_, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("long words here ", 2000)+`"}]}`, wire.FormatOpenAI))
	wantClass(t, err, routing.ClassContextWindow)
	c := parse(t, `{"model":"public","input":["a","b"]}`, catalog.OpEmbeddings, wire.FormatOpenAI)
	resp, err = a.Do(context.Background(), deployment(p, "emb"), &Request{Op: catalog.OpEmbeddings, Client: c})
	if err != nil || strings.Count(string(resp.Body), `"object":"embedding"`) != 2 {
		t.Fatalf("mock embeddings %s %v", resp.Body, err)
	}
}

func TestGeminiMethodURL(t *testing.T) {
	g := newGeminiUpstream("https://proxy.example/v1beta?tenant=a", KindGemini, httpUpstream{})
	if u := g.methodURL("models/gemini-2.5-flash", "streamGenerateContent?alt=sse"); u != "https://proxy.example/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&tenant=a" {
		t.Fatal(u)
	}
	if u := g.methodURL("tuned/x y", "generateContent"); u != "https://proxy.example/v1beta/models/tuned%2Fx%20y:generateContent?tenant=a" {
		t.Fatal(u)
	}
}

// TestGeminiUsageAnyNumber: a usageMetadata count beyond what a float64
// holds (1e400) is clamped like any absurd count (SPEC 14), in a sync
// answer and in a stream's last event: it never fails a complete answer
// nor loses the final usage.
func TestGeminiUsageAnyNumber(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want Usage
	}{
		{`{"promptTokenCount":1e400,"candidatesTokenCount":3}`, Usage{PromptTokens: MaxUsageTokens, CompletionTokens: 3}},
		{`{"promptTokenCount":7,"candidatesTokenCount":-1e400,"thoughtsTokenCount":2.5}`, Usage{PromptTokens: 7, CompletionTokens: 2, ReasoningTokens: 2}},
		{`{"promptTokenCount":7,"candidatesTokenCount":null}`, Usage{PromptTokens: 7}},
	} {
		sync := `{"candidates":[{"content":{"parts":[{"text":"hello"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":` + tc.meta + `}`
		stream := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hel\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n" +
			"data: " + sync + "\r\n\r\n"
		var got captured
		srv := fakeGemini(t, &got, sync, stream)
		p := geminiProvider(srv.URL + "/v1beta")
		a := newAdapter(t, p)
		d := deployment(p, "gemini-2.5-flash")
		resp, err := a.Do(context.Background(), d, chatReq(t, `{"model":"public","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
		if err != nil {
			t.Errorf("%s sync: %v", tc.meta, err)
		} else if resp.Usage != tc.want {
			t.Errorf("%s sync: usage %+v, want %+v", tc.meta, resp.Usage, tc.want)
		}
		resp, err = a.Do(context.Background(), d, chatReq(t, `{"model":"public","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
		if err != nil {
			t.Fatalf("%s stream: %v", tc.meta, err)
		}
		all, err := drain(t, resp.Stream)
		if err != nil || !resp.Stream.Ended() || !strings.HasSuffix(string(all), "data: [DONE]\n\n") {
			t.Errorf("%s stream: ended=%v err=%v after %q", tc.meta, resp.Stream.Ended(), err, all)
		} else if u := resp.Stream.Usage(); u != tc.want {
			t.Errorf("%s stream: usage %+v, want %+v", tc.meta, u, tc.want)
		}
		srv.Close()
	}
}
