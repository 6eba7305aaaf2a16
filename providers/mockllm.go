package providers

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

// mockMaxBody bounds a request body the mock server reads.
const mockMaxBody = 32 << 20

// MockServer serves the simulation over real HTTP in the OpenAI, Anthropic,
// Gemini and Vertex wire formats (`switchyard mockllm`, SPEC 13): the same profile,
// bodies, errors and pacing as the in-process simulated provider.
type MockServer struct {
	sim    *Simulated
	tokens atomic.Uint64 // tokens the fake OAuth2 endpoint issued
}

// MockHandler returns the mock LLM server for profile, seeded with seed:
//
//	POST /v1/chat/completions   OpenAI chat, sync or SSE (each event flushed)
//	POST /v1/embeddings         OpenAI embeddings
//	POST /v1/images/generations OpenAI images (one URL item)
//	POST /v1/messages           Anthropic Messages, sync or SSE
//	POST /v1/responses          OpenAI Responses, sync or SSE (stateless: no
//	                            previous_response_id or item_reference)
//	POST .../models/{m}:...     Gemini and Vertex AI (mockllm_gemini.go)
//	POST /model/{id}/converse   Bedrock Converse, and /converse-stream with
//	                            event-stream frames (mockllm_bedrock.go)
//	GET  /healthz               "ok"
//
// Errors use the OpenAI error JSON (the Anthropic one on /v1/messages) with
// the upstream status, and a Retry-After on 429. The returned handler is a
// *MockServer, which is Tunable.
func MockHandler(profile config.Simulate, seed int64) http.Handler {
	p := &catalog.Provider{Provider: config.Provider{Name: "mockllm", Kind: KindSimulated, Simulate: profile}}
	return &MockServer{sim: NewSimulated(p, seed)}
}

// Profile returns the served profile.
func (m *MockServer) Profile() config.Simulate { return m.sim.Profile() }

// SetProfile changes the served profile for later requests.
func (m *MockServer) SetProfile(p config.Simulate) { m.sim.SetProfile(p) }

// ServeHTTP implements http.Handler.
func (m *MockServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/model/") {
		m.serveBedrock(w, r) // mockllm_bedrock.go
		return
	}
	var op catalog.Operation
	format := wire.FormatOpenAI
	switch r.URL.Path {
	case "/healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
		return
	case "/v1/chat/completions":
		op = catalog.OpChat
	case "/v1/embeddings":
		op = catalog.OpEmbeddings
	case "/v1/images/generations":
		op = catalog.OpImages
	case "/v1/messages":
		op, format = catalog.OpChat, wire.FormatAnthropic
	case "/v1/responses":
		op, format = catalog.OpChat, wire.FormatResponses
	default:
		if m.serveGoogle(w, r) { // Gemini and Vertex paths (mockllm_gemini.go)
			return
		}
		writeMockError(w, format, &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url", Message: "Unknown request URL: " + r.Method + " " + r.URL.Path})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeMockError(w, format, &Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Message: "use POST"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mockMaxBody))
	if err != nil {
		status := http.StatusBadRequest
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			status = http.StatusRequestEntityTooLarge
		}
		writeMockError(w, format, &Error{Status: status, Type: "invalid_request_error", Message: "reading the body: " + err.Error()})
		return
	}
	creq, err := wire.Parse(body, op, format)
	if err != nil {
		writeMockError(w, format, &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: err.Error()})
		return
	}
	d := &catalog.Deployment{}
	d.UpstreamModel = creq.Model
	stream := creq.Stream && op == catalog.OpChat
	resp, err := m.sim.Do(r.Context(), d, &Request{
		Op: op, Stream: stream, Client: creq,
		WantUsage:    creq.IncludeUsage,
		PromptTokens: creq.PromptTokens(),
	})
	if err != nil {
		writeMockError(w, format, AsError(err))
		return
	}
	h := w.Header()
	h.Set("X-Request-Id", "req_sim_"+strconv.FormatUint(m.sim.seq.Load(), 10))
	h.Set("Openai-Processing-Ms", strconv.FormatInt(resp.TTFB.Milliseconds(), 10))
	if resp.Stream == nil {
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
		w.Write(resp.Body)
		return
	}
	defer resp.Stream.Close()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for {
		ev, err := resp.Stream.Next()
		if err != nil {
			return // io.EOF, or the client went away
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// writeMockError writes e in the client's error format. A simulated
// upstream error is written with the exact body the simulator built.
func writeMockError(w http.ResponseWriter, format wire.Format, e *Error) {
	if e.Class == routing.ClassCanceled {
		return // nobody is listening
	}
	status := e.Status
	if status == 0 {
		status = http.StatusGatewayTimeout
	}
	body := e.body
	if body == nil {
		if format == wire.FormatAnthropic {
			body = anthropicErrorBody(anthropicErrorType(status), e.Message)
		} else {
			body = openAIErrorBody(e.Type, e.Code, "", e.Message)
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 || status == http.StatusTooManyRequests {
		secs := max(int64(math.Ceil(e.RetryAfter.Seconds())), 1)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(status)
	w.Write(body)
}

// anthropicErrorType names an HTTP status the way the Anthropic API does.
func anthropicErrorType(status int) string {
	switch status {
	case 413:
		return "request_too_large"
	case 405:
		return "invalid_request_error"
	}
	_, _, t, _ := simErrorKind(status)
	return t
}

// MockFlags registers the `switchyard mockllm` profile flags on fs
// (-ttfb, -tps, -output-tokens, -error-rate, -error-status,
// -context-tokens, -embedding-dims, -content-policy-words) with the config
// defaults, and returns a function that reads the parsed values as a
// profile, or an error naming the flag that is out of range.
func MockFlags(fs *flag.FlagSet) func() (config.Simulate, error) {
	ttfb := fs.Duration("ttfb", 20*time.Millisecond, "time to first byte")
	tps := fs.Float64("tps", 500, "stream pace, tokens per second (0 = unpaced)")
	out := fs.Int("output-tokens", 16, "tokens in each answer")
	rate := fs.Float64("error-rate", 0, "share of requests that fail, 0..1")
	status := fs.Int("error-status", 503, "HTTP status of the failing requests")
	ctxTokens := fs.Int("context-tokens", 128000, "prompts estimated above this get a context-window error")
	dims := fs.Int("embedding-dims", 8, "dimensions of each embedding")
	words := fs.String("content-policy-words", "", "comma-separated words; a prompt containing one gets a content-policy error")
	return func() (config.Simulate, error) {
		var problems []string
		if *rate < 0 || *rate > 1 {
			problems = append(problems, fmt.Sprintf("-error-rate must be within 0..1, got %g", *rate))
		}
		if *status < 400 || *status > 599 {
			problems = append(problems, fmt.Sprintf("-error-status must be an HTTP error status 400..599, got %d", *status))
		}
		if *ttfb < 0 || *tps < 0 || *out <= 0 || *ctxTokens <= 0 || *dims <= 0 {
			problems = append(problems, "-ttfb and -tps must not be negative; -output-tokens, -context-tokens and -embedding-dims must be positive")
		}
		if len(problems) > 0 {
			return config.Simulate{}, errors.New(strings.Join(problems, "; "))
		}
		var list []string
		for _, w := range strings.Split(*words, ",") {
			if w = strings.TrimSpace(w); w != "" {
				list = append(list, w)
			}
		}
		return config.Simulate{
			TTFB: *ttfb, TokensPerSecond: *tps, OutputTokens: *out, ErrorRate: *rate, ErrorStatus: *status,
			ContextTokens: *ctxTokens, ContentPolicyWords: list, EmbeddingDims: *dims,
		}, nil
	}
}

var _ Tunable = (*MockServer)(nil)
