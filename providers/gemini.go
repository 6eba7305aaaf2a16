package providers

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"switchyard/catalog"
	"switchyard/routing"
	"switchyard/wire"
)

// The Google provider kinds of SPEC 1.
const (
	KindGemini = "gemini"
	KindVertex = "vertex"
)

// geminiDefaultBase is the Gemini API root when the provider names none.
const geminiDefaultBase = "https://generativelanguage.googleapis.com/v1beta"

// gemini calls the Gemini API natively (SPEC 10):
// POST {base}/models/{model}:generateContent, :streamGenerateContent?alt=sse
// and :batchEmbedContents, with the key in x-goog-api-key. Every client
// format (chat, Messages, Responses) is translated both ways.
type gemini struct {
	// immutable after construction
	name string
	g    geminiUpstream
}

func newGemini(p *catalog.Provider) (*gemini, error) {
	base := p.BaseURL
	if base == "" {
		base = geminiDefaultBase
	}
	prefix, err := endpoint(base, "", "")
	if err != nil {
		return nil, fmt.Errorf("providers: provider %q: %w", p.Name, err)
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	if p.APIKey != "" {
		header.Set("X-Goog-Api-Key", p.APIKey)
	}
	for k, v := range p.Headers {
		header.Set(k, v)
	}
	return &gemini{name: p.Name, g: newGeminiUpstream(prefix, KindGemini, newHTTPUpstream(base, header, p.ForwardHeaders))}, nil
}

// Do implements Adapter.
func (a *gemini) Do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error) {
	if req.Client == nil {
		return nil, badRequest("no client request")
	}
	switch req.Op {
	case catalog.OpChat:
		return a.g.chat(ctx, upstreamModel(d), req)
	case catalog.OpEmbeddings:
		return a.g.embed(ctx, upstreamModel(d), req)
	}
	return nil, badRequest("provider %q (gemini) serves chat and embeddings, not %s", a.name, req.Op)
}

// geminiUpstream is the Gemini wire protocol at one URL prefix: the Gemini
// API's base, or a Vertex publishers/google path. Methods go to
// {prefix}/models/{model}:{method}.
type geminiUpstream struct {
	prefix string // without the base URL's query
	query  string // the base URL's query, kept on every call
	kind   string // classification table: gemini or vertex
	httpUpstream
}

func newGeminiUpstream(prefix, kind string, up httpUpstream) geminiUpstream {
	prefix, query, _ := strings.Cut(prefix, "?")
	return geminiUpstream{prefix: prefix, query: query, kind: kind, httpUpstream: up}
}

// methodURL is the URL of a model's method; the model is path-escaped, a
// "models/" prefix the operator wrote is dropped.
func (g *geminiUpstream) methodURL(model, method string) string {
	model = strings.TrimPrefix(model, "models/")
	u := g.prefix + "/models/" + url.PathEscape(model) + ":" + method
	switch {
	case g.query == "":
		return u
	case strings.Contains(method, "?"):
		return u + "&" + g.query
	}
	return u + "?" + g.query
}

// chat makes one generateContent or streamGenerateContent call.
func (g *geminiUpstream) chat(ctx context.Context, model string, req *Request) (*Response, error) {
	format := req.Client.Format
	var body []byte
	var err error
	switch format {
	case wire.FormatAnthropic:
		body, err = anthropicToGeminiRequest(req.Client.Raw, model)
	case wire.FormatResponses:
		body, err = responsesToGeminiBody(req.Client.Responses, model)
	default:
		body, err = openAIToGeminiRequest(req.Client.Raw, model)
	}
	if err != nil {
		return nil, err
	}
	method := "generateContent"
	if req.Stream {
		method = "streamGenerateContent?alt=sse"
	}
	resp, start, err := g.send(ctx, g.methodURL(model, method), body, req.Stream, g.kind, req.FirstByte, req.Header)
	if err != nil {
		return nil, googleError(err)
	}
	h := relayHeaders(resp.Header)
	if req.Stream {
		var conv converter
		switch format {
		case wire.FormatAnthropic:
			conv = newGeminiToAnthropicStream(model, start.Unix(), req.PromptTokens)
		case wire.FormatResponses:
			conv = newGeminiToResponsesStream(req.Client.Responses, model, start.Unix(), req.ResponsesDone)
		default:
			conv = newGeminiStream(model, start.Unix(), req.WantUsage, nil)
		}
		return startStream(ctx, resp, conv, start, h)
	}
	ttfb := time.Since(start)
	raw, err := readBody(ctx, resp)
	if err != nil {
		return nil, err
	}
	var usage Usage
	switch format {
	case wire.FormatAnthropic:
		raw, usage, err = geminiToAnthropicResponse(raw, model)
	case wire.FormatResponses:
		raw, usage, err = geminiToResponses(raw, req.Client.Responses, model, start.Unix(), req.ResponsesDone)
	default:
		raw, usage, err = geminiToOpenAIResponse(raw, model, start.Unix())
	}
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: h, Body: raw, Usage: usage, TTFB: ttfb}, nil
}

// googleError presents a Google error to the client in OpenAI terms: the
// Google status (RESOURCE_EXHAUSTED...) becomes the code, the type is the
// OpenAI one of its class. The class was decided once, from the status.
func googleError(err error) error {
	e := AsError(err)
	if e.Status == 0 || e.Code == "" || e.Type == "" || strings.ToUpper(e.Type) != e.Type {
		return err // a transport error, or not Google-shaped (Claude on Vertex)
	}
	c := *e
	c.Code = strings.ToLower(e.Type)
	if c.RetryAfter == 0 {
		c.RetryAfter = googleRetryDelay(e.body)
	}
	switch e.Class {
	case routing.ClassRateLimited:
		c.Type = "rate_limit_exceeded"
	case routing.ClassContextWindow:
		c.Type, c.Code = "invalid_request_error", "context_length_exceeded"
	case routing.ClassContentPolicy, routing.ClassBadRequest, routing.ClassNotFound:
		c.Type = "invalid_request_error"
	default:
		c.Type = "upstream_error"
	}
	return &c
}

// googleEventError is a Google error object where an answer belongs: an
// event of streamGenerateContent (the API reports a failure after its 200
// that way, a quota exhausted in the first event included) or a 2xx body.
// It is classified as the HTTP error it stands for (SPEC 7.4, 10 gemini),
// its error.code the status and its error.status the type, by geminiTable:
// RESOURCE_EXHAUSTED (429) is rate_limited, with status 429 and Gemini's
// RetryInfo delay, so before the first byte the gateway fails over and
// cools the deployment as for an HTTP 429 (Gemini's error codes:
// https://ai.google.dev/gemini-api/docs/troubleshooting). An error naming
// neither a code nor a status the table knows stays a server error.
func googleEventError(data []byte) *Error {
	info := parseErrorBody(data)
	status := 0
	if n, err := strconv.Atoi(info.Code); err == nil && n >= 400 && n <= 599 {
		status = n
	}
	class := classifyInfo(KindGemini, status, info) // on the whole message
	if status == 0 && class == routing.ClassRateLimited {
		status = http.StatusTooManyRequests // the status RESOURCE_EXHAUSTED maps to
	}
	info = info.bounded()
	e := &Error{Status: status, Class: class, Type: info.Type, Code: info.Code, Message: info.Message, body: append([]byte(nil), data...)}
	if e.Message == "" {
		e.Message = "upstream sent an error event mid-stream"
	}
	if e.Code == "" && status != 0 {
		e.Code = strconv.Itoa(status)
	}
	return googleError(e).(*Error)
}

// maxRetryDelay caps a retryDelay an upstream asks for.
const maxRetryDelay = 5 * time.Minute

// googleRetryDelay reads the retryDelay of a google.rpc.RetryInfo in a
// Google error's details ("retryDelay": "37s"), which Gemini sends on
// RESOURCE_EXHAUSTED instead of a Retry-After header; 0 when absent.
func googleRetryDelay(body []byte) time.Duration {
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return 0
	}
	for _, d := range e.Error.Details {
		if !strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			continue
		}
		if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
			return min(v, maxRetryDelay)
		}
	}
	return 0
}

// embed makes one batchEmbedContents call for an OpenAI embeddings request
// (https://ai.google.dev/api/embeddings#method:-models.batchembedcontents):
// one request per input, dimensions as outputDimensionality. Gemini reports
// no usage for embeddings: the gateway's prompt estimate stands in.
func (g *geminiUpstream) embed(ctx context.Context, model string, req *Request) (*Response, error) {
	if req.Client.Format != wire.FormatOpenAI {
		return nil, badRequest("embeddings take the OpenAI format")
	}
	var in struct {
		Dimensions     *int   `json:"dimensions"`
		EncodingFormat string `json:"encoding_format"`
	}
	_ = json.Unmarshal(req.Client.Raw, &in) // validated by wire
	if len(req.Client.Input) == 0 {
		return nil, badRequest("input: Gemini embeds text inputs only")
	}
	type embedReq struct {
		Model                string    `json:"model"`
		Content              gmContent `json:"content"`
		OutputDimensionality *int      `json:"outputDimensionality,omitempty"`
	}
	name := "models/" + strings.TrimPrefix(model, "models/")
	var body struct {
		Requests []embedReq `json:"requests"`
	}
	for _, text := range req.Client.Input {
		body.Requests = append(body.Requests, embedReq{Model: name, Content: gmContent{Parts: []gmPart{{Text: text}}}, OutputDimensionality: in.Dimensions})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, badRequest("input: %v", err)
	}
	resp, start, err := g.send(ctx, g.methodURL(model, "batchEmbedContents"), b, false, g.kind, req.FirstByte, req.Header)
	if err != nil {
		return nil, googleError(err)
	}
	ttfb := time.Since(start)
	raw, err := readBody(ctx, resp)
	if err != nil {
		return nil, err
	}
	var out struct {
		Embeddings []struct {
			Values []float64 `json:"values"`
		} `json:"embeddings"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, upstreamGarbage(err)
	}
	if len(out.Embeddings) != len(req.Client.Input) {
		// no Status: the upstream's 200 is not a status to answer a
		// failure with (the gateway's 502 stands in, SPEC 14)
		return nil, &Error{Class: routing.ClassServerError,
			Message: fmt.Sprintf("Gemini returned %d embeddings for %d inputs", len(out.Embeddings), len(req.Client.Input))}
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	u := Usage{PromptTokens: req.PromptTokens}
	list := struct {
		Object string   `json:"object"`
		Data   []item   `json:"data"`
		Model  string   `json:"model"`
		Usage  *oaUsage `json:"usage"`
	}{Object: "list", Model: model, Usage: oaUsageOf(u)}
	for i, e := range out.Embeddings {
		var v any = e.Values
		if e.Values == nil {
			v = []float64{}
		}
		if in.EncodingFormat == "base64" {
			v = float32Base64(e.Values)
		}
		list.Data = append(list.Data, item{Object: "embedding", Index: i, Embedding: v})
	}
	b, err = json.Marshal(list)
	if err != nil {
		return nil, upstreamGarbage(err)
	}
	return &Response{Status: resp.StatusCode, Header: relayHeaders(resp.Header), Body: b, Usage: u, TTFB: ttfb}, nil
}

// float32Base64 is an embedding as OpenAI's encoding_format "base64" has
// it: little-endian float32s, base64-encoded.
func float32Base64(v []float64) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(b)
}

var _ Adapter = (*gemini)(nil)
