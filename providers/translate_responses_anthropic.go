package providers

// Translation for a Responses API client (POST /v1/responses) served by an
// Anthropic deployment: the Responses request becomes a Messages request
// (through the chat mapping, so both translations agree on messages, tools
// and images), and the Anthropic message or event stream becomes a
// Responses object or event stream, event by event (SPEC 10.1).

import (
	"encoding/json"
	"strings"

	"switchyard/wire"
)

// responsesToAnthropicBody is the Messages body for a Responses request.
// text.format json_schema becomes output_config.format, as a chat
// request's response_format does (chatToAnthropic); reasoning.effort has
// no Messages equivalent and is dropped (it still chose the tier).
func responsesToAnthropicBody(rq *wire.Responses, model string, stream bool) ([]byte, error) {
	chat, err := responsesToChat(rq, model, stream)
	if err != nil {
		return nil, err
	}
	chat.oaRequest.ResponseFormat = chat.ResponseFormat
	out, err := chatToAnthropic(&chat.oaRequest, model, stream)
	if err != nil {
		return nil, err
	}
	return marshalAnthropic(out)
}

// anthropicToResponses translates an Anthropic message into a response
// object.
func anthropicToResponses(raw []byte, rq *wire.Responses, created int64, done ResponsesDone) ([]byte, Usage, error) {
	var in anResponse
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, Usage{}, upstreamGarbage(err)
	}
	u := in.Usage.usage()
	var text strings.Builder
	var calls []respCallIn
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			calls = append(calls, respCallIn{id: b.ID, name: b.Name, args: string(jsonObjectOr(b.Input))})
		}
	}
	finish := "stop"
	if in.StopReason != nil {
		finish = finishFromStop(*in.StopReason)
	}
	refusal := ""
	if finish == "content_filter" && text.Len() == 0 {
		refusal = declinedRefusal
	}
	return buildResponse(rq, respID(rq), created, in.Model, text.String(), refusal, calls, finish, u, done), u, nil
}

// declinedRefusal is the refusal part of an answer the model refused
// (stop_reason "refusal") without a word of text.
const declinedRefusal = "the model declined to answer"

// anthropicToResponsesStream turns Anthropic events into Responses events.
type anthropicToResponsesStream struct {
	e      *respEmitter
	finish string
	u      Usage
	texted bool // some text was streamed
}

func newAnthropicToResponsesStream(rq *wire.Responses, model string, created int64, done ResponsesDone) *anthropicToResponsesStream {
	return &anthropicToResponsesStream{e: newRespEmitter(rq, created, model, done)}
}

func (c *anthropicToResponsesStream) event(name string, data []byte) ([]byte, bool, error) {
	switch name {
	case "error":
		return nil, false, midStreamError(data)
	case "ping":
		return nil, false, nil
	}
	var ev anEventIn
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, false, upstreamGarbage(err)
	}
	switch ev.Type {
	case "message_start":
		if m := ev.Message; m != nil {
			if m.Model != "" {
				c.e.model = m.Model
			}
			c.u = m.Usage.usage()
		}
		c.e.start()
	case "content_block_start":
		if b := ev.ContentBlock; b != nil {
			switch b.Type {
			case "tool_use":
				c.e.toolStart(ev.Index, b.ID, b.Name)
			case "text":
				c.e.textDelta(b.Text)
				c.texted = c.texted || b.Text != ""
			}
		}
	case "content_block_delta":
		if d := ev.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				c.e.textDelta(d.Text)
				c.texted = c.texted || d.Text != ""
			case "input_json_delta":
				c.e.toolArgs(ev.Index, d.PartialJSON)
			}
		}
	case "message_delta":
		ev.applyMessageDelta(&c.finish, &c.u)
	case "message_stop":
		if c.finish == "content_filter" && !c.texted {
			// as the sync answer (anthropicToResponses): a refusal part
			c.e.refusalDelta(declinedRefusal)
		}
		c.e.finish(c.finish, c.u)
		return c.e.result(true)
	}
	return c.e.result(false)
}

// eof: Anthropic ends every complete stream with message_stop.
func (c *anthropicToResponsesStream) eof() ([]byte, error) { return nil, streamCut() }

func (c *anthropicToResponsesStream) usage() Usage { return c.u }

var _ converter = (*anthropicToResponsesStream)(nil)
