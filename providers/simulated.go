package providers

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/wire"
)

// Simulated is the in-process fake provider of SPEC 10. It answers from a
// config.Simulate profile: it waits the time to first byte, fails an
// error_rate share of requests with error_status, rejects prompts estimated
// above context_tokens (context_length_exceeded) and prompts containing a
// content_policy_words entry (content_filter), and otherwise returns
// deterministic text ("sim token 1 sim token 2 ..."), streamed at
// tokens_per_second. Its errors are the same *Error values the HTTP path
// builds from the same bodies, so routing cannot tell them apart.
//
// The profile can be swapped at runtime (SetProfile); the random source is
// per adapter and seeded (NewSimulated), so a run is reproducible.
type Simulated struct {
	// immutable after construction
	name string

	// prof is replaced whole by SetProfile; each request loads it once.
	prof atomic.Pointer[simProfile]
	// rng is the state of a splitmix64 sequence: lock-free, deterministic
	// for a given seed and order of draws.
	rng atomic.Uint64
	// seq numbers response ids.
	seq atomic.Uint64
	// timers recycles the TTFB timers so the hot path does not allocate one.
	timers sync.Pool
}

// simProfile is a normalized profile with what the hot path derives from it.
type simProfile struct {
	config.Simulate
	words    []string      // content_policy_words, lowercased, empty ones dropped
	interval time.Duration // time between streamed tokens; 0 = unpaced
}

// NewSimulated returns the simulated adapter of p (its Simulate profile),
// drawing its failures from a source seeded with seed.
func NewSimulated(p *catalog.Provider, seed int64) *Simulated {
	s := &Simulated{name: p.Name}
	s.rng.Store(uint64(seed))
	s.SetProfile(p.Simulate)
	return s
}

// SetProfile replaces the profile for every later request (a stream already
// started keeps its pace). A zero ttfb, error_rate or tokens_per_second is
// meaningful (no wait, no failures, unpaced stream); the other zero fields,
// which would make the simulator useless, take the config defaults of
// SPEC 13 (output_tokens 16, error_status 503, context_tokens 128000,
// embedding_dims 8).
func (s *Simulated) SetProfile(sim config.Simulate) {
	sim.TokensPerSecond = max(sim.TokensPerSecond, 0)
	if sim.OutputTokens <= 0 {
		sim.OutputTokens = 16
	}
	if sim.ErrorStatus == 0 {
		sim.ErrorStatus = 503
	}
	if sim.ContextTokens <= 0 {
		sim.ContextTokens = 128000
	}
	if sim.EmbeddingDims <= 0 {
		sim.EmbeddingDims = 8
	}
	sim.TTFB = max(sim.TTFB, 0)
	p := &simProfile{Simulate: sim}
	if sim.TokensPerSecond > 0 {
		p.interval = time.Duration(float64(time.Second) / sim.TokensPerSecond)
	}
	for _, w := range sim.ContentPolicyWords {
		if w = strings.ToLower(strings.TrimSpace(w)); w != "" {
			p.words = append(p.words, w)
		}
	}
	s.prof.Store(p)
}

// Profile returns the current (normalized) profile.
func (s *Simulated) Profile() config.Simulate { return s.prof.Load().Simulate }

// Do implements Adapter.
func (s *Simulated) Do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error) {
	start := time.Now()
	p := s.prof.Load()
	if req.Client == nil {
		return nil, badRequest("no client request")
	}
	format := req.Client.Format
	if format != wire.FormatOpenAI && req.Op != catalog.OpChat {
		return nil, badRequest("the Anthropic and Responses formats serve chat only")
	}
	// Draw first, so the sequence of outcomes depends only on the seed and
	// the order of requests, not on their content.
	fail := p.ErrorRate > 0 && s.float() < p.ErrorRate
	if err := s.wait(ctx, p.TTFB); err != nil {
		return nil, err
	}
	model := upstreamModel(d)
	switch {
	case fail:
		return nil, simStatusError(format, p.ErrorStatus, model)
	case req.PromptTokens > p.ContextTokens:
		return nil, simContextError(format, req.PromptTokens, p.ContextTokens)
	case len(p.words) > 0 && p.violates(req.Client):
		return nil, simPolicyError(format)
	}
	ttfb := time.Since(start)
	id := s.seq.Add(1)
	switch req.Op {
	case catalog.OpEmbeddings:
		body := appendEmbeddings(nil, model, req.Client.Input, p.EmbeddingDims, req.PromptTokens)
		return &Response{Status: http.StatusOK, Body: body, Usage: Usage{PromptTokens: req.PromptTokens}, TTFB: ttfb}, nil
	case catalog.OpImages:
		body := appendImage(nil, id, start.Unix(), req.Client.Prompt)
		return &Response{Status: http.StatusOK, Body: body, TTFB: ttfb}, nil
	}
	n, finish := p.OutputTokens, "stop"
	if mt := req.Client.MaxTokens; mt > 0 && mt < n {
		n, finish = mt, "length"
	}
	if format == wire.FormatResponses {
		return s.simResponses(ctx, req, p, model, id, start.Unix(), n, finish, ttfb)
	}
	if req.Stream {
		st := newSimStream(ctx, format, model, id, start.Unix(), req.PromptTokens, n, finish, req.WantUsage, p.interval)
		return &Response{Status: http.StatusOK, Stream: st, TTFB: ttfb}, nil
	}
	var body []byte
	if format == wire.FormatAnthropic {
		body = appendAnthropicMessage(make([]byte, 0, 256+len(model)+n*7), id, model, req.PromptTokens, n, stopFromFinish(finish))
	} else {
		body = appendOpenAIChat(make([]byte, 0, 288+len(model)+n*7), id, start.Unix(), model, req.PromptTokens, n, finish)
	}
	return &Response{Status: http.StatusOK, Body: body, Usage: Usage{PromptTokens: req.PromptTokens, CompletionTokens: n}, TTFB: ttfb}, nil
}

// float draws a uniform value in [0, 1) from the adapter's seeded source.
func (s *Simulated) float() float64 {
	return float64(splitmix(s.rng.Add(0x9e3779b97f4a7c15))>>11) / (1 << 53)
}

// splitmix is the splitmix64 output function.
func splitmix(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// wait blocks for d or until ctx ends, on a recycled timer.
func (s *Simulated) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		if ctx.Err() != nil {
			return ctxError(ctx)
		}
		return nil
	}
	t, _ := s.timers.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(d)
	} else {
		t.Reset(d)
	}
	select {
	case <-t.C:
		s.timers.Put(t)
		return nil
	case <-ctx.Done():
		t.Stop() // Go >= 1.23: no stale tick can remain after Stop
		s.timers.Put(t)
		return ctxError(ctx)
	}
}

// violates reports a prompt containing a content-policy word (ASCII
// case-insensitive).
func (p *simProfile) violates(r *wire.Request) bool {
	if p.anyWord(r.System) || p.anyWord(r.Prompt) {
		return true
	}
	for i := range r.Messages {
		if p.anyWord(r.Messages[i].Text) {
			return true
		}
	}
	for _, in := range r.Input {
		if p.anyWord(in) {
			return true
		}
	}
	return false
}

func (p *simProfile) anyWord(text string) bool {
	for _, w := range p.words {
		if containsFold(text, w) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lowercase word, ignoring
// ASCII case, without allocating.
func containsFold(s, word string) bool {
	n := len(word)
	first := word[0]
	for i := 0; i+n <= len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c == first && strings.EqualFold(s[i:i+n], word) {
			return true
		}
	}
	return false
}

// appendSimToken appends token i of the deterministic answer: the words
// "sim", "token", "<k>" cycled, so 6 tokens read "sim token 1 sim token 2".
func appendSimToken(b []byte, i int) []byte {
	if i > 0 {
		b = append(b, ' ')
	}
	switch i % 3 {
	case 0:
		return append(b, "sim"...)
	case 1:
		return append(b, "token"...)
	}
	return strconv.AppendInt(b, int64(i/3+1), 10)
}

func appendSimText(b []byte, n int) []byte {
	for i := range n {
		b = appendSimToken(b, i)
	}
	return b
}

// appendOpenAIChat writes a chat.completion in the OpenAI wire format.
func appendOpenAIChat(b []byte, id uint64, created int64, model string, prompt, n int, finish string) []byte {
	b = append(b, `{"id":"chatcmpl-sim-`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = wire.AppendString(b, model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	b = appendSimText(b, n)
	b = append(b, `"},"finish_reason":"`...)
	b = append(b, finish...)
	b = append(b, `"}],"usage":`...)
	return appendOpenAIUsage(b, prompt, n)
}

func appendOpenAIUsage(b []byte, prompt, n int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+n), 10)
	return append(b, "}}"...)
}

// appendAnthropicMessage writes a message in the Anthropic wire format.
func appendAnthropicMessage(b []byte, id uint64, model string, prompt, n int, stop string) []byte {
	b = append(b, `{"id":"msg_sim_`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = wire.AppendString(b, model)
	b = append(b, `,"content":[{"type":"text","text":"`...)
	b = appendSimText(b, n)
	b = append(b, `"}],"stop_reason":"`...)
	b = append(b, stop...)
	b = append(b, `","stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, "}}"...)
}

// appendEmbeddings writes one deterministic vector per input: the same
// input always maps to the same vector, whatever the request around it.
func appendEmbeddings(b []byte, model string, inputs []string, dims, prompt int) []byte {
	b = append(b, `{"object":"list","data":[`...)
	for i, in := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":[`...)
		h := fnv.New64a()
		h.Write([]byte(in))
		seed := h.Sum64()
		for j := range dims {
			if j > 0 {
				b = append(b, ',')
			}
			v := float64(splitmix(seed+uint64(j+1)*0x9e3779b97f4a7c15)>>11)/(1<<53)*2 - 1
			b = strconv.AppendFloat(b, math.Round(v*1e6)/1e6, 'f', -1, 64)
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"model":`...)
	b = wire.AppendString(b, model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	return append(b, "}}"...)
}

// appendImage writes an images response with one URL item.
func appendImage(b []byte, id uint64, created int64, prompt string) []byte {
	b = append(b, `{"created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"data":[{"url":"https://sim.switchyard.invalid/images/`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `.png","revised_prompt":`...)
	b = wire.AppendString(b, prompt)
	return append(b, "}]}"...)
}

// simErrorKinds gives an injected failure the body a real provider sends
// with that status: OpenAI type and code, Anthropic type, message.
func simErrorKind(status int) (oaType, oaCode, anType, msg string) {
	switch {
	case status == 429:
		return "requests", "rate_limit_exceeded", "rate_limit_error", "Rate limit reached for requests (simulated). Please try again in 1s."
	case status == 401:
		return "invalid_request_error", "invalid_api_key", "authentication_error", "Incorrect API key provided (simulated)."
	case status == 403:
		return "invalid_request_error", "permission_denied", "permission_error", "Your API key does not have permission to use the specified resource (simulated)."
	case status == 404:
		return "invalid_request_error", "model_not_found", "not_found_error", "The model does not exist or you do not have access to it (simulated)."
	case status == 529:
		return "server_error", "", "overloaded_error", "Overloaded (simulated)."
	case status >= 500:
		return "server_error", "", "api_error", "The server had an error while processing your request (simulated)."
	}
	return "invalid_request_error", "", "invalid_request_error", "Simulated upstream error."
}

func simStatusError(format wire.Format, status int, model string) *Error {
	oaType, oaCode, anType, msg := simErrorKind(status)
	if status == 404 {
		msg = fmt.Sprintf("The model `%s` does not exist or you do not have access to it (simulated).", model)
	}
	return simError(format, status, oaType, oaCode, anType, "", msg)
}

func simContextError(format wire.Format, prompt, limit int) *Error {
	if format == wire.FormatAnthropic {
		return simError(format, 400, "", "", "invalid_request_error", "", fmt.Sprintf("prompt is too long: %d tokens > %d maximum", prompt, limit))
	}
	return simError(format, 400, "invalid_request_error", "context_length_exceeded", "", "messages",
		fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", limit, prompt))
}

func simPolicyError(format wire.Format) *Error {
	if format == wire.FormatAnthropic {
		return simError(format, 400, "", "", "invalid_request_error", "", "Output blocked by content filtering policy (simulated).")
	}
	return simError(format, 400, "invalid_request_error", "content_filter", "", "prompt",
		"The response was filtered due to the prompt triggering the content management policy (simulated). Please modify your prompt and retry.")
}

// simError builds the body a real upstream would send and classifies it
// exactly as the HTTP path would.
func simError(format wire.Format, status int, oaType, oaCode, anType, param, msg string) *Error {
	var e *Error
	if format == wire.FormatAnthropic {
		e = newStatusError(KindAnthropic, status, anthropicErrorBody(anType, msg), nil)
	} else {
		e = newStatusError(KindSimulated, status, openAIErrorBody(oaType, oaCode, param, msg), nil)
	}
	if status == http.StatusTooManyRequests {
		e.RetryAfter = time.Second
	}
	return e
}

// openAIErrorBody is the OpenAI error body a real upstream sends.
func openAIErrorBody(typ, code, param, msg string) []byte {
	return wire.AppendError(nil, wire.FormatOpenAI, wire.ErrorBody{Type: typ, Code: code, Param: param, Message: msg})
}

// anthropicErrorBody is the Anthropic error body a real upstream sends.
func anthropicErrorBody(typ, msg string) []byte {
	return wire.AppendError(nil, wire.FormatAnthropic, wire.ErrorBody{Type: typ, Message: msg})
}

var (
	_ Adapter = (*Simulated)(nil)
	_ Tunable = (*Simulated)(nil)
)
