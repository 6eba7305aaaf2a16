package providers

// Translation for an Anthropic-format client (POST /v1/messages) served by
// an OpenAI-compatible or simulated deployment: the Anthropic request
// becomes an OpenAI chat request, and the OpenAI response or chunk stream
// becomes an Anthropic message or event stream (SPEC 10).

import (
	"bytes"
	"encoding/json"
	"strings"
)

// anthropicToOpenAIRequest translates an Anthropic Messages body into an
// OpenAI chat completions body for model.
func anthropicToOpenAIRequest(raw []byte, model string, stream bool) ([]byte, error) {
	out, err := anthropicToOpenAIChat(raw, model, stream)
	if err != nil {
		return nil, err
	}
	return marshalOpenAI(out)
}

// anthropicToOpenAIChat is the chat request for an Anthropic Messages body.
func anthropicToOpenAIChat(raw []byte, model string, stream bool) (*oaRequest, error) {
	var in struct {
		anRequest
		TopK *int `json:"top_k"` // no OpenAI equivalent; dropped
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest("anthropic request: %v", err)
	}
	out := oaRequest{Model: model, Temperature: in.Temperature, TopP: in.TopP, Stream: stream}
	if in.MaxTokens > 0 {
		mt := in.MaxTokens
		out.MaxTokens = &mt
	}
	if stream {
		out.StreamOptions = includeUsage
	}
	if len(in.StopSequences) > 0 {
		out.Stop, _ = json.Marshal(in.StopSequences)
	}
	if in.Metadata != nil {
		out.User = in.Metadata.UserID
	}
	if sys, err := anthropicText(in.System); err != nil {
		return nil, badRequest("system: %v", err)
	} else if sys != "" {
		out.Messages = append(out.Messages, oaMessage{Role: "system", Content: rawString(sys)})
	}
	for i, m := range in.Messages {
		msgs, err := anthropicMessageToOpenAI(m)
		if err != nil {
			return nil, badRequest("messages[%d]: %v", i, err)
		}
		out.Messages = append(out.Messages, msgs...)
	}
	for _, t := range in.Tools {
		params := t.InputSchema
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, oaTool{Type: "function", Function: oaFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			out.ToolChoice = rawString("auto")
		case "any":
			out.ToolChoice = rawString("required")
		case "none":
			out.ToolChoice = rawString("none")
		case "tool":
			out.ToolChoice, _ = json.Marshal(oaTool{Type: "function", Function: oaFunction{Name: tc.Name}})
		}
		if tc.DisableParallelToolUse && len(out.Tools) > 0 {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	return &out, nil
}

// marshalOpenAI is json.Marshal(out), byte for byte
// (TestMarshalOpenAIIsJSONMarshal), without encoding/json compacting each
// message's content again (marshalMessages).
func marshalOpenAI(out *oaRequest) ([]byte, error) {
	return marshalMessages(out, &out.Messages, func(m *oaMessage) *json.RawMessage { return &m.Content })
}

// anthropicMessageToOpenAI maps one Anthropic message to OpenAI messages:
// tool_result blocks become role "tool" messages (placed first, right after
// the assistant turn that called them), tool_use blocks become tool_calls.
func anthropicMessageToOpenAI(m anMessage) ([]oaMessage, error) {
	if len(m.Content) > 0 && m.Content[0] == '"' {
		return []oaMessage{{Role: m.Role, Content: m.Content}}, nil
	}
	var blocks []anBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, err
	}
	var out []oaMessage
	var parts []oaPart
	var calls []oaToolCall
	hasImage := false
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, oaPart{Type: "text", Text: b.Text})
		case "image":
			if b.Source == nil {
				continue
			}
			u := b.Source.URL
			if b.Source.Type == "base64" {
				u = "data:" + b.Source.MediaType + ";base64," + b.Source.Data
			}
			parts = append(parts, oaPart{Type: "image_url", ImageURL: &oaImageURL{URL: u}})
			hasImage = true
		case "tool_use":
			calls = append(calls, oaToolCall{ID: b.ID, Type: "function", Function: oaFunctionCall{Name: b.Name, Arguments: string(jsonObjectOr(b.Input))}})
		case "tool_result":
			text, err := anthropicText(b.Content)
			if err != nil {
				return nil, err
			}
			if b.IsError && !strings.HasPrefix(text, "Error") {
				text = "Error: " + text
			}
			out = append(out, oaMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: rawString(text)})
		default:
			// thinking, redacted_thinking, documents...: nothing OpenAI can take
		}
	}
	if len(parts) == 0 && len(calls) == 0 {
		return out, nil
	}
	msg := oaMessage{Role: m.Role, ToolCalls: calls}
	switch {
	case hasImage:
		msg.Content, _ = json.Marshal(parts)
	case len(parts) > 0:
		texts := make([]string, len(parts))
		for i, p := range parts {
			texts[i] = p.Text
		}
		msg.Content = rawString(strings.Join(texts, "\n"))
	default:
		msg.Content = json.RawMessage("null")
	}
	return append(out, msg), nil
}

// anthropicText flattens a string or an array of text blocks.
func anthropicText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var blocks []anBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", err
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// oaResponseIn is a chat completion or chunk as read from an upstream. Its
// usage is left undecoded: openAIUsageOK reads it, as for an OpenAI
// client, so a count the scanner does not take (1e2, 9.0, beyond int64)
// leaves the usage unknown instead of failing an answer that was served
// and charged upstream (SPEC 14).
type oaResponseIn struct {
	oaResponse
	Usage json.RawMessage `json:"usage"`
}

// openAIToAnthropicResponse translates an OpenAI chat completion into an
// Anthropic message.
func openAIToAnthropicResponse(raw []byte) ([]byte, error) {
	var in oaResponseIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, upstreamGarbage(err)
	}
	out := anResponse{ID: anthropicID(in.ID), Type: "message", Role: "assistant", Model: in.Model, Content: []anBlock{}}
	stop := "end_turn"
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		if c.FinishReason != nil {
			stop = stopFromFinish(*c.FinishReason)
		}
		if m := c.Message; m != nil {
			if m.Content != nil && *m.Content != "" {
				out.Content = append(out.Content, anBlock{Type: "text", Text: *m.Content})
			} else if m.Refusal != nil && *m.Refusal != "" {
				out.Content = append(out.Content, anBlock{Type: "text", Text: *m.Refusal})
				stop = "refusal"
			}
			for _, tc := range m.ToolCalls {
				out.Content = append(out.Content, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: jsonObjectOr([]byte(tc.Function.Arguments))})
			}
			stop = toolStop(stop, len(m.ToolCalls) > 0)
		}
	}
	out.StopReason = &stop
	if u, ok := openAIUsageOK(raw); ok {
		out.Usage = anUsageOf(u)
	}
	return json.Marshal(out)
}

// toolStop is the stop reason of a turn that ended normally (end_turn)
// having called tools: tool_use, as Anthropic ends every such turn and its
// SDKs' tool loops expect. OpenAI ends a turn whose tool_choice forced a
// function with finish_reason "stop", not "tool_calls" (vLLM too, for a
// named tool_choice). A turn cut by its length or a filter keeps its reason.
func toolStop(stop string, tools bool) string {
	if tools && stop == "end_turn" {
		return "tool_use"
	}
	return stop
}

// anthropicID presents an OpenAI completion id as an Anthropic message id.
func anthropicID(id string) string {
	if rest, ok := strings.CutPrefix(id, "chatcmpl-"); ok {
		return "msg_" + rest
	}
	if id == "" {
		return "msg_switchyard"
	}
	return id
}

// openAIToAnthropicStream turns OpenAI chunks into Anthropic events:
// message_start, then per content block content_block_start, its deltas
// (text_delta, input_json_delta) and content_block_stop, then message_delta
// with the stop reason and usage, and message_stop.
type openAIToAnthropicStream struct {
	model        string
	promptTokens int // estimate shown in message_start; message_delta has the real count

	started bool
	block   int    // index of the open block, -1 when none
	kind    string // "text" or "tool_use" for the open block
	next    int    // index of the next block
	toolIdx int    // OpenAI tool_calls index of the open tool block
	toolID  string // id of the open tool block
	stop    string
	// refused: the answer's text came as delta.refusal and none as
	// delta.content; it ends with stop_reason refusal, as the sync
	// translation of the same answer does (OpenAI ends it with "stop")
	refused, texted bool
	tooled          bool // a tool_use block was opened
	u               Usage
	buf             []byte
}

func newOpenAIToAnthropicStream(model string, promptTokens int) *openAIToAnthropicStream {
	return &openAIToAnthropicStream{model: model, promptTokens: promptTokens, block: -1, toolIdx: -1}
}

func (c *openAIToAnthropicStream) event(_ string, data []byte) ([]byte, bool, error) {
	c.buf = nil
	if isDone(data) {
		return c.finish(), true, nil
	}
	if hasError(data) {
		return nil, false, midStreamError(data)
	}
	var ch oaResponseIn
	if err := json.Unmarshal(data, &ch); err != nil {
		return nil, false, upstreamGarbage(err)
	}
	if u, ok := openAIUsageOK(data); ok {
		c.u = u
	}
	c.start(ch.ID, ch.Model)
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue // Anthropic has one answer
		}
		if d := choice.Delta; d != nil {
			text := ""
			if d.Content != nil {
				text = *d.Content
				c.texted = c.texted || text != ""
			} else if d.Refusal != nil {
				text = *d.Refusal
				c.refused = c.refused || text != ""
			}
			if text != "" {
				c.openBlock("text", -1, `{"type":"text","text":""}`)
				c.emit("content_block_delta", anBlockDelta{Type: "content_block_delta", Index: c.block, Delta: anDelta{Type: "text_delta", Text: text}})
			}
			for _, tc := range d.ToolCalls {
				idx := 0
				if tc.Index != nil {
					idx = *tc.Index
				}
				// A new call has a new index; some servers repeat the id on
				// every delta, and some reuse index 0 with a fresh id.
				if c.kind != "tool_use" || idx != c.toolIdx || (tc.ID != "" && tc.ID != c.toolID) {
					head, _ := json.Marshal(anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(`{}`)})
					c.closeBlock()
					c.openBlock("tool_use", idx, string(head))
					c.toolID, c.tooled = tc.ID, true
				}
				if tc.Function.Arguments != "" {
					c.emit("content_block_delta", anBlockDelta{Type: "content_block_delta", Index: c.block, Delta: anDelta{Type: "input_json_delta", PartialJSON: tc.Function.Arguments}})
				}
			}
		}
		if choice.FinishReason != nil && *choice.FinishReason != "" {
			c.stop = stopFromFinish(*choice.FinishReason)
		}
	}
	return c.buf, false, nil
}

// start emits message_start once, at the first chunk.
func (c *openAIToAnthropicStream) start(id, model string) {
	if c.started {
		return
	}
	c.started = true
	if model == "" {
		model = c.model
	}
	msg := anResponse{ID: anthropicID(id), Type: "message", Role: "assistant", Model: model, Content: []anBlock{}, Usage: anUsage{InputTokens: c.promptTokens}}
	c.emit("message_start", anMessageStart{Type: "message_start", Message: msg})
}

// openBlock closes the open block unless it is already a block of this
// kind (and, for tools, this tool), then opens a new one.
func (c *openAIToAnthropicStream) openBlock(kind string, toolIdx int, contentBlock string) {
	if c.block >= 0 && c.kind == kind && (kind == "text" || c.toolIdx == toolIdx) {
		return
	}
	c.closeBlock()
	c.block, c.kind, c.toolIdx = c.next, kind, toolIdx
	c.next++
	c.emit("content_block_start", anBlockStart{Type: "content_block_start", Index: c.block, ContentBlock: json.RawMessage(contentBlock)})
}

func (c *openAIToAnthropicStream) closeBlock() {
	if c.block < 0 {
		return
	}
	c.emit("content_block_stop", anBlockStop{Type: "content_block_stop", Index: c.block})
	c.block, c.kind, c.toolIdx, c.toolID = -1, "", -1, ""
}

// finish closes the message: message_delta with the stop reason and the
// real usage, then message_stop.
func (c *openAIToAnthropicStream) finish() []byte {
	c.start("", "")
	c.closeBlock()
	stop := c.stop
	switch {
	case c.refused && !c.texted:
		stop = "refusal"
	case stop == "":
		stop = "end_turn"
	}
	stop = toolStop(stop, c.tooled)
	c.emit("message_delta", anMessageDelta{
		Type:  "message_delta",
		Delta: anStopDelta{StopReason: stop},
		Usage: anMessageUsageOf(c.u),
	})
	c.buf = appendEvent(c.buf, "message_stop", messageStopData)
	return c.buf
}

func (c *openAIToAnthropicStream) emit(name string, v any) {
	data, _ := json.Marshal(v)
	c.buf = appendEvent(c.buf, name, data)
}

// eof: an upstream that ends cleanly without [DONE] after a finish reason
// still completes the message; otherwise the stream was cut.
func (c *openAIToAnthropicStream) eof() ([]byte, error) {
	c.buf = nil
	if c.stop == "" {
		return nil, streamCut()
	}
	return c.finish(), nil
}

func (c *openAIToAnthropicStream) usage() Usage { return c.u }

var _ converter = (*openAIToAnthropicStream)(nil)
