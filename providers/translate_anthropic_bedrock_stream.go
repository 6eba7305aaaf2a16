package providers

// The stream half of the Messages <-> Converse translation
// (translate_anthropic_bedrock.go): ConverseStream events become Messages
// stream events, which the existing Messages -> client converters turn into
// each client format. Shapes follow the Bedrock Runtime API reference
// (ConverseStreamOutput and its event types).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"switchyard/routing"
)

// anEventOut is one Messages stream event to hand to a client converter.
type anEventOut struct {
	name string
	data []byte
}

// converseToAnthropicStream turns ConverseStream events into Messages
// events, one upstream event at a time:
//
//   - message_start is held back until the first content or the stop, so a
//     stream that is filtered before any content is a content_policy
//     attempt error the gateway can still fail over from;
//   - Converse opens text blocks implicitly (only toolUse blocks have a
//     contentBlockStart), so the first delta of a text block opens it;
//   - usage arrives in metadata, after messageStop: message_delta and
//     message_stop are written then (or at the end of the body when
//     metadata never comes);
//   - a Messages block's index is its place in the final content array,
//     so blocks are numbered as they open: a Converse block that is not
//     relayed (reasoningContent, block 0 of a reasoning model) leaves no
//     gap the client's SDK would look up in vain.
type converseToAnthropicStream struct {
	id, model string

	started  bool        // message_start written
	open     map[int]int // Converse block index -> index of the Messages block opened for it
	blocks   int         // Messages blocks opened so far
	content  bool        // any text or tool call relayed
	stop     string      // Converse stopReason; "" until messageStop
	stopped  bool        // messageStop seen
	finished bool        // message_stop written
	u        Usage
}

func newConverseToAnthropicStream(id, model string) *converseToAnthropicStream {
	return &converseToAnthropicStream{id: id, model: model, open: map[int]int{}}
}

// cvStreamEvent is the payload of any ConverseStream event.
type cvStreamEvent struct {
	ContentBlockIndex int `json:"contentBlockIndex"`
	Start             *struct {
		ToolUse *cvToolUse `json:"toolUse"`
	} `json:"start"`
	Delta *struct {
		Text    *string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
	} `json:"delta"`
	StopReason string   `json:"stopReason"`
	Usage      *cvUsage `json:"usage"`
}

func (c *converseToAnthropicStream) emit(out []anEventOut, name string, v any) []anEventOut {
	data, _ := json.Marshal(v)
	return append(out, anEventOut{name: name, data: data})
}

func (c *converseToAnthropicStream) startMessage(out []anEventOut) []anEventOut {
	if c.started {
		return out
	}
	c.started = true
	return c.emit(out, "message_start", map[string]any{"type": "message_start", "message": &anResponse{
		ID: c.id, Type: "message", Role: "assistant", Model: c.model, Content: []anBlock{}, Usage: anUsage{},
	}})
}

// openBlock opens the next Messages block for Converse block index.
func (c *converseToAnthropicStream) openBlock(out []anEventOut, index int, block any) []anEventOut {
	out = c.startMessage(out)
	n := c.blocks
	c.blocks++
	c.open[index] = n
	return c.emit(out, "content_block_start", map[string]any{"type": "content_block_start", "index": n, "content_block": block})
}

// event translates one ConverseStream event (its :event-type and JSON
// payload). done reports that message_stop was written.
func (c *converseToAnthropicStream) event(eventType string, payload []byte) (out []anEventOut, done bool, err error) {
	if c.finished {
		return nil, true, nil
	}
	var ev cvStreamEvent
	if len(bytes.TrimSpace(payload)) > 0 {
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, false, upstreamGarbage(err)
		}
	}
	idx := ev.ContentBlockIndex
	if idx < 0 || idx > 1<<16 {
		return nil, false, &Error{Class: routing.ClassServerError, Message: fmt.Sprintf("upstream sent content block index %d", idx)}
	}
	switch eventType {
	case "messageStart":
	case "contentBlockStart":
		if _, open := c.open[idx]; ev.Start != nil && ev.Start.ToolUse != nil && !open {
			t := ev.Start.ToolUse
			c.content = true
			out = c.openBlock(out, idx, anBlock{Type: "tool_use", ID: t.ToolUseID, Name: t.Name, Input: json.RawMessage("{}")})
		}
	case "contentBlockDelta":
		d := ev.Delta
		switch {
		case d == nil:
		case d.Text != nil:
			if _, open := c.open[idx]; !open {
				// {"type":"text","text":""}, as the Messages API opens text
				out = c.openBlock(out, idx, map[string]string{"type": "text", "text": ""})
			}
			if *d.Text != "" {
				c.content = true
				out = c.emit(out, "content_block_delta", map[string]any{"type": "content_block_delta", "index": c.open[idx],
					"delta": map[string]string{"type": "text_delta", "text": *d.Text}})
			}
		case d.ToolUse != nil:
			if n, open := c.open[idx]; open && d.ToolUse.Input != "" {
				out = c.emit(out, "content_block_delta", map[string]any{"type": "content_block_delta", "index": n,
					"delta": map[string]string{"type": "input_json_delta", "partial_json": d.ToolUse.Input}})
			}
		}
		// reasoningContent and other deltas are not relayed
	case "contentBlockStop":
		if n, open := c.open[idx]; open {
			delete(c.open, idx)
			out = c.emit(out, "content_block_stop", map[string]any{"type": "content_block_stop", "index": n})
		}
	case "messageStop":
		c.stopped, c.stop = true, ev.StopReason
		if contentFiltered(c.stop) && !c.content {
			return nil, false, errContentFiltered(c.stop)
		}
	case "metadata":
		if ev.Usage != nil {
			c.u = ev.Usage.normalized()
		}
		if c.stopped {
			out = c.finish(out)
			return out, true, nil
		}
	}
	return out, false, nil
}

// finish writes the held message_start if need be, closes open blocks, and
// writes message_delta (stop reason, usage) and message_stop.
func (c *converseToAnthropicStream) finish(out []anEventOut) []anEventOut {
	out = c.startMessage(out)
	for _, n := range slices.Sorted(maps.Values(c.open)) {
		out = c.emit(out, "content_block_stop", map[string]any{"type": "content_block_stop", "index": n})
	}
	clear(c.open)
	u := anUsageOf(c.u)
	out = c.emit(out, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"type": "message_delta", "stop_reason": anthropicStop(c.stop), "stop_sequence": nil}, "usage": u})
	c.finished = true
	return c.emit(out, "message_stop", map[string]any{"type": "message_stop"})
}

// eof handles the end of the body: after messageStop it finishes the
// message (metadata is optional); before it the stream was cut.
func (c *converseToAnthropicStream) eof() ([]anEventOut, error) {
	if c.finished {
		return nil, nil
	}
	if !c.stopped {
		return nil, streamCut()
	}
	return c.finish(nil), nil
}
