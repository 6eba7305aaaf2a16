// Package providers owns the upstream adapters of SPEC 10: one Adapter per
// configured provider — openai (any OpenAI-compatible API, Azure included),
// anthropic (the native Messages API), gemini and vertex (the Gemini API,
// and Vertex AI's Gemini and Claude models), bedrock (Amazon Bedrock's
// Converse API, bedrock*.go) and simulated (the in-process fake that powers
// the demo, the tests and the benchmarks) — the
// translation between the client formats and each upstream's, the one-time
// classification of upstream failures into routing classes (SPEC 7.4), and
// the HTTP mock LLM behind `switchyard mockllm`.
//
// It imports catalog, wire, internal/jsonspan (to check an upstream's
// body), routing (for Class), config, tracing (to send
// the attempt's traceparent), golang.org/x/oauth2/google (Vertex AI's
// tokens) and the AWS SDK's signer, credential chain and event-stream codec
// (Bedrock); never gin or redis. An adapter never forwards client headers or credentials upstream
// (SPEC 15): the only credentials it sends are the provider's own.
package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
	"switchyard/tracing"
	"switchyard/wire"
)

// The provider kinds of SPEC 1.
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
	KindSimulated = "simulated"
)

// Request is one upstream attempt's input.
type Request struct {
	Op     catalog.Operation
	Stream bool
	// Client is the parsed client request; Client.Raw is the body and
	// Client.Format its wire format. Adapters never modify it.
	Client *wire.Request
	// WantUsage reports that the client asked for the usage chunk
	// (stream_options.include_usage). When false the adapter still asks the
	// upstream for usage but strips the usage-only chunk from what it relays.
	WantUsage bool
	// PromptTokens is the gateway's prompt estimate; the simulator checks it
	// against its context limit and reports it as prompt usage.
	PromptTokens int
	// FirstByte, when set, is called once when a sync response's headers
	// arrive, before its body is read: the gateway's upstream_timeout bounds
	// the time to first byte, not a long generation. (Do returns a stream
	// only after its first event, which is its first byte.)
	FirstByte func()
	// ResponsesDone, when set, is called once with the final Responses API
	// object and its output items (Client.Format == FormatResponses): with
	// the body of a sync response, or when a stream's last event has been
	// produced. The gateway stores it (SPEC 10.1).
	ResponsesDone ResponsesDone
	// Header is the client's request headers; an adapter forwards only its
	// allowlist from them (SPEC 10, 15). May be nil.
	Header http.Header
}

// Response is one successful upstream attempt. For sync requests Body holds
// the complete response in the client's format (Client.Format); for streams
// Stream yields SSE events already in the client's format.
type Response struct {
	Status int
	// Header holds only safe upstream headers worth relaying
	// (openai-processing-ms, upstream-request-id); never credentials. May be nil.
	Header http.Header
	Body   []byte
	Stream EventStream // nil for sync
	Usage  Usage       // sync: parsed from the body; streams: see EventStream.Usage
	// TTFB is the time to the response headers (sync) or to the first event
	// (streams); the latency sample routing learns from.
	TTFB time.Duration
}

// Usage is the token usage an upstream reported, normalized to one
// convention whatever the provider's (SPEC 10.2): PromptTokens is every
// input token, uncached, cache-read and cache-write alike (OpenAI's
// prompt_tokens); CachedTokens and CacheWriteTokens are the parts of it read
// from and written to the provider's prompt cache; CompletionTokens counts
// reasoning tokens too, and ReasoningTokens is that part of it (OpenAI's
// completion_tokens_details.reasoning_tokens, Gemini's thoughtsTokenCount;
// 0 when the provider reports none): it is reported to clients, never
// priced apart. Each adapter converts its provider's counts into this form
// on the way in, and into the client format's convention on the way out.
type Usage struct {
	PromptTokens, CompletionTokens, CachedTokens, CacheWriteTokens int
	ReasoningTokens                                                int
}

// Cost is the price in USD of u at deployment d's prices (SPEC 10.2).
func (u Usage) Cost(d *catalog.Deployment) float64 {
	return d.Cost(u.PromptTokens, u.CachedTokens, u.CacheWriteTokens, u.CompletionTokens)
}

// MaxUsageTokens is the most tokens one request's usage may count (SPEC 14):
// an upstream reporting more is believed up to here.
const MaxUsageTokens = 100_000_000

// Clamped returns u with every count within [0, MaxUsageTokens], and
// whether it had to change one: upstream usage is never written into the
// limiter or Redis as it came (a negative or absurd count would make a TTL
// invalid or refund capacity never charged). ReasoningTokens, a part of
// CompletionTokens, is never more than it.
func (u Usage) Clamped() (Usage, bool) {
	c := Usage{clampCount(u.PromptTokens), clampCount(u.CompletionTokens),
		clampCount(u.CachedTokens), clampCount(u.CacheWriteTokens), 0}
	c.ReasoningTokens = u.reasoning()
	return c, c != u
}

// reasoning is the reasoning part of the output as a client may be told
// it: within [0, CompletionTokens] (an upstream's count of more reasoning
// than output is not believed beyond the output).
func (u Usage) reasoning() int {
	return min(max(u.ReasoningTokens, 0), clampCount(u.CompletionTokens))
}

func clampCount(n int) int { return min(max(n, 0), MaxUsageTokens) }

// tokenCount is a token count as an upstream's JSON has it, read from any
// JSON number: fractional, in exponent form, beyond every integer type,
// beyond float64 (taken as ±Inf). An absurd count is then clamped (SPEC 14:
// "one over 100 million per request as 100 million") instead of failing
// the whole answer, or ending a stream whose content has all been relayed
// at its closing usage event. null is 0; any other JSON value is malformed.
type tokenCount float64

// UnmarshalJSON implements json.Unmarshaler.
func (t *tokenCount) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	// the decoder hands over one JSON value: a number token parses (a
	// range error is still the nearest float, ±Inf or 0), anything else not
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return errors.New("a token count is not a number")
	}
	*t = tokenCount(f)
	return nil
}

// maxBoundedCount bounds a count that is summed before Usage.Clamped sees
// it: far above MaxUsageTokens, so Clamped still caps and logs it, and far
// below the int range, so a sum of a few cannot overflow.
const maxBoundedCount = 1 << 40

// bounded is t truncated to an integer within ±maxBoundedCount (NaN is 0):
// out of range still, for Usage.Clamped to report, but safe to add up.
func (t tokenCount) bounded() int {
	switch f := float64(t); {
	case f != f:
		return 0
	case f > maxBoundedCount:
		return maxBoundedCount
	case f < -maxBoundedCount:
		return -maxBoundedCount
	default:
		return int(f)
	}
}

// clamped is t within [0, MaxUsageTokens], truncated to an integer.
func (t tokenCount) clamped() int {
	switch f := float64(t); {
	case !(f >= 0): // negative, or NaN
		return 0
	case f > MaxUsageTokens:
		return MaxUsageTokens
	default:
		return int(f)
	}
}

// EventStream relays an upstream stream event by event.
//
// The context given to Do governs the whole stream: cancelling it aborts a
// blocked Next, which then returns an *Error of class canceled or timeout.
type EventStream interface {
	// Next returns the next complete SSE event(s), framed and ready to write
	// to the client ("data: {...}\n\n", or for Anthropic
	// "event: x\ndata: {...}\n\n"); a translated upstream event may yield
	// several framed events in one slice. The slice is the caller's to keep.
	// Next returns io.EOF at the clean end (after "data: [DONE]\n\n" for the
	// OpenAI format, after message_stop for Anthropic). A failure mid-stream
	// returns an *Error (class server_error, network, timeout or canceled).
	Next() ([]byte, error)
	// Ended reports whether the events Next last returned end the stream
	// (the next Next returns io.EOF): [DONE], message_stop or a Responses
	// terminal event. The gateway frees the team's slot before writing
	// them, so a client that has the whole answer finds it free (SPEC 3).
	Ended() bool
	// Usage is the usage the upstream reported; complete after io.EOF.
	Usage() Usage
	// Close releases the upstream connection. It is safe to call twice and
	// concurrently with a blocked Next.
	Close() error
}

// Adapter calls one provider. Implementations are safe for concurrent use.
type Adapter interface {
	// Do makes one upstream attempt for deployment d. Failures are *Error.
	// ctx governs the whole attempt, a returned stream included: to bound
	// only the time to first byte, cancel ctx from a timer that is stopped
	// once Do returns. For a stream, Do returns after the first event has
	// arrived, so a stream that fails before any byte is an attempt error
	// the caller can still fail over from.
	Do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error)
}

// Tunable is the optional capability of an adapter whose behaviour profile
// can be changed at runtime (the simulated provider, for the brownout
// benchmark). Find it with a type assertion.
type Tunable interface {
	Profile() config.Simulate
	SetProfile(config.Simulate)
}

// Error is an upstream failure, classified once (SPEC 7.4).
type Error struct {
	Status     int           // upstream HTTP status; 0 when none arrived
	Class      routing.Class // the one classification
	Type       string        // upstream error type, e.g. invalid_request_error
	Code       string        // upstream error code, e.g. context_length_exceeded
	Message    string        // upstream error message (never holds credentials)
	RetryAfter time.Duration // from Retry-After or retry-after-ms; 0 when absent

	body  []byte // the error body as the upstream sent it (mock server relays it)
	cause error  // underlying transport or context error, for errors.Is
}

// Error implements error: "upstream 429 rate_limited: <message>".
func (e *Error) Error() string {
	if e.Status > 0 {
		return fmt.Sprintf("upstream %d %s: %s", e.Status, e.Class, e.Message)
	}
	return fmt.Sprintf("upstream %s: %s", e.Class, e.Message)
}

// Unwrap returns the underlying transport or context error, if any, so
// errors.Is(err, context.Canceled) works.
func (e *Error) Unwrap() error { return e.cause }

// AsError returns err as an *Error: itself when it is one (or wraps one), a
// canceled/timeout error for context errors, and a network error otherwise.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return classifyTransport(err, err)
}

// New builds the adapter for a provider: one per provider, created at start.
// HTTP adapters get their own tuned, pooled transport, and sit behind the
// provider's Scrubber: nothing they return carries its credential or an
// upstream address (SPEC 15).
func New(p *catalog.Provider) (Adapter, error) {
	if p == nil {
		return nil, errors.New("providers: nil provider")
	}
	switch p.Kind {
	case KindOpenAI:
		a, err := newOpenAI(p)
		if err != nil {
			return nil, err
		}
		return scrubbed{a, NewScrubber(p)}, nil
	case KindAnthropic:
		a, err := newAnthropic(p)
		if err != nil {
			return nil, err
		}
		return scrubbed{a, NewScrubber(p)}, nil
	case KindGemini:
		a, err := newGemini(p)
		if err != nil {
			return nil, err
		}
		return scrubbed{a, NewScrubber(p)}, nil
	case KindBedrock:
		a, err := newBedrock(p)
		if err != nil {
			return nil, err
		}
		return scrubbed{a, NewScrubber(p)}, nil
	case KindVertex:
		return newVertex(p) // scrubs itself: its tokens change as it runs
	case KindSimulated:
		return NewSimulated(p, SeedFor(p.Name)), nil
	}
	return nil, fmt.Errorf("providers: provider %q: unknown kind %q (want openai, anthropic, gemini, vertex, bedrock or simulated)", p.Name, p.Kind)
}

// SeedFor is the deterministic seed New gives a simulated provider: a hash of
// its name, so two providers with the same profile still fail differently.
func SeedFor(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64() >> 1)
}

// newTransport is the one pooled transport of an HTTP provider. No
// ResponseHeaderTimeout: the gateway bounds time to first byte with the
// attempt's context (server.upstream_timeout).
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          0, // no global cap; the per-host cap bounds the pool
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// httpUpstream is what the HTTP adapters share: the provider's tuned
// transport, and the request headers (credentials,
// provider headers) built once for sync and for stream calls. Requests share
// the header maps read-only: an http.RoundTripper must not modify them, so
// no attempt pays for a copy.
//
// Calls go to the transport's RoundTrip, as httputil.ReverseProxy's do, not
// through an http.Client: a redirect is never followed (a credential must
// never be replayed to a host the operator did not name, so a 3xx is the
// attempt's answer), and the client's redirect machinery, which that makes
// dead weight, copied every request's header map.
type httpUpstream struct {
	rt      http.RoundTripper
	sync    http.Header
	stream  http.Header // sync plus Accept: text/event-stream
	forward []string    // canonical client header names passed through
}

// newHTTPUpstream builds the upstream of base, the provider's base URL.
// Credentials in base's userinfo go out as basic auth when h sets no
// Authorization, as an http.Client would send them; like the other
// credentials they are in the prebuilt header maps, not added per call.
func newHTTPUpstream(base string, h http.Header, forward []string) httpUpstream {
	if u, err := url.Parse(base); err == nil && u.User != nil && h.Get("Authorization") == "" {
		pw, _ := u.User.Password()
		(&http.Request{Header: h}).SetBasicAuth(u.User.Username(), pw)
	}
	st := h.Clone()
	st.Set("Accept", "text/event-stream")
	return httpUpstream{rt: newTransport(), sync: h, stream: st, forward: forwardable(forward)}
}

// neverForwarded are client headers no allowlist passes on: credentials,
// hop-by-hop and framing headers (SPEC 15).
var neverForwarded = map[string]bool{
	"Authorization": true, "X-Api-Key": true, "Cookie": true, "Proxy-Authorization": true, "Host": true,
	"Content-Length": true, "Content-Type": true, "Connection": true, "Transfer-Encoding": true, "Accept": true,
	"Accept-Encoding": true, "Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true,
}

// forwardable canonicalises an allowlist and drops what is never forwarded.
func forwardable(names []string) []string {
	var out []string
	for _, n := range names {
		c := http.CanonicalHeaderKey(strings.TrimSpace(n))
		if c != "" && !neverForwarded[c] && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// headers returns the request headers for one attempt: the prebuilt
// (shared, read-only) map, or a copy with the allowlisted client headers
// when the client sent any.
func (u *httpUpstream) headers(stream bool, client http.Header) http.Header {
	h := u.sync
	if stream {
		h = u.stream
	}
	var out http.Header
	for _, k := range u.forward {
		if vs := client[k]; len(vs) > 0 {
			if out == nil {
				out = h.Clone()
			}
			out[k] = vs
		}
	}
	if out == nil {
		return h
	}
	return out
}

// send posts body to url and returns the response once a 2xx status and
// its headers arrived; any other status is read and classified as an
// error of kind. firstByte (may be nil) is called for a sync call when the
// headers arrive: a stream's first byte is its first event instead.
func (u *httpUpstream) send(ctx context.Context, url string, body []byte, stream bool, kind string, firstByte func(), client http.Header) (*http.Response, time.Time, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, time.Time{}, classifyTransport(ctx.Err(), err)
	}
	hreq.Header = u.headers(stream, client)
	// the attempt's W3C traceparent; with tracing off ctx has no span and
	// the header map goes out as it is (SPEC 12.5)
	hreq.Header = tracing.Inject(ctx, hreq.Header)
	start := time.Now()
	resp, err := u.rt.RoundTrip(hreq)
	if err != nil {
		return nil, start, classifyTransport(ctx.Err(), err)
	}
	if firstByte != nil && !stream {
		firstByte()
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, start, readStatusError(kind, resp)
	}
	return resp, start, nil
}

// upstreamModel is the model name the upstream knows the deployment by.
func upstreamModel(d *catalog.Deployment) string {
	if d.UpstreamModel != "" {
		return d.UpstreamModel
	}
	return d.Model
}

// badRequest is an attempt the adapter refuses before calling the upstream.
func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Class: routing.ClassBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}
