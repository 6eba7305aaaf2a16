package providers

// Rendering a finished chat answer that is not coming from an upstream (a
// response-cache hit or a coalesced follower, SPEC 18) in a client's format
// and mode. The answer is written as an OpenAI chat completion or chunk
// stream and, for the other client formats, goes through the very
// translators a live OpenAI upstream's answer goes through
// (openAIToAnthropicResponse, chatToResponses and their stream
// converters), so a replayed answer has the shapes, event order and
// terminal events of a live one and there is no second copy of them.

import (
	"encoding/json"
	"fmt"

	"switchyard/wire"
)

// Answer is a finished chat answer in neutral form.
type Answer struct {
	ID        string // the chat completion id ("chatcmpl-..."); an Anthropic id derives from it
	Created   int64  // unix seconds
	Model     string // the public model shown to the client
	Text      string
	ToolCalls []AnswerCall
	Finish    string // stop | length | tool_calls
	Usage     Usage
}

// AnswerCall is one tool call of an Answer; Arguments is JSON text.
type AnswerCall struct {
	ID, Name, Arguments string
}

// RenderAnswer renders a as a sync body in format. client is the client's
// parsed request (its Responses settings are echoed); done receives a
// Responses object as for a live answer, and may be nil.
func RenderAnswer(format wire.Format, client *wire.Request, a *Answer, done ResponsesDone) ([]byte, error) {
	msg := &oaOutMsg{Role: "assistant"}
	if a.Text != "" || len(a.ToolCalls) == 0 {
		t := a.Text
		msg.Content = &t
	}
	for _, c := range a.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, oaToolCall{ID: c.ID, Type: "function", Function: oaFunctionCall{Name: c.Name, Arguments: c.Arguments}})
	}
	finish := a.Finish
	body, err := json.Marshal(oaResponse{
		ID: a.ID, Object: "chat.completion", Created: a.Created, Model: a.Model,
		Choices: []oaChoice{{Index: 0, Message: msg, FinishReason: &finish}},
		Usage:   oaUsageOf(a.Usage),
	})
	if err != nil {
		return nil, err
	}
	switch format {
	case wire.FormatOpenAI:
		return body, nil
	case wire.FormatAnthropic:
		return openAIToAnthropicResponse(body)
	case wire.FormatResponses:
		if client == nil || client.Responses == nil {
			return nil, fmt.Errorf("providers: rendering a Responses answer needs the client's Responses request")
		}
		out, _, err := chatToResponses(body, client.Responses, a.Created, done)
		return out, err
	}
	return nil, fmt.Errorf("providers: no answer rendering for format %d", format)
}

// AnswerStream renders a chat answer as it arrives, piece by piece, as the
// framed SSE events of a client format. Each method returns the bytes to
// write (possibly none). It is not safe for concurrent use.
type AnswerStream struct {
	id        string
	created   int64
	model     string
	wantUsage bool      // OpenAI clients: write the usage chunk
	conv      converter // nil for OpenAI clients: the chunks are the output
	started   bool
	ended     bool
}

// NewAnswerStream starts a stream in format. promptTokens is shown in an
// Anthropic message_start (the real usage follows in message_delta);
// wantUsage is the OpenAI client's stream_options.include_usage.
func NewAnswerStream(format wire.Format, client *wire.Request, id string, created int64, model string, promptTokens int, wantUsage bool, done ResponsesDone) (*AnswerStream, error) {
	s := &AnswerStream{id: id, created: created, model: model, wantUsage: wantUsage}
	switch format {
	case wire.FormatOpenAI:
	case wire.FormatAnthropic:
		s.conv = newOpenAIToAnthropicStream(model, promptTokens)
	case wire.FormatResponses:
		if client == nil || client.Responses == nil {
			return nil, fmt.Errorf("providers: streaming a Responses answer needs the client's Responses request")
		}
		s.conv = newChatToResponsesStream(client.Responses, model, created, done)
	default:
		return nil, fmt.Errorf("providers: no answer stream for format %d", format)
	}
	return s, nil
}

// chunk frames one chat chunk and runs it through the converter.
func (s *AnswerStream) chunk(out []byte, d oaDeltaIn, finish *string, u *Usage) []byte {
	ch := oaChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: []oaChunkChoice{{Index: 0, Delta: d, FinishReason: finish}}}
	if u != nil {
		ch.Choices, ch.Usage = []oaChunkChoice{}, oaUsageOf(*u)
	}
	data, _ := json.Marshal(ch)
	return s.event(out, data)
}

func (s *AnswerStream) event(out, data []byte) []byte {
	if s.conv == nil {
		return appendData(out, data)
	}
	b, _, err := s.conv.event("", data)
	if err != nil { // the chunks are ours and well formed
		return out
	}
	return append(out, b...)
}

// start writes the role chunk once.
func (s *AnswerStream) start(out []byte) []byte {
	if s.started {
		return out
	}
	s.started = true
	empty := ""
	return s.chunk(out, oaDeltaIn{Role: "assistant", Content: &empty}, nil, nil)
}

// Text renders a piece of the answer's text.
func (s *AnswerStream) Text(t string) []byte {
	out := s.start(nil)
	if t == "" {
		return out
	}
	return s.chunk(out, oaDeltaIn{Content: &t}, nil, nil)
}

// ToolCall renders a piece of tool call index: its start when id or name is
// set, and a piece of its arguments.
func (s *AnswerStream) ToolCall(index int, id, name, args string) []byte {
	out := s.start(nil)
	tc := oaToolCall{Index: &index, Function: oaFunctionCall{Arguments: args}}
	if id != "" || name != "" {
		tc.ID, tc.Type, tc.Function.Name = id, "function", name
	} else if args == "" {
		return out
	}
	return s.chunk(out, oaDeltaIn{ToolCalls: []oaToolCall{tc}}, nil, nil)
}

// Finish renders the end: the finish chunk, the usage chunk (OpenAI: when
// asked), and the format's terminal events. Later calls write nothing.
func (s *AnswerStream) Finish(finish string, u Usage) []byte {
	if s.ended {
		return nil
	}
	out := s.start(nil)
	s.ended = true
	out = s.chunk(out, oaDeltaIn{}, &finish, nil)
	if s.conv != nil || s.wantUsage {
		out = s.chunk(out, oaDeltaIn{}, nil, &u)
	}
	return s.event(out, doneData)
}
