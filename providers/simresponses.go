package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"switchyard/wire"
)

// The simulated provider's Responses API side: the simulated chat answer
// (the same tokens, pacing and usage) goes through the same chat ->
// Responses translation as an OpenAI upstream, so a simulated deployment
// serves POST /v1/responses exactly as an openai one would. A request whose
// tool_choice forces a tool ("required" or a named function) and whose last
// input item is not a tool result is answered with a call of that tool
// (arguments "{}"), so tool loops can be exercised without a real model.

// simResponses answers a Responses request with n tokens (or a tool call).
func (s *Simulated) simResponses(ctx context.Context, req *Request, p *simProfile, model string, id uint64, created int64, n int, finish string, ttfb time.Duration) (*Response, error) {
	rq := req.Client.Responses
	if name := simForcedTool(rq); name != "" {
		callID := "call_sim_" + itemID("", respID(rq), int(id))
		if req.Stream {
			e := newRespEmitter(rq, created, model, req.ResponsesDone)
			e.toolStart(0, callID, name)
			e.toolArgs(0, "{}")
			e.finish("tool_calls", Usage{PromptTokens: req.PromptTokens, CompletionTokens: 1})
			st := &staticStream{frames: e.take(), u: Usage{PromptTokens: req.PromptTokens, CompletionTokens: 1}}
			return &Response{Status: http.StatusOK, Stream: st, TTFB: ttfb}, nil
		}
		u := Usage{PromptTokens: req.PromptTokens, CompletionTokens: 1}
		body := buildResponse(rq, respID(rq), created, model, "", "", []respCallIn{{id: callID, name: name, args: "{}"}}, "tool_calls", u, req.ResponsesDone)
		return &Response{Status: http.StatusOK, Body: body, Usage: u, TTFB: ttfb}, nil
	}
	if req.Stream {
		inner := newSimStream(ctx, wire.FormatOpenAI, model, id, created, req.PromptTokens, n, finish, true, p.interval)
		st := &reframedStream{inner: inner, conv: newChatToResponsesStream(rq, model, created, req.ResponsesDone)}
		return &Response{Status: http.StatusOK, Stream: st, TTFB: ttfb}, nil
	}
	// the same answer the chat path builds, straight into the response object
	u := Usage{PromptTokens: req.PromptTokens, CompletionTokens: n}
	text := string(appendSimText(make([]byte, 0, n*7), n))
	body := buildResponse(rq, respID(rq), created, model, text, "", nil, finish, u, req.ResponsesDone)
	return &Response{Status: http.StatusOK, Body: body, Usage: u, TTFB: ttfb}, nil
}

// simForcedTool is the tool the simulator calls: the named one, or the
// first declared one under "required"; "" when the answer is text.
func simForcedTool(rq *wire.Responses) string {
	if len(rq.Tools) == 0 || len(rq.ToolChoice) == 0 {
		return ""
	}
	if n := len(rq.Input); n > 0 && rq.Input[n-1].Type == "function_call_output" {
		return ""
	}
	if string(rq.ToolChoice) == `"required"` {
		return rq.Tools[0].Name
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(rq.ToolChoice, &named) == nil && named.Type == "function" {
		return named.Name
	}
	return ""
}

// reframedStream runs another stream's framed events through a converter:
// each Next reads inner frames until the converter produced bytes.
type reframedStream struct {
	inner EventStream
	conv  converter
	done  bool
}

// Ended implements EventStream.
func (r *reframedStream) Ended() bool { return r.done }

// Next implements EventStream.
func (r *reframedStream) Next() ([]byte, error) {
	for !r.done {
		frames, err := r.inner.Next()
		if err == io.EOF {
			r.done = true
			out, err := r.conv.eof()
			if err != nil {
				return nil, err
			}
			if len(out) > 0 {
				return out, nil
			}
			break
		}
		if err != nil {
			return nil, err
		}
		var out []byte
		for len(frames) > 0 {
			var name string
			var data []byte
			name, data, frames = nextFrame(frames)
			if data == nil {
				continue
			}
			b, done, err := r.conv.event(name, data)
			if err != nil {
				r.done = true
				return nil, err
			}
			out = append(out, b...)
			if done {
				r.done = true
				break
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, io.EOF
}

// nextFrame splits the first SSE event off framed bytes (single-line data,
// as the simulator writes them).
func nextFrame(b []byte) (name string, data, rest []byte) {
	end := bytes.Index(b, []byte("\n\n"))
	frame := b
	if end >= 0 {
		frame, rest = b[:end], b[end+2:]
	}
	for len(frame) > 0 {
		line := frame
		if i := bytes.IndexByte(frame, '\n'); i >= 0 {
			line, frame = frame[:i], frame[i+1:]
		} else {
			frame = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte("event: ")); ok {
			name = string(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			data = v
		}
	}
	return name, data, rest
}

// Usage implements EventStream.
func (r *reframedStream) Usage() Usage { return r.inner.Usage() }

// Close implements EventStream.
func (r *reframedStream) Close() error { return r.inner.Close() }

// staticStream yields prebuilt frames once.
type staticStream struct {
	frames []byte
	u      Usage
}

// Ended implements EventStream: its one slice of frames is the whole stream.
func (s *staticStream) Ended() bool { return s.frames == nil }

// Next implements EventStream.
func (s *staticStream) Next() ([]byte, error) {
	if s.frames == nil {
		return nil, io.EOF
	}
	out := s.frames
	s.frames = nil
	return out, nil
}

// Usage implements EventStream.
func (s *staticStream) Usage() Usage { return s.u }

// Close implements EventStream.
func (s *staticStream) Close() error { return nil }

var (
	_ EventStream = (*reframedStream)(nil)
	_ EventStream = (*staticStream)(nil)
)
