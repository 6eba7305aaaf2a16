package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"switchyard/catalog"
	"switchyard/wire"
)

// vertexAnthropicVersion is the anthropic_version a Claude body on Vertex
// carries instead of the anthropic-version header
// (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude).
const vertexAnthropicVersion = "vertex-2023-10-16"

// vertex calls Vertex AI (SPEC 10): Gemini models at
// {host}/v1/projects/{project}/locations/{region}/publishers/google/models/{model}:generateContent
// (and :streamGenerateContent?alt=sse) with the Gemini translation, and
// Claude models (an upstream model starting "claude-") at
// .../publishers/anthropic/models/{model}:rawPredict and :streamRawPredict
// with the Messages translation. Requests carry an OAuth2 access token the
// tokenKeeper refreshes in the background.
//
// It scrubs like every HTTP adapter (SPEC 15), and also of the access
// tokens, which change while it runs.
type vertex struct {
	// immutable after construction
	name   string
	google geminiUpstream // publishers/google
	claude string         // publishers/anthropic prefix; methods appended
	keeper *tokenKeeper
	sc     *Scrubber
}

// newVertex builds the adapter and starts its token keeper (the first
// token is fetched here, before any request).
func newVertex(p *catalog.Provider) (*vertex, error) {
	if p.Project == "" || p.Region == "" {
		return nil, fmt.Errorf("providers: provider %q: vertex needs project and region", p.Name)
	}
	host := "https://" + p.Region + "-aiplatform.googleapis.com"
	if p.Region == "global" {
		host = "https://aiplatform.googleapis.com"
	}
	if p.BaseURL != "" {
		host = p.BaseURL
	}
	loc := "/v1/projects/" + url.PathEscape(p.Project) + "/locations/" + url.PathEscape(p.Region) + "/publishers/"
	google, err := endpoint(host, loc+"google", "")
	if err != nil {
		return nil, fmt.Errorf("providers: provider %q: %w", p.Name, err)
	}
	claude, _ := endpoint(host, loc+"anthropic", "")
	claude, _, _ = strings.Cut(claude, "?")
	fetch, key, err := googleTokenFetcher(p, &http.Client{Timeout: tokenFetchTimeout, Transport: newTransport()})
	if err != nil {
		return nil, fmt.Errorf("providers: provider %q: %w", p.Name, err)
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	for k, v := range p.Headers {
		header.Set(k, v)
	}
	up := newHTTPUpstream(host, header, p.ForwardHeaders)
	up.rt = bearerTransport{up.rt}
	v := &vertex{name: p.Name, claude: claude, sc: vertexScrubber(p, key)}
	v.google = newGeminiUpstream(google, KindVertex, up)
	v.keeper = startTokenKeeper(fetch, time.Now, time.After)
	return v, nil
}

// vertexScrubber is the provider's Scrubber plus the secrets of its
// credentials JSON (key, from credentials_json or credentials_file; nil for
// ADC): the private key (as it is and JSON-escaped), its id, and a user
// credential's client secret and refresh token.
func vertexScrubber(p *catalog.Provider, key []byte) *Scrubber {
	sc := NewScrubber(p)
	for _, field := range []string{"private_key", "private_key_id", "client_secret", "refresh_token"} {
		if s, e, ok := wire.FindTopLevel(key, field); ok {
			var v string
			if err := json.Unmarshal(key[s:e], &v); err == nil && len(v) >= minBodySecret {
				sc.secrets = append(sc.secrets, v)
				if esc := string(key[s+1 : e-1]); esc != v {
					sc.secrets = append(sc.secrets, esc)
				}
			}
		}
	}
	sort.Slice(sc.secrets, func(i, j int) bool { return len(sc.secrets[i]) > len(sc.secrets[j]) })
	return sc
}

// isClaude reports an upstream model served by the anthropic publisher.
func isClaude(model string) bool { return strings.HasPrefix(model, "claude-") }

// Do implements Adapter.
func (v *vertex) Do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error) {
	resp, err := v.do(ctx, d, req)
	if err != nil {
		return nil, v.scrubErr(err)
	}
	resp.Body = v.scrubBody(resp.Body)
	resp.Header = v.sc.Header(resp.Header)
	if resp.Stream != nil {
		resp.Stream = vertexStream{resp.Stream, v}
	}
	return resp, nil
}

func (v *vertex) do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error) {
	if req.Client == nil {
		return nil, badRequest("no client request")
	}
	if req.Op != catalog.OpChat {
		return nil, badRequest("provider %q (vertex) serves chat only, not %s", v.name, req.Op)
	}
	tok, err := v.keeper.token()
	if err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, bearerKey{}, tok)
	model := upstreamModel(d)
	if !isClaude(model) {
		return v.google.chat(ctx, model, req)
	}
	body, err := anthropicBodyFor(req, model)
	if err != nil {
		return nil, err
	}
	body = wire.EditTopLevel(body, wire.TopLevelEdit{Key: "anthropic_version", Value: wire.AppendString(nil, vertexAnthropicVersion)}, wire.TopLevelEdit{Key: "model"})
	method := ":rawPredict"
	if req.Stream {
		method = ":streamRawPredict"
	}
	u := v.claude + "/models/" + url.PathEscape(model) + method
	if v.google.query != "" {
		u += "?" + v.google.query
	}
	resp, start, err := v.google.send(ctx, u, body, req.Stream, KindVertex, req.FirstByte, req.Header)
	if err != nil {
		return nil, googleError(err)
	}
	return anthropicReply(ctx, req, model, resp, start)
}

// CloseIdleConnections releases the pool and stops the token refresh of a
// retired adapter (the gateway calls it after a reload replaced it).
func (v *vertex) CloseIdleConnections() {
	if c, ok := v.google.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	v.keeper.Close()
}

// scrubErr scrubs an error of the provider's secrets and of the tokens,
// in every text field (type and code reach the client too).
func (v *vertex) scrubErr(err error) error {
	e := v.sc.Error(err).(*Error)
	for _, t := range v.keeper.secrets() {
		e.Message = strings.ReplaceAll(e.Message, t, redactedSecret)
		e.Type = strings.ReplaceAll(e.Type, t, redactedSecret)
		e.Code = strings.ReplaceAll(e.Code, t, redactedSecret)
		if e.body != nil {
			e.body = bytes.ReplaceAll(e.body, []byte(t), []byte(redactedSecret))
		}
	}
	return e
}

func (v *vertex) scrubBody(b []byte) []byte {
	b = v.sc.Body(b)
	for _, t := range v.keeper.secrets() {
		if bytes.Contains(b, []byte(t)) {
			b = bytes.ReplaceAll(b, []byte(t), []byte(redactedSecret))
		}
	}
	return b
}

// vertexStream scrubs every relayed event and stream error.
type vertexStream struct {
	EventStream
	v *vertex
}

// Next implements EventStream.
func (st vertexStream) Next() ([]byte, error) {
	ev, err := st.EventStream.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return ev, err
		}
		return nil, st.v.scrubErr(err)
	}
	return st.v.scrubBody(ev), nil
}

var (
	_ Adapter     = (*vertex)(nil)
	_ EventStream = vertexStream{}
)
