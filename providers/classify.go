package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"switchyard/routing"
	"switchyard/wire"
)

// statusRange maps a span of HTTP statuses to a class.
type statusRange struct {
	lo, hi int
	class  routing.Class
}

// bodyRule refines a 4xx into a more specific class when the error body says
// so. A rule matches when the error's code or type is one of codes, or its
// lowercased message contains one of phrases; onlyType, when set, restricts
// the phrase match to errors of that type.
type bodyRule struct {
	class    routing.Class
	codes    []string
	phrases  []string
	onlyType string
}

// classTable is one provider kind's classification (SPEC 7.4).
type classTable struct {
	refine   []int                    // statuses whose body rules are consulted
	rules    []bodyRule               // first match wins
	statuses []statusRange            // then the status alone
	byType   map[string]routing.Class // last, for statuses the ranges leave open
}

// commonStatuses is the status-only part shared by every kind.
var commonStatuses = []statusRange{
	{429, 429, routing.ClassRateLimited},
	{401, 401, routing.ClassAuth},
	{403, 403, routing.ClassAuth},
	{404, 404, routing.ClassNotFound},
	{408, 408, routing.ClassTimeout},
	{500, 599, routing.ClassServerError}, // includes Anthropic's 529 overloaded
	{400, 499, routing.ClassBadRequest},
}

var contextWindowRule = bodyRule{
	class: routing.ClassContextWindow,
	codes: []string{"context_length_exceeded"},
	phrases: []string{
		"maximum context length",               // OpenAI, vLLM
		"context_length_exceeded",              // code quoted inside a message
		"prompt is too long",                   // Anthropic
		"exceed context limit",                 // Anthropic: input length and max_tokens exceed context limit
		"context window",                       // Mistral, Groq and others
		"maximum model length",                 // vLLM: longer than the maximum model length
		"reduce the length of the",             // OpenAI advice text
		"exceeds the maximum number of tokens", // Gemini OpenAI-compatible API
	},
}

var contentPolicyRule = bodyRule{
	class: routing.ClassContentPolicy,
	codes: []string{"content_filter", "content_policy_violation", "responsibleaipolicyviolation"},
	phrases: []string{
		"content management policy", // Azure OpenAI
		"content_policy_violation",
		"content filtering policy", // Anthropic: output blocked by content filtering policy
		"content policy",
		"usage policy", // Anthropic: violates our usage policy
		"safety system",
	},
}

var openAITable = classTable{
	refine:   []int{400, 413, 422},
	rules:    []bodyRule{contextWindowRule, contentPolicyRule},
	statuses: commonStatuses,
}

var anthropicTable = classTable{
	refine: []int{400, 413, 422},
	rules: []bodyRule{
		contextWindowRule,
		{class: routing.ClassContextWindow, phrases: []string{"too long"}, onlyType: "invalid_request_error"},
		contentPolicyRule,
	},
	statuses: commonStatuses,
	byType: map[string]routing.Class{
		"overloaded_error":     routing.ClassServerError,
		"api_error":            routing.ClassServerError,
		"rate_limit_error":     routing.ClassRateLimited,
		"authentication_error": routing.ClassAuth,
		"permission_error":     routing.ClassAuth,
		"not_found_error":      routing.ClassNotFound,
	},
}

// tables is the classifier of each provider kind. The simulator speaks the
// OpenAI error format.
var tables = map[string]*classTable{
	KindOpenAI:    &openAITable,
	KindAnthropic: &anthropicTable,
	KindSimulated: &openAITable,
	KindGemini:    &geminiTable,
	KindVertex:    &vertexTable,
}

// Classify maps an upstream HTTP status and error body to a Class, with the
// table of the provider kind ("openai", "anthropic", "simulated"; an unknown
// kind uses the OpenAI table). SPEC 7.4: 429 rate_limited; 401/403 auth;
// 404 not_found; 408 timeout; 5xx (Anthropic's 529 included) server_error;
// a 400/413/422 whose body names a context-window or content-policy error
// gets that class; any other 4xx is bad_request. A 2xx is ClassOK. Any
// other status (an unfollowed 3xx, or 0 for an error event with no HTTP
// status) is classified by the body's error type (Anthropic) or else as a
// server error: the deployment, not the request, is at fault.
func Classify(kind string, status int, body []byte) routing.Class {
	if status >= 200 && status < 300 {
		return routing.ClassOK
	}
	return classifyInfo(kind, status, parseErrorBody(body))
}

func classifyInfo(kind string, status int, info errorInfo) routing.Class {
	t := tables[kind]
	if t == nil {
		t = &openAITable
	}
	for _, s := range t.refine {
		if s != status {
			continue
		}
		msg := strings.ToLower(info.Message)
		for _, r := range t.rules {
			if r.matches(info, msg) {
				return r.class
			}
		}
		break
	}
	for _, sr := range t.statuses {
		if status < sr.lo || status > sr.hi {
			continue
		}
		if sr.class == routing.ClassBadRequest {
			// An odd 4xx whose body names its error (Anthropic) keeps that name.
			if c, ok := t.byType[info.Type]; ok {
				return c
			}
		}
		return sr.class
	}
	if c, ok := t.byType[info.Type]; ok {
		return c
	}
	return routing.ClassServerError
}

func (r *bodyRule) matches(info errorInfo, lowerMsg string) bool {
	for _, c := range r.codes {
		if strings.EqualFold(info.Code, c) || strings.EqualFold(info.Type, c) || strings.EqualFold(info.InnerCode, c) {
			return true
		}
	}
	if r.onlyType != "" && info.Type != r.onlyType {
		return false
	}
	for _, p := range r.phrases {
		if strings.Contains(lowerMsg, p) {
			return true
		}
	}
	return false
}

// errorInfo is what an upstream error body says, in any of the shapes seen
// in the wild: OpenAI/Azure {"error":{"message","type","code","param"}},
// Anthropic {"type":"error","error":{"type","message"}}, {"error":"text"},
// and {"message"} or {"detail"} from smaller OpenAI-compatible servers.
type errorInfo struct {
	Type, Code, Message string
	InnerCode           string // Azure innererror.code
}

// errorTextMax bounds the text of an upstream error body taken as its
// message when the body is not an error object.
const errorTextMax = 512

// errorMessageMax bounds an upstream error's message as the client, the
// audit entry and the log get it (an error object's message may be as
// long as its body, maxErrorBody); errorFieldMax bounds its type and
// code. Classification reads the whole message first.
const (
	errorMessageMax = 1024
	errorFieldMax   = 128
)

// bounded is info cut to what is relayed (never inside a key: truncateText).
func (info errorInfo) bounded() errorInfo {
	info.Message = truncateText(info.Message, errorMessageMax)
	info.Type = truncateText(info.Type, errorFieldMax)
	info.Code = truncateText(info.Code, errorFieldMax)
	info.InnerCode = truncateText(info.InnerCode, errorFieldMax)
	return info
}

// truncateText is wire.Truncate(s, n), except that a cut inside a run of
// the characters keys and tokens are made of drops the whole run: the
// scrubber masks a credential by its shape and a configured secret by its
// whole value (SPEC 15), and a key cut short has neither, so its first
// characters would be relayed in clear.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n, 0)
	if tokenByte(s[i]) {
		for i > 0 && tokenByte(s[i-1]) {
			i--
		}
	}
	return wire.Truncate(s, i)
}

// tokenByte reports a byte that keys and tokens are made of.
func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._~+/=-", c) >= 0
}

func parseErrorBody(body []byte) errorInfo {
	var info errorInfo
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		info.Message = truncateText(string(body), errorTextMax)
		return info
	}
	var top struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &top) != nil {
		info.Message = truncateText(string(body), errorTextMax)
		return info
	}
	if len(top.Error) > 0 && top.Error[0] == '{' {
		var e struct {
			Message    json.RawMessage `json:"message"`
			Type       json.RawMessage `json:"type"`
			Code       json.RawMessage `json:"code"`
			Status     json.RawMessage `json:"status"` // Google: RESOURCE_EXHAUSTED, INVALID_ARGUMENT...
			InnerError *struct {
				Code json.RawMessage `json:"code"`
			} `json:"innererror"`
		}
		if json.Unmarshal(top.Error, &e) == nil {
			info.Message, info.Type, info.Code = scalar(e.Message), scalar(e.Type), scalar(e.Code)
			if info.Type == "" && len(e.Status) > 0 && e.Status[0] == '"' {
				info.Type = scalar(e.Status) // Google's error.status names the error
			}
			if e.InnerError != nil {
				info.InnerCode = scalar(e.InnerError.Code)
			}
			return info
		}
	}
	info.Message = scalar(top.Error)
	if info.Message == "" {
		info.Message = scalar(top.Message)
	}
	if info.Message == "" && len(top.Detail) > 0 {
		info.Message = scalar(top.Detail)
		if info.Message == "" {
			info.Message = truncateText(string(top.Detail), errorTextMax)
		}
	}
	if t := scalar(top.Type); t != "error" {
		info.Type = t
	}
	info.Code = scalar(top.Code)
	return info
}

// scalar renders a JSON string or number as text; anything else is "".
func scalar(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(raw)
	}
	return ""
}

// newStatusError classifies a non-2xx upstream response once.
func newStatusError(kind string, status int, body []byte, h http.Header) *Error {
	info := parseErrorBody(body)
	class := classifyInfo(kind, status, info) // on the whole message
	info = info.bounded()
	msg := info.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{
		Status:     status,
		Class:      class,
		Type:       info.Type,
		Code:       info.Code,
		Message:    msg,
		RetryAfter: parseRetryAfter(h, time.Now()),
		body:       body,
	}
}

// maxErrorBody bounds how much of an upstream error body is read.
const maxErrorBody = 1 << 20

// readStatusError reads and classifies a non-2xx response, closing its body.
func readStatusError(kind string, resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return newStatusError(kind, resp.StatusCode, body, resp.Header)
}

// maxRetryAfter caps an upstream's Retry-After: far beyond any cooldown_max
// (SPEC 6 caps the wait at it anyway), and far enough from the largest
// time.Duration that adding it to a clock reading cannot overflow.
const maxRetryAfter = 365 * 24 * time.Hour

// parseRetryAfter reads retry-after-ms (OpenAI, fractional milliseconds) or
// Retry-After (delay-seconds or an HTTP date); 0 when absent, past or not
// a number. A delay too long for a time.Duration is maxRetryAfter, never
// a conversion that wraps around to a negative wait (which routing would
// ignore, cooling the deployment for cooldown_base instead of the max).
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); (err == nil || errors.Is(err, strconv.ErrRange)) && ms > 0 {
			return retryDelay(ms, time.Millisecond)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return retryDelay(s, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}

// retryDelay is n units as a wait: 0 unless n is positive (NaN is not),
// at most maxRetryAfter (+Inf included).
func retryDelay(n float64, unit time.Duration) time.Duration {
	if !(n > 0) {
		return 0
	}
	if n >= float64(maxRetryAfter/unit) {
		return maxRetryAfter
	}
	return time.Duration(n * float64(unit))
}

// classifyTransport turns a failure with no HTTP status into an *Error:
// the caller's cancellation is ClassCanceled (it never counts against a
// deployment), a deadline or network timeout is ClassTimeout, anything else
// (dial, reset, TLS, truncated body) is ClassNetwork. ctxErr is the
// attempt context's error, or nil; err is what the transport returned.
func classifyTransport(ctxErr, err error) *Error {
	e := &Error{Class: routing.ClassNetwork, cause: err}
	var ne net.Error
	switch {
	case errors.Is(ctxErr, context.Canceled) || (ctxErr == nil && errors.Is(err, context.Canceled)):
		e.Class, e.Message = routing.ClassCanceled, "request canceled by the client"
		if ctxErr != nil {
			e.cause = ctxErr
		}
		return e
	case errors.Is(ctxErr, context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		e.Class, e.Message = routing.ClassTimeout, "upstream did not answer before the deadline"
		if ctxErr != nil {
			e.cause = ctxErr
		}
		return e
	case errors.As(err, &ne) && ne.Timeout():
		e.Class = routing.ClassTimeout
	}
	// Report the cause without the URL: a base URL may carry query secrets.
	var ue *url.Error
	if errors.As(err, &ue) {
		e.Message = ue.Err.Error()
	} else {
		e.Message = err.Error()
	}
	return e
}

// ctxError is the *Error for a context that ended while the adapter waited.
func ctxError(ctx context.Context) *Error {
	return classifyTransport(ctx.Err(), ctx.Err())
}

// midStreamError is an error event inside a stream that already started:
// a server error (SPEC 7.1), with the upstream's type and message. A
// Gemini event names its HTTP status and is classified by it instead
// (googleEventError).
func midStreamError(data []byte) *Error {
	return errorInBody(data, "upstream sent an error event mid-stream")
}

// errorInBody is an error an upstream sent where an answer belongs (an
// event of a started stream, or a 2xx body): a server error, with the
// upstream's type and message (fallback when it has none).
func errorInBody(data []byte, fallback string) *Error {
	info := parseErrorBody(data).bounded()
	msg := info.Message
	if msg == "" {
		msg = fallback
	}
	return &Error{Class: routing.ClassServerError, Type: info.Type, Code: info.Code, Message: msg, body: append([]byte(nil), data...)}
}

// upstreamGarbage is a 2xx whose body could not be read as the API's JSON.
func upstreamGarbage(err error) *Error {
	return &Error{Class: routing.ClassServerError, Message: "upstream sent malformed JSON: " + err.Error(), cause: err}
}

// streamCut is a stream whose body ended before its end marker.
func streamCut() *Error {
	return &Error{Class: routing.ClassNetwork, Message: "upstream stream ended before its end marker"}
}
