package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"switchyard/catalog"
	"switchyard/routing"
	"switchyard/wire"
)

// anthropicVersion is the Messages API version the adapter speaks; a
// provider header anthropic-version overrides it.
const anthropicVersion = "2023-06-01"

// anthropic calls the native Anthropic Messages API (SPEC 10). An
// Anthropic-format client passes through with only the model rewritten; an
// OpenAI-format client is translated both ways.
type anthropic struct {
	// immutable after construction
	name string
	url  string
	httpUpstream
}

func newAnthropic(p *catalog.Provider) (*anthropic, error) {
	base := p.BaseURL
	if base == "" {
		base = "https://api.anthropic.com/v1"
	}
	u, err := endpoint(base, "/messages", "")
	if err != nil {
		return nil, fmt.Errorf("providers: provider %q: %w", p.Name, err)
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Anthropic-Version", anthropicVersion)
	if p.APIKey != "" {
		header.Set("X-Api-Key", p.APIKey)
	}
	for k, v := range p.Headers {
		header.Set(k, v)
	}
	// the Anthropic SDKs' beta and version headers reach an Anthropic
	// deployment (prompt caching and other betas), plus the provider's list
	forward := append([]string{"Anthropic-Beta", "Anthropic-Version"}, p.ForwardHeaders...)
	return &anthropic{name: p.Name, url: u, httpUpstream: newHTTPUpstream(base, header, forward)}, nil
}

// Do implements Adapter.
func (a *anthropic) Do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error) {
	if req.Client == nil {
		return nil, badRequest("no client request")
	}
	if req.Op != catalog.OpChat {
		return nil, badRequest("provider %q (anthropic) serves chat only, not %s", a.name, req.Op)
	}
	model := upstreamModel(d)
	body, err := anthropicBodyFor(req, model)
	if err != nil {
		return nil, err
	}

	resp, start, err := a.send(ctx, a.url, body, req.Stream, KindAnthropic, req.FirstByte, req.Header)
	if err != nil {
		return nil, err
	}
	return anthropicReply(ctx, req, model, resp, start)
}

// anthropicBodyFor is the Messages body of req in any client format.
func anthropicBodyFor(req *Request, model string) ([]byte, error) {
	switch req.Client.Format {
	case wire.FormatOpenAI:
		return openAIToAnthropicRequest(req.Client.Raw, model, req.Stream)
	case wire.FormatResponses:
		return responsesToAnthropicBody(req.Client.Responses, model, req.Stream)
	}
	return anthropicBody(req.Client.Raw, model, req.Stream), nil
}

// anthropicReply reads a 2xx Messages answer (sync, or the event stream)
// into the client's format; the vertex adapter's Claude models share it.
func anthropicReply(ctx context.Context, req *Request, model string, resp *http.Response, start time.Time) (*Response, error) {
	format := req.Client.Format
	openAIClient := format == wire.FormatOpenAI
	h := relayHeaders(resp.Header)
	if req.Stream {
		var conv converter
		switch format {
		case wire.FormatOpenAI:
			conv = newAnthropicToOpenAIStream(model, start.Unix(), req.WantUsage)
		case wire.FormatResponses:
			conv = newAnthropicToResponsesStream(req.Client.Responses, model, start.Unix(), req.ResponsesDone)
		default:
			conv = &anthropicRelay{}
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
	var usage Usage
	switch {
	case openAIClient:
		if raw, usage, err = anthropicToOpenAIResponse(raw, start.Unix()); err != nil {
			return nil, err
		}
	case format == wire.FormatResponses:
		if raw, usage, err = anthropicToResponses(raw, req.Client.Responses, start.Unix(), req.ResponsesDone); err != nil {
			return nil, err
		}
	default:
		usage = anthropicUsageOf(raw)
	}
	return &Response{Status: resp.StatusCode, Header: h, Body: raw, Usage: usage, TTFB: ttfb}, nil
}

// anthropicBody rewrites an Anthropic-format client body: the model, and
// the stream flag when the gateway's mode differs from the body's.
func anthropicBody(raw []byte, model string, stream bool) []byte {
	var q [96]byte
	edits := [2]wire.TopLevelEdit{{Key: "model", Value: wire.AppendString(q[:0], model)}}
	s, e, ok := wire.FindTopLevel(raw, "stream")
	isStream := ok && bytes.Equal(raw[s:e], jsonTrue)
	if stream != isStream {
		edits[1] = wire.TopLevelEdit{Key: "stream", Value: jsonFalse}
		if stream {
			edits[1].Value = jsonTrue
		}
		return wire.EditTopLevel(raw, edits[1], edits[0])
	}
	return wire.EditTopLevel(raw, edits[0])
}

// anthropicUsageOf reads the usage of an Anthropic message.
func anthropicUsageOf(body []byte) Usage {
	s, e, ok := wire.FindTopLevel(body, "usage")
	if !ok {
		return Usage{}
	}
	var u anUsage
	if json.Unmarshal(body[s:e], &u) != nil {
		return Usage{}
	}
	return u.usage()
}

// anthropicRelay passes an Anthropic stream through to an Anthropic-format
// client, recording usage from message_start and message_delta.
type anthropicRelay struct {
	u Usage
	// stopped: a message_delta carried the stop_reason, so the message is
	// complete but for its message_stop
	stopped bool
}

func (c *anthropicRelay) event(name string, data []byte) ([]byte, bool, error) {
	done := false
	switch name {
	case "error":
		return nil, false, midStreamError(data)
	case "message_start":
		if s, e, ok := wire.FindTopLevel(data, "message"); ok {
			u := anthropicUsageOf(data[s:e])
			c.u = u
		}
	case "message_delta":
		if s, e, ok := wire.FindTopLevel(data, "usage"); ok {
			var u anUsage
			if json.Unmarshal(data[s:e], &u) == nil {
				c.u.mergeDelta(u)
			}
		}
		if s, e, ok := wire.FindTopLevel(data, "delta"); ok {
			d := data[s:e]
			if s, _, ok := wire.FindTopLevel(d, "stop_reason"); ok && d[s] == '"' {
				c.stopped = true
			}
		}
	case "message_stop":
		done = true
	case "":
		if isDone(data) {
			return c.done()
		}
	}
	return appendEvent(make([]byte, 0, len(name)+len(data)+17), name, data), done, nil
}

// done handles OpenAI's data: [DONE], which an Anthropic-compatible proxy
// may send: Anthropic's stream has no such event (its event flow ends with
// message_stop: docs.claude.com/en/docs/build-with-claude/streaming), so
// it is never relayed. After the stop_reason it ends the message with the
// message_stop the client waits for; before it, the answer was cut.
func (c *anthropicRelay) done() ([]byte, bool, error) {
	if !c.stopped {
		return nil, false, &Error{Class: routing.ClassNetwork, Message: "upstream ended the stream with [DONE] before the message's stop_reason"}
	}
	return appendEvent(nil, "message_stop", messageStopData), true, nil
}

// eof: Anthropic ends every complete stream with message_stop.
func (c *anthropicRelay) eof() ([]byte, error) { return nil, streamCut() }

func (c *anthropicRelay) usage() Usage { return c.u }

var _ Adapter = (*anthropic)(nil)
var _ converter = (*anthropicRelay)(nil)
