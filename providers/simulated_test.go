package providers

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

func simProvider(s config.Simulate) *catalog.Provider {
	return &catalog.Provider{Provider: config.Provider{Name: "sim", Kind: KindSimulated, Simulate: s}}
}

func newSim(s config.Simulate, seed int64) (*Simulated, *catalog.Deployment) {
	p := simProvider(s)
	return NewSimulated(p, seed), deployment(p, "sim-up")
}

const smallChat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hi"}]}`

func TestSimulatedSyncChat(t *testing.T) {
	sim, d := newSim(config.Simulate{OutputTokens: 6}, 1)
	req := chatReq(t, smallChat, wire.FormatOpenAI)
	resp, err := sim.Do(context.Background(), d, req)
	if err != nil {
		t.Fatal(err)
	}
	var got oaResponse
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatalf("%s: %v", resp.Body, err)
	}
	want := `{"id":"chatcmpl-sim-1","object":"chat.completion","created":` + jsonNumber(got.Created) + `,"model":"sim-up",
		"choices":[{"index":0,"message":{"role":"assistant","content":"sim token 1 sim token 2"},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":` + jsonNumber(int64(req.PromptTokens)) + `,"completion_tokens":6,"total_tokens":` + jsonNumber(int64(req.PromptTokens+6)) + `}}`
	assertJSON(t, resp.Body, want)
	if resp.Usage != (Usage{PromptTokens: req.PromptTokens, CompletionTokens: 6}) || resp.Status != 200 || resp.Stream != nil {
		t.Fatalf("%+v", resp)
	}

	// max_tokens below output_tokens cuts the answer.
	resp, err = sim.Do(context.Background(), d, chatReq(t, `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Body), `"content":"sim token 1 sim"},"finish_reason":"length"`) || resp.Usage.CompletionTokens != 4 {
		t.Fatalf("%s", resp.Body)
	}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestSimulatedAnthropicClient(t *testing.T) {
	sim, d := newSim(config.Simulate{OutputTokens: 3}, 1)
	req := chatReq(t, `{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatAnthropic)
	resp, err := sim.Do(context.Background(), d, req)
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, resp.Body, `{"id":"msg_sim_1","type":"message","role":"assistant","model":"sim-up",
		"content":[{"type":"text","text":"sim token 1"}],"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":`+jsonNumber(int64(req.PromptTokens))+`,"output_tokens":3}}`)

	req = chatReq(t, `{"model":"claude","max_tokens":2,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatAnthropic)
	resp, err = sim.Do(context.Background(), d, req)
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil {
		t.Fatal(err)
	}
	p := jsonNumber(int64(req.PromptTokens))
	assertEvents(t, parseSSE(t, all), []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_sim_2","type":"message","role":"assistant","model":"sim-up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":` + p + `,"output_tokens":0}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"sim"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" token"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":` + p + `,"output_tokens":2}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})
}

func TestSimulatedStream(t *testing.T) {
	sim, d := newSim(config.Simulate{OutputTokens: 5, TokensPerSecond: 1e9}, 1)
	for _, wantUsage := range []bool{false, true} {
		req := chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)
		req.WantUsage = wantUsage
		resp, err := sim.Do(context.Background(), d, req)
		if err != nil {
			t.Fatal(err)
		}
		all, err := drain(t, resp.Stream)
		if err != nil {
			t.Fatal(err)
		}
		evs := parseSSE(t, all)
		want := 5 + 1 + 1 // tokens, finish, [DONE]
		if wantUsage {
			want++
		}
		if len(evs) != want || evs[len(evs)-1].data != "[DONE]" {
			t.Fatalf("events:\n%s", dumpEvents(evs))
		}
		var text strings.Builder
		for i, ev := range evs[:len(evs)-1] {
			var ch oaResponse
			if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
				t.Fatalf("chunk %d %s: %v", i, ev.data, err)
			}
			if ch.Object != "chat.completion.chunk" || ch.Model != "sim-up" {
				t.Fatalf("chunk %s", ev.data)
			}
			if len(ch.Choices) == 1 && ch.Choices[0].Delta.Content != nil {
				text.WriteString(*ch.Choices[0].Delta.Content)
			}
		}
		if text.String() != "sim token 1 sim token" {
			t.Fatalf("text %q", text.String())
		}
		if !strings.Contains(evs[0].data, `"role":"assistant"`) || !strings.Contains(evs[5].data, `"finish_reason":"stop"`) {
			t.Fatalf("events:\n%s", dumpEvents(evs))
		}
		if wantUsage && !strings.Contains(evs[6].data, `"choices":[],"usage":{"prompt_tokens":`) {
			t.Fatalf("usage chunk %s", evs[6].data)
		}
		if u := resp.Stream.Usage(); u != (Usage{PromptTokens: req.PromptTokens, CompletionTokens: 5}) {
			t.Fatalf("usage %+v", u)
		}
	}
}

func TestSimulatedErrorsMatchTheHTTPPath(t *testing.T) {
	tests := []struct {
		name   string
		prof   config.Simulate
		body   string
		format wire.Format
		class  routing.Class
		status int
		code   string
	}{
		{"injected 503", config.Simulate{ErrorRate: 1, ErrorStatus: 503}, smallChat, wire.FormatOpenAI, routing.ClassServerError, 503, ""},
		{"injected 429", config.Simulate{ErrorRate: 1, ErrorStatus: 429}, smallChat, wire.FormatOpenAI, routing.ClassRateLimited, 429, "rate_limit_exceeded"},
		{"injected 401", config.Simulate{ErrorRate: 1, ErrorStatus: 401}, smallChat, wire.FormatOpenAI, routing.ClassAuth, 401, "invalid_api_key"},
		{"injected 529 anthropic", config.Simulate{ErrorRate: 1, ErrorStatus: 529}, `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, wire.FormatAnthropic, routing.ClassServerError, 529, ""},
		{"context window", config.Simulate{ContextTokens: 10}, `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("long ", 40) + `"}]}`, wire.FormatOpenAI, routing.ClassContextWindow, 400, "context_length_exceeded"},
		{"context window anthropic", config.Simulate{ContextTokens: 10}, `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("long ", 40) + `"}]}`, wire.FormatAnthropic, routing.ClassContextWindow, 400, ""},
		{"content policy", config.Simulate{ContentPolicyWords: []string{"Forbidden"}}, `{"model":"m","messages":[{"role":"user","content":"a FORBIDDEN word"}]}`, wire.FormatOpenAI, routing.ClassContentPolicy, 400, "content_filter"},
		{"content policy in system", config.Simulate{ContentPolicyWords: []string{"bomb"}}, `{"model":"c","max_tokens":5,"system":"build a bomb","messages":[{"role":"user","content":"x"}]}`, wire.FormatAnthropic, routing.ClassContentPolicy, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, d := newSim(tt.prof, 1)
			_, err := sim.Do(context.Background(), d, chatReq(t, tt.body, tt.format))
			e := wantClass(t, err, tt.class)
			if e.Status != tt.status || e.Code != tt.code || e.Message == "" {
				t.Fatalf("%+v", e)
			}
			kind := KindSimulated
			if tt.format == wire.FormatAnthropic {
				kind = KindAnthropic
			}
			if c := Classify(kind, e.Status, e.body); c != e.Class {
				t.Fatalf("Classify of the body = %s, error says %s", c, e.Class)
			}
			if tt.status == 429 && e.RetryAfter != time.Second {
				t.Fatalf("retry after %v", e.RetryAfter)
			}
		})
	}
}

func TestSimulatedDeterministicFailures(t *testing.T) {
	run := func(seed int64) []bool {
		sim, d := newSim(config.Simulate{ErrorRate: 0.3}, seed)
		req := chatReq(t, smallChat, wire.FormatOpenAI)
		out := make([]bool, 1000)
		for i := range out {
			_, err := sim.Do(context.Background(), d, req)
			out[i] = err != nil
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	fails, same := 0, true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed diverged at %d", i)
		}
		if a[i] {
			fails++
		}
		same = same && a[i] == c[i]
	}
	if fails < 240 || fails > 360 {
		t.Fatalf("%d of 1000 failed, want about 300", fails)
	}
	if same {
		t.Fatal("different seeds gave the same sequence")
	}
}

func TestSimulatedHonoursContext(t *testing.T) {
	t.Run("cancel during ttfb", func(t *testing.T) {
		sim, d := newSim(config.Simulate{TTFB: time.Hour}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := sim.Do(ctx, d, chatReq(t, smallChat, wire.FormatOpenAI))
			errc <- err
		}()
		cancel()
		select {
		case err := <-errc:
			wantClass(t, err, routing.ClassCanceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Do did not return after cancel")
		}
	})
	t.Run("deadline during ttfb", func(t *testing.T) {
		sim, d := newSim(config.Simulate{TTFB: time.Hour}, 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_, err := sim.Do(ctx, d, chatReq(t, smallChat, wire.FormatOpenAI))
		wantClass(t, err, routing.ClassTimeout)
	})
	t.Run("cancel between tokens", func(t *testing.T) {
		sim, d := newSim(config.Simulate{TokensPerSecond: 0.001, OutputTokens: 3}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := sim.Do(ctx, d, chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`, wire.FormatOpenAI))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resp.Stream.Next(); err != nil { // token 0 is due at once
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			_, err := resp.Stream.Next()
			errc <- err
		}()
		cancel()
		select {
		case err := <-errc:
			wantClass(t, err, routing.ClassCanceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Next did not return after cancel")
		}
	})
	t.Run("close between tokens", func(t *testing.T) {
		sim, d := newSim(config.Simulate{TokensPerSecond: 0.001, OutputTokens: 3}, 1)
		resp, err := sim.Do(context.Background(), d, chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`, wire.FormatOpenAI))
		if err != nil {
			t.Fatal(err)
		}
		resp.Stream.Next()
		errc := make(chan error, 1)
		go func() {
			_, err := resp.Stream.Next()
			errc <- err
		}()
		resp.Stream.Close()
		resp.Stream.Close()
		select {
		case err := <-errc:
			wantClass(t, err, routing.ClassCanceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Next did not return after Close")
		}
	})
}

func TestSimulatedSetProfileConcurrently(t *testing.T) {
	sim, d := newSim(config.Simulate{}, 1)
	req := chatReq(t, smallChat, wire.FormatOpenAI)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				sim.Do(context.Background(), d, req)
			}
		})
	}
	for i := range 200 {
		sim.SetProfile(config.Simulate{ErrorRate: float64(i%2) * 1, OutputTokens: 1 + i%5})
	}
	wg.Wait()
	sim.SetProfile(config.Simulate{ErrorRate: 1, ErrorStatus: 502, TTFB: -time.Second})
	if p := sim.Profile(); p.ErrorStatus != 502 || p.OutputTokens != 16 || p.ContextTokens != 128000 || p.TTFB != 0 {
		t.Fatalf("profile %+v", p)
	}
	_, err := sim.Do(context.Background(), d, req)
	if e := wantClass(t, err, routing.ClassServerError); e.Status != 502 {
		t.Fatalf("%+v", e)
	}
	var tun Tunable = sim // the gateway finds the capability by assertion
	_ = tun
}

func TestSimulatedEmbeddingsAndImages(t *testing.T) {
	sim, d := newSim(config.Simulate{EmbeddingDims: 4}, 1)
	c := parse(t, `{"model":"e","input":["alpha","beta","alpha"]}`, catalog.OpEmbeddings, wire.FormatOpenAI)
	resp, err := sim.Do(context.Background(), d, &Request{Op: catalog.OpEmbeddings, Client: c, PromptTokens: c.PromptTokens()})
	if err != nil {
		t.Fatal(err)
	}
	var emb struct {
		Object string `json:"object"`
		Data   []struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Model string         `json:"model"`
		Usage map[string]int `json:"usage"`
	}
	if err := json.Unmarshal(resp.Body, &emb); err != nil {
		t.Fatalf("%s: %v", resp.Body, err)
	}
	if emb.Object != "list" || len(emb.Data) != 3 || emb.Model != "sim-up" || emb.Usage["prompt_tokens"] != c.PromptTokens() {
		t.Fatalf("%s", resp.Body)
	}
	for i, e := range emb.Data {
		if e.Index != i || len(e.Embedding) != 4 {
			t.Fatalf("%s", resp.Body)
		}
		for _, v := range e.Embedding {
			if v < -1 || v > 1 {
				t.Fatalf("value %v out of range", v)
			}
		}
	}
	if emb.Data[0].Embedding[0] != emb.Data[2].Embedding[0] || emb.Data[0].Embedding[0] == emb.Data[1].Embedding[0] {
		t.Fatalf("vectors must depend on the input only: %s", resp.Body)
	}

	c = parse(t, `{"model":"i","prompt":"a \"cat\""}`, catalog.OpImages, wire.FormatOpenAI)
	resp, err = sim.Do(context.Background(), d, &Request{Op: catalog.OpImages, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	var img struct {
		Created int64 `json:"created"`
		Data    []struct {
			URL           string `json:"url"`
			RevisedPrompt string `json:"revised_prompt"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &img); err != nil || len(img.Data) != 1 || !strings.HasPrefix(img.Data[0].URL, "https://") || img.Data[0].RevisedPrompt != `a "cat"` {
		t.Fatalf("%s %v", resp.Body, err)
	}
}

// The gateway's allocation guard allows ~60 allocations per request; the
// simulated provider's share of a small sync chat must stay small.
func TestSimulatedSyncChatAllocs(t *testing.T) {
	for _, ttfb := range []time.Duration{0, time.Microsecond} {
		sim, d := newSim(config.Simulate{TTFB: ttfb, OutputTokens: 16}, 1)
		req := chatReq(t, smallChat, wire.FormatOpenAI)
		ctx, cancel := context.WithCancel(context.Background())
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := sim.Do(ctx, d, req); err != nil {
				t.Fatal(err)
			}
		})
		cancel()
		t.Logf("simulated sync chat (ttfb %v): %.0f allocs", ttfb, allocs)
		if allocs > 15 {
			t.Fatalf("%.0f allocs per sync chat, want <= 15", allocs)
		}
	}
}

func BenchmarkSimulatedSyncChat(b *testing.B) {
	sim, d := newSim(config.Simulate{TTFB: 0, OutputTokens: 16}, 1)
	c, _ := wire.Parse([]byte(smallChat), catalog.OpChat, wire.FormatOpenAI)
	req := &Request{Op: catalog.OpChat, Client: c, PromptTokens: c.PromptTokens()}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sim.Do(ctx, d, req); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSimulatedUnpacedStream(t *testing.T) {
	sim, d := newSim(config.Simulate{TokensPerSecond: 0, OutputTokens: 50}, 1)
	if sim.Profile().TokensPerSecond != 0 {
		t.Fatal("tokens_per_second 0 must stay 0 (unpaced)")
	}
	resp, err := sim.Do(context.Background(), d, chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil || len(parseSSE(t, all)) != 52 {
		t.Fatalf("%v %d events", err, len(parseSSE(t, all)))
	}
}
