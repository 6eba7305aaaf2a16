package providers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/encoding/httpbinding"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/redact"
	"switchyard/routing"
	"switchyard/tracing"
	"switchyard/wire"
)

// KindBedrock is Amazon Bedrock's Converse API (SPEC 10 `bedrock`).
const KindBedrock = "bedrock"

// bedrockService is the SigV4 signing name of Bedrock Runtime.
const bedrockService = "bedrock"

// eventStreamType is the media type of a converse-stream response.
const eventStreamType = "application/vnd.amazon.eventstream"

// bedrock calls Amazon Bedrock Runtime's Converse API:
// POST {base}/model/{modelId}/converse and /converse-stream, with the model
// id (or inference profile ARN) path-escaped. Requests are signed with
// SigV4 (service bedrock) from static keys or the AWS default credential
// chain, or carry a Bedrock API key as Bearer. Every client format is
// translated through the Messages pivot (translate_anthropic_bedrock.go).
type bedrock struct {
	// immutable after construction
	name    string
	region  string
	base    *url.URL // scheme and host; Path/RawPath the prefix without a trailing slash
	rt      http.RoundTripper
	header  http.Header // Content-Type, provider headers, Bearer; cloned per request
	forward []string
	creds   aws.CredentialsProvider // nil with a Bedrock API key
	signer  *v4.Signer
	now     func() time.Time
}

func newBedrock(p *catalog.Provider) (*bedrock, error) {
	if p.Region == "" {
		return nil, fmt.Errorf("providers: provider %q: region is required for kind bedrock", p.Name)
	}
	base := p.BaseURL
	if base == "" {
		base = "https://bedrock-runtime." + p.Region + ".amazonaws.com"
		if strings.HasPrefix(p.Region, "cn-") {
			base += ".cn" // the China partition's domain
		}
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("providers: provider %q: base_url %q is not an http(s) URL", p.Name, config.RedactURL(base))
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	u.RawQuery, u.Fragment, u.User = "", "", nil
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	for k, v := range p.Headers {
		header.Set(k, v)
	}
	b := &bedrock{name: p.Name, region: p.Region, base: u, rt: newTransport(), header: header,
		forward: forwardable(p.ForwardHeaders), signer: v4.NewSigner(), now: time.Now}
	switch {
	case p.APIKey != "":
		header.Set("Authorization", "Bearer "+p.APIKey)
	case p.AWSAccessKeyID != "":
		b.creds = credentials.NewStaticCredentialsProvider(p.AWSAccessKeyID, p.AWSSecretAccessKey, p.AWSSessionToken)
	default:
		// The default chain: environment, shared files, web identity,
		// container and instance roles, behind the SDK's CredentialsCache,
		// which refreshes them before they expire. Loading reads files only;
		// nothing is fetched until the first request.
		cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(p.Region))
		if err != nil {
			return nil, fmt.Errorf("providers: provider %q: loading the AWS default credential chain: %w", p.Name, err)
		}
		if cfg.Credentials == nil {
			return nil, fmt.Errorf("providers: provider %q: the AWS default credential chain found no credential source", p.Name)
		}
		b.creds = cfg.Credentials
	}
	return b, nil
}

// Do implements Adapter.
func (b *bedrock) Do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error) {
	if req.Client == nil {
		return nil, badRequest("no client request")
	}
	if req.Op != catalog.OpChat {
		return nil, badRequest("provider %q (bedrock) serves chat only, not %s", b.name, req.Op)
	}
	model := upstreamModel(d)
	cv, err := converseRequest(req, model)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(cv)
	if err != nil {
		return nil, badRequest("converse request: %v", err)
	}
	resp, start, err := b.send(ctx, model, body, req)
	if err != nil {
		return nil, err
	}
	h := bedrockRelayHeaders(resp.Header)
	id := bedrockMessageID(resp.Header.Get("X-Amzn-Requestid"))
	if req.Stream {
		ev := newBedrockEvents(req, id, model, start.Unix())
		return startBedrockStream(ctx, resp, ev, start, h)
	}
	ttfb := time.Since(start)
	raw, err := readBody(ctx, resp)
	if err != nil {
		return nil, err
	}
	out, usage, err := converseToClient(raw, req, id, model, start.Unix())
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: h, Body: out, Usage: usage, TTFB: ttfb}, nil
}

// converseToClient translates a Converse response into the client's
// format, through the Messages pivot, with its normalized usage.
func converseToClient(raw []byte, req *Request, id, model string, created int64) ([]byte, Usage, error) {
	msg, usage, err := converseToAnthropic(raw, id, model)
	if err != nil {
		return nil, usage, err
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return nil, usage, upstreamGarbage(err)
	}
	switch req.Client.Format {
	case wire.FormatOpenAI:
		out, _, err = anthropicToOpenAIResponse(out, created)
	case wire.FormatResponses:
		out, _, err = anthropicToResponses(out, req.Client.Responses, created, req.ResponsesDone)
	}
	return out, usage, err
}

// newBedrockEvents is the stream translation for the client's format:
// ConverseStream events -> Messages events -> the client's events.
func newBedrockEvents(req *Request, id, model string, created int64) *bedrockEvents {
	var conv converter
	switch req.Client.Format {
	case wire.FormatOpenAI:
		conv = newAnthropicToOpenAIStream(model, created, req.WantUsage)
	case wire.FormatResponses:
		conv = newAnthropicToResponsesStream(req.Client.Responses, model, created, req.ResponsesDone)
	default:
		conv = &anthropicRelay{}
	}
	return &bedrockEvents{pivot: newConverseToAnthropicStream(id, model), client: conv}
}

// converseRequest translates the client's request through the Messages
// pivot. max_tokens reaches Converse only when the client set it.
func converseRequest(req *Request, model string) (*cvRequest, error) {
	switch req.Client.Format {
	case wire.FormatOpenAI:
		var in oaRequest
		if err := json.Unmarshal(req.Client.Raw, &in); err != nil {
			return nil, badRequest("openai request: %v", err)
		}
		return chatToConverse(&in, model, req.Stream)
	case wire.FormatResponses:
		return responsesToConverse(req.Client.Responses, model, req.Stream)
	}
	return anthropicRawToConverse(req.Client.Raw)
}

// url is the Converse URL of model: the model id or ARN is escaped as one
// path segment (':' and '/' included), and that escaped path is what
// travels and what SigV4 signs.
func (b *bedrock) url(model string, stream bool) *url.URL {
	op := "/converse"
	if stream {
		op = "/converse-stream"
	}
	u := *b.base
	u.Path = b.base.Path + "/model/" + model + op
	u.RawPath = b.base.EscapedPath() + "/model/" + httpbinding.EscapePath(model, true) + op
	return &u
}

// send posts the Converse body, signed or with the Bearer key, and returns
// a 2xx response; any other status is read and classified.
func (b *bedrock) send(ctx context.Context, model string, body []byte, req *Request) (*http.Response, time.Time, error) {
	u := b.url(model, req.Stream)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, time.Time{}, classifyTransport(ctx.Err(), err)
	}
	hreq.URL = u // exactly the escaped path built, which the signer reads
	h := b.header.Clone()
	if req.Stream {
		h.Set("Accept", eventStreamType)
	} else {
		h.Set("Accept", "application/json")
	}
	for _, k := range b.forward {
		if vs := req.Header[k]; len(vs) > 0 {
			h[k] = vs
		}
	}
	hreq.Header = tracing.Inject(ctx, h)
	if b.creds != nil {
		// signed last: every header set above is covered by the signature
		if err := b.sign(ctx, hreq, body); err != nil {
			return nil, time.Time{}, err
		}
	}
	start := time.Now()
	resp, err := b.rt.RoundTrip(hreq)
	if err != nil {
		return nil, start, classifyTransport(ctx.Err(), err)
	}
	if req.FirstByte != nil && !req.Stream {
		req.FirstByte()
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		return nil, start, newBedrockError(resp.StatusCode, resp.Header, raw)
	}
	return resp, start, nil
}

// sign adds the SigV4 headers. A credential the chain cannot produce is an
// auth failure of this deployment (the gateway's configuration, SPEC 15).
func (b *bedrock) sign(ctx context.Context, hreq *http.Request, body []byte) error {
	creds, err := b.creds.Retrieve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return classifyTransport(ctx.Err(), err)
		}
		return &Error{Class: routing.ClassAuth, Message: "AWS credentials unavailable: " + redact.Credentials(err.Error()), cause: err}
	}
	sum := sha256.Sum256(body)
	if err := b.signer.SignHTTP(ctx, creds, hreq, hex.EncodeToString(sum[:]), bedrockService, b.region, b.now()); err != nil {
		return &Error{Class: routing.ClassAuth, Message: "SigV4 signing failed: " + redact.Credentials(err.Error()), cause: err}
	}
	return nil
}

// bedrockRelayHeaders relays Bedrock's request id as upstream-request-id.
func bedrockRelayHeaders(h http.Header) http.Header {
	if id := h.Get("X-Amzn-Requestid"); id != "" {
		return http.Header{"Upstream-Request-Id": {id}}
	}
	return nil
}

// bedrockMessageID derives the Messages id (and from it the chat
// completion id) from Bedrock's request id.
func bedrockMessageID(requestID string) string {
	var sb strings.Builder
	sb.WriteString("msg_bdrk_")
	for _, r := range requestID {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			sb.WriteRune(r)
		}
		if sb.Len() >= 48 {
			break
		}
	}
	if sb.Len() == len("msg_bdrk_") {
		sb.WriteString("switchyard")
	}
	return sb.String()
}

var _ Adapter = (*bedrock)(nil)
