package providers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/internal/jsonspan"
	"switchyard/routing"
	"switchyard/wire"
)

// maxResponseBody bounds a sync upstream response (generated images as
// base64 are the largest legitimate ones).
const maxResponseBody = 64 << 20

// openAI calls any OpenAI-compatible API (SPEC 10): OpenAI, Azure OpenAI
// (api-version from the provider headers), vLLM, Ollama, Groq and the like.
type openAI struct {
	// immutable after construction
	name string
	urls [3]string // chat, embeddings, images endpoints
	httpUpstream
}

func newOpenAI(p *catalog.Provider) (*openAI, error) {
	base := p.BaseURL
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	a := &openAI{name: p.Name}
	header := http.Header{}
	apiVersion := ""
	for k, v := range p.Headers {
		if strings.EqualFold(k, "api-version") {
			apiVersion = v
		}
	}
	for i, path := range []string{"/chat/completions", "/embeddings", "/images/generations"} {
		u, err := endpoint(base, path, apiVersion)
		if err != nil {
			return nil, fmt.Errorf("providers: provider %q: %w", p.Name, err)
		}
		a.urls[i] = u
	}
	header.Set("Content-Type", "application/json")
	if p.APIKey != "" {
		header.Set("Authorization", "Bearer "+p.APIKey)
	}
	for k, v := range p.Headers {
		header.Set(k, v)
	}
	a.httpUpstream = newHTTPUpstream(base, header, p.ForwardHeaders)
	return a, nil
}

// endpoint joins the base URL and an API path, keeping the base's query and
// adding api-version (Azure) when the provider names one.
func endpoint(base, path, apiVersion string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("base_url %q is not an http(s) URL", config.RedactURL(base))
	}
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	if apiVersion != "" {
		q := u.Query()
		q.Set("api-version", apiVersion)
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

func opIndex(op catalog.Operation) int {
	switch op {
	case catalog.OpEmbeddings:
		return 1
	case catalog.OpImages:
		return 2
	}
	return 0
}

var (
	includeUsage = []byte(`{"include_usage":true}`)
	jsonTrue     = []byte("true")
	jsonFalse    = []byte("false")
)

// Do implements Adapter.
func (a *openAI) Do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error) {
	if req.Client == nil {
		return nil, badRequest("no client request")
	}
	model := upstreamModel(d)
	format := req.Client.Format
	anthropicClient := format == wire.FormatAnthropic
	stream := req.Stream && req.Op == catalog.OpChat
	var body []byte
	var err error
	switch {
	case format != wire.FormatOpenAI && req.Op != catalog.OpChat:
		return nil, badRequest("the Anthropic and Responses formats serve chat only")
	case req.Op == catalog.OpImages && req.Client.Stream:
		// an image stream would be read as a sync body: its events relayed
		// as a JSON answer and its usage (in the completed event) never
		// charged; refused before the upstream generates a billed image
		return nil, badRequest("image streaming (\"stream\": true) is not supported: send the request without it")
	case anthropicClient:
		body, err = anthropicToOpenAIRequest(req.Client.Raw, model, stream)
	case format == wire.FormatResponses:
		body, err = responsesToChatBody(req.Client.Responses, model, stream)
	default:
		body = openAIBody(req.Client.Raw, model, req.Op, stream)
	}
	if err != nil {
		return nil, err
	}

	resp, start, err := a.send(ctx, a.urls[opIndex(req.Op)], body, stream, KindOpenAI, req.FirstByte, req.Header)
	if err != nil {
		return nil, err
	}
	h := relayHeaders(resp.Header)
	if stream {
		var conv converter
		switch format {
		case wire.FormatAnthropic:
			conv = newOpenAIToAnthropicStream(model, req.PromptTokens)
		case wire.FormatResponses:
			conv = newChatToResponsesStream(req.Client.Responses, model, start.Unix(), req.ResponsesDone)
		default:
			conv = &openAIRelay{wantUsage: req.WantUsage}
		}
		return startStream(ctx, resp, conv, start, h)
	}
	ttfb := time.Since(start)
	raw, err := readBody(ctx, resp)
	if err != nil {
		return nil, err
	}
	if !jsonObject(raw) {
		return nil, notJSONObject()
	}
	if bytes.Contains(raw, errorKey) && hasError(raw) {
		// a 2xx whose body is an error (OpenRouter, when the model fails
		// after the request was accepted): a failed attempt, not an answer
		return nil, errorInBody(raw, "upstream answered 2xx with an error body")
	}
	usage := openAIUsageOf(raw)
	switch format {
	case wire.FormatAnthropic:
		if raw, err = openAIToAnthropicResponse(raw); err != nil {
			return nil, err
		}
	case wire.FormatResponses:
		if raw, usage, err = chatToResponses(raw, req.Client.Responses, start.Unix(), req.ResponsesDone); err != nil {
			return nil, err
		}
	}
	return &Response{Status: resp.StatusCode, Header: h, Body: raw, Usage: usage, TTFB: ttfb}, nil
}

// openAIBody rewrites an OpenAI-format client body for the upstream: only
// the model value changes, plus, for streams, stream:true and
// stream_options.include_usage (SPEC 3: the gateway always wants usage).
// One pass of top-level edits (wire.EditTopLevel), which also drops any
// second spelling of a key it writes; the body is never re-marshalled.
func openAIBody(raw []byte, model string, op catalog.Operation, stream bool) []byte {
	var q [96]byte
	m := wire.TopLevelEdit{Key: "model", Value: wire.AppendString(q[:0], model)}
	if op != catalog.OpChat {
		return wire.EditTopLevel(raw, m)
	}
	s, e, ok := wire.FindTopLevel(raw, "stream")
	isStream := ok && bytes.Equal(raw[s:e], jsonTrue)
	switch {
	case stream:
		return wire.EditTopLevel(raw, wire.TopLevelEdit{Key: "stream_options", Value: includeUsage}, wire.TopLevelEdit{Key: "stream", Value: jsonTrue}, m)
	case isStream:
		return wire.EditTopLevel(raw, wire.TopLevelEdit{Key: "stream", Value: jsonFalse}, wire.TopLevelEdit{Key: "stream_options"}, m)
	}
	return wire.EditTopLevel(raw, m)
}

// readBody reads a complete 2xx body, bounded, and closes it. The buffer
// grows with the bytes that arrive: a Content-Length is a hint capped at
// 64 KiB, never an allocation. A body its Content-Length gives the size of
// is read into one allocation of that size (bytes.Buffer.ReadFrom wants 512
// bytes free before each read, so a 300-byte answer cost a second buffer of
// 1.1 KB). Over maxResponseBody the attempt is a server_error (SPEC 14), so
// the gateway fails over.
func readBody(ctx context.Context, resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	size := resp.ContentLength
	if size < 0 || size > 64<<10 {
		size = 64 << 10
	}
	buf := make([]byte, 0, size+1) // +1: the read that finds the end needs room
	for {
		if len(buf) == cap(buf) {
			if len(buf) > maxResponseBody {
				return nil, &Error{Class: routing.ClassServerError, Message: "upstream response exceeds 64 MiB"} // no Status: a 2xx is no status to fail with (502, SPEC 14)
			}
			buf = slices.Grow(buf, min(len(buf), maxResponseBody+1-len(buf)))
		}
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, classifyTransport(ctx.Err(), err)
		}
	}
	if len(buf) > maxResponseBody {
		return nil, &Error{Class: routing.ClassServerError, Message: "upstream response exceeds 64 MiB"} // no Status: a 2xx is no status to fail with (502, SPEC 14)
	}
	return buf, nil
}

// openAIUsage is the usage object of OpenAI chat, embeddings and images
// (gpt-image) responses. prompt_tokens (input_tokens) counts the cached
// tokens too; the details say how many of them were cached (SPEC 10.2).
type openAIUsage struct {
	PromptTokens        int          `json:"prompt_tokens"`
	CompletionTokens    int          `json:"completion_tokens"`
	InputTokens         int          `json:"input_tokens"`  // images, Responses
	OutputTokens        int          `json:"output_tokens"` // images, Responses
	PromptTokensDetails openAICached `json:"prompt_tokens_details"`
	InputTokensDetails  openAICached `json:"input_tokens_details"` // images, Responses
	// ReasoningTokens is completion_tokens_details.reasoning_tokens (or
	// output_tokens_details' in the Responses shape): the part of the
	// output that was reasoning, counted in it already.
	ReasoningTokens int
}

type openAICached struct {
	CachedTokens int `json:"cached_tokens"`
}

func (u openAIUsage) usage() Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + u.InputTokens,
		CompletionTokens: u.CompletionTokens + u.OutputTokens,
		CachedTokens:     u.PromptTokensDetails.CachedTokens + u.InputTokensDetails.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens,
	}
}

// openAIUsageOf reads the top-level usage of a response or chunk; ok is
// false when there is none (absent or null).
func openAIUsageOf(body []byte) Usage {
	u, _ := openAIUsageOK(body)
	return u
}

func openAIUsageOK(body []byte) (Usage, bool) {
	s, e, ok := wire.FindTopLevel(body, "usage")
	if !ok || body[s] != '{' {
		return Usage{}, false
	}
	// the counters, read without reflection: every response and usage
	// chunk goes through here
	var u openAIUsage
	ok = wire.EachMember(body[s:e], func(k, v []byte) bool {
		var dst *int
		switch string(k) {
		case "prompt_tokens":
			dst = &u.PromptTokens
		case "completion_tokens":
			dst = &u.CompletionTokens
		case "input_tokens":
			dst = &u.InputTokens
		case "output_tokens":
			dst = &u.OutputTokens
		case "prompt_tokens_details":
			return cachedTokensOf(v, &u.PromptTokensDetails.CachedTokens)
		case "input_tokens_details":
			return cachedTokensOf(v, &u.InputTokensDetails.CachedTokens)
		case "completion_tokens_details", "output_tokens_details":
			return detailTokensOf(v, "reasoning_tokens", &u.ReasoningTokens)
		default:
			return true
		}
		return intOf(v, dst)
	})
	if !ok {
		return Usage{}, false
	}
	return u.usage(), true
}

// intOf reads a JSON integer into dst; null leaves dst as it is (as
// encoding/json does).
func intOf(v []byte, dst *int) bool {
	if string(v) == "null" {
		return true
	}
	n, ok := wire.ParseInt(v)
	*dst = n
	return ok
}

// cachedTokensOf reads cached_tokens from a *_tokens_details object (null:
// nothing to read).
func cachedTokensOf(v []byte, dst *int) bool {
	return detailTokensOf(v, "cached_tokens", dst)
}

// detailTokensOf reads the count named key from a *_tokens_details object
// (null: nothing to read).
func detailTokensOf(v []byte, key string, dst *int) bool {
	if string(v) == "null" {
		return true
	}
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	return wire.EachMember(v, func(k, v []byte) bool {
		if string(k) != key {
			return true
		}
		return intOf(v, dst)
	})
}

// openAIRelay passes an OpenAI stream through to an OpenAI-format client,
// recording usage and dropping the usage-only chunk the client did not ask for.
type openAIRelay struct {
	wantUsage bool
	u         Usage
	events    int
	finished  bool // a choice has had its finish_reason
}

var (
	usageKey  = []byte(`"usage"`)
	errorKey  = []byte(`"error"`)
	finishKey = []byte(`"finish_reason"`)
)

func (c *openAIRelay) event(_ string, data []byte) ([]byte, bool, error) {
	if isDone(data) {
		return appendData(nil, doneData), true, nil
	}
	if bytes.Contains(data, errorKey) && hasError(data) {
		return nil, false, midStreamError(data)
	}
	if bytes.Contains(data, usageKey) {
		if u, ok := openAIUsageOK(data); ok {
			c.u = u
			if !c.wantUsage && emptyChoices(data) {
				return nil, false, nil
			}
		}
	}
	c.events++
	if !c.finished {
		c.finished = hasFinishReason(data)
	}
	return appendData(make([]byte, 0, len(data)+8), data), false, nil
}

// notJSONObject is the failure of a 2xx whose body is not a JSON object.
// It carries no status: a 2xx is no error status to give a client (SPEC 14).
func notJSONObject() *Error {
	return &Error{Class: routing.ClassServerError, Message: "upstream answered 2xx with a body that is not a JSON object"}
}

// jsonObject reports a body shaped as one JSON object: what every answer
// of the APIs is. Anything else in a 2xx (a web page behind a wrong
// base_url, an empty body, a close-delimited body cut short) is a failed
// attempt, never an answer relayed, counted healthy and cached. Its first
// and last bytes are checked, not the whole: a validation would cost about
// a nanosecond a byte of every answer (30 µs for a large embeddings
// answer), and a cut body ends in a closing brace only by chance.
func jsonObject(b []byte) bool {
	b = bytes.TrimRight(b[jsonspan.SkipSpace(b, 0):], " \t\r\n")
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}'
}

// hasError reports a chunk or body that carries an error: a top-level
// "error" member that is not null (some OpenAI-compatible servers write
// "error": null in every chunk of a healthy stream).
func hasError(data []byte) bool {
	s, e, ok := wire.FindTopLevel(data, "error")
	return ok && string(data[s:e]) != "null"
}

// hasFinishReason reports a chunk in which some choice has a finish_reason
// string (not null, not ""): the last chunk of every complete answer. A
// scan, not a parse: every chunk of the hot relay goes through here, and
// inside a JSON string the key's quotes could only appear escaped.
func hasFinishReason(data []byte) bool {
	for rest := data; ; {
		i := bytes.Index(rest, finishKey)
		if i < 0 {
			return false
		}
		escaped := i > 0 && rest[i-1] == '\\'
		rest = rest[i+len(finishKey):]
		if escaped {
			continue
		}
		v := bytes.TrimLeft(rest, " \t\r\n")
		if len(v) == 0 || v[0] != ':' {
			continue
		}
		v = bytes.TrimLeft(v[1:], " \t\r\n")
		if len(v) >= 2 && v[0] == '"' && v[1] != '"' {
			return true
		}
	}
}

// emptyChoices reports a chunk with no choices (the usage-only chunk).
func emptyChoices(data []byte) bool {
	s, e, ok := wire.FindTopLevel(data, "choices")
	if !ok {
		return true
	}
	v := bytes.TrimSpace(data[s:e])
	return string(v) == "null" || (len(v) >= 2 && v[0] == '[' && len(bytes.TrimSpace(v[1:len(v)-1])) == 0)
}

// eof: a server that ends the body cleanly without [DONE] (some
// OpenAI-compatible ones do) after its finish chunk still gets a
// well-formed end for the client. A body that ends before any choice
// finished was cut mid-answer, however cleanly the connection closed: the
// client gets the error, not a [DONE] that passes a half answer off as
// complete (SPEC 7.1).
func (c *openAIRelay) eof() ([]byte, error) {
	if c.events == 0 {
		return nil, &Error{Class: routing.ClassNetwork, Message: "upstream stream ended before any chunk"}
	}
	if !c.finished {
		return nil, streamCut()
	}
	return appendData(nil, doneData), nil
}

func (c *openAIRelay) usage() Usage { return c.u }

var _ Adapter = (*openAI)(nil)
var _ converter = (*openAIRelay)(nil)
