package providers

// Translation for an Anthropic-format client (POST /v1/messages) served by
// an OpenAI-compatible or simulated deployment: the Anthropic request
// becomes an OpenAI chat request, and the OpenAI response or chunk stream
// becomes an Anthropic message or event stream (SPEC 10).

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
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

// maxOpenAIStop is how many stop sequences OpenAI's chat completions take:
// "up to 4 sequences" (platform.openai.com/docs/api-reference/chat/create,
// stop); a fifth makes it answer 400.
const maxOpenAIStop = 4

// anthropicToOpenAIChat is the chat request an OpenAI-compatible upstream
// gets for an Anthropic Messages body, within what OpenAI's chat reference
// accepts:
//   - max_tokens is sent as max_completion_tokens to an OpenAI reasoning
//     model (openAIReasoningModel), as max_tokens to any other. The chat
//     reference says max_tokens "is now deprecated in favor of
//     max_completion_tokens, and is not compatible with o1 series models"
//     (gpt-5 refuses it the same way), while vLLM, Ollama, Mistral,
//     DeepSeek and older servers know max_tokens only, and OpenAI still
//     takes it from its other models. The translation does not see the
//     deployment's base_url, so the model name decides: a reasoning model
//     behind another server (vLLM knows max_completion_tokens too) gets the
//     current field; the limit is an Azure reasoning deployment whose
//     upstream model is not named after its model, which gets max_tokens.
//   - more than 4 stop_sequences are sent as their first 4 (maxOpenAIStop):
//     a 400 the client did not cause would fail every OpenAI deployment,
//     while a dropped sequence only lets the answer run on past it, within
//     max_tokens.
func anthropicToOpenAIChat(raw []byte, model string, stream bool) (*oaRequest, error) {
	out, err := anthropicToChat(raw, model, stream)
	if err != nil {
		return nil, err
	}
	if out.MaxTokens != nil && openAIReasoningModel(model) {
		out.MaxCompletionTokens, out.MaxTokens = out.MaxTokens, nil
	}
	if len(out.stops) > maxOpenAIStop {
		out.Stop, _ = json.Marshal(out.stops[:maxOpenAIStop])
	}
	return &out.oaRequest, nil
}

// openAIReasoningModel reports an OpenAI reasoning model by its name: the
// o-series (o1, o3-mini, o4-mini-2025-04-16...) and gpt-5 (gpt-5,
// gpt-5-mini, gpt-5.1...), which refuse max_tokens. A routed name
// ("openai/o3") is left to its router, which maps max_tokens itself.
func openAIReasoningModel(model string) bool {
	m := strings.ToLower(model)
	for _, family := range [...]string{"o1", "o3", "o4", "gpt-5"} {
		if rest, ok := strings.CutPrefix(m, family); ok && (rest == "" || rest[0] == '-' || rest[0] == '.') {
			return true
		}
	}
	return false
}

// chatOfAnthropic is the chat request of an Anthropic Messages body before
// the limits of a particular upstream (anthropicToOpenAIChat), with the
// client's stop sequences.
type chatOfAnthropic struct {
	oaRequest
	stops []string
}

// anthropicToChat maps an Anthropic Messages body onto the chat request
// shape: the OpenAI translation and the Gemini one (through the chat
// mapping) share it.
func anthropicToChat(raw []byte, model string, stream bool) (*chatOfAnthropic, error) {
	var in struct {
		anRequest
		TopK *int `json:"top_k"` // no OpenAI equivalent; dropped
		// OutputFormat is output_config.format's beta spelling, still
		// taken by the API for a transition period
		OutputFormat *anOutputFormat `json:"output_format"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest("anthropic request: %v", err)
	}
	out := chatOfAnthropic{oaRequest: oaRequest{Model: model, Temperature: in.Temperature, TopP: in.TopP, Stream: stream}, stops: in.StopSequences}
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
	// OpenAI refuses a tool_choice (and parallel_tool_calls) in a request
	// without tools ("'tool_choice' is only allowed when 'tools' are
	// specified"), which the Messages API takes: with no tools there is
	// nothing to choose, so it is left out
	if tc := in.ToolChoice; tc != nil && len(out.Tools) > 0 {
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
		if tc.DisableParallelToolUse {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	format := in.OutputFormat
	if in.OutputConfig != nil && in.OutputConfig.Format != nil {
		format = in.OutputConfig.Format
	}
	if format != nil && format.Type == "json_schema" && len(format.Schema) > 0 && string(format.Schema) != "null" {
		// output_config.format (platform.claude.com/docs/en/build-with-claude/
		// structured-outputs) is chat's response_format json_schema; no
		// strict: OpenAI's strict mode also wants every property required,
		// which an Anthropic schema need not list
		out.ResponseFormat, _ = json.Marshal(struct {
			Type       string             `json:"type"`
			JSONSchema oaJSONSchemaFormat `json:"json_schema"`
		}{"json_schema", oaJSONSchemaFormat{Name: "output", Schema: format.Schema}})
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
// the assistant turn that called them), tool_use blocks become tool_calls,
// images and documents become content parts (anthropicMediaParts). A tool
// message takes text only (the chat reference's tool message content parts
// are text parts), so a tool_result's images and PDFs follow the tool
// messages at the head of this message, each result's introduced by its id.
func anthropicMessageToOpenAI(m anMessage) ([]oaMessage, error) {
	if len(m.Content) > 0 && m.Content[0] == '"' {
		return []oaMessage{{Role: m.Role, Content: m.Content}}, nil
	}
	var blocks []anBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, err
	}
	var out []oaMessage
	var parts, attached []oaPart
	var calls []oaToolCall
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, oaPart{Type: "text", Text: b.Text})
		case "image", "document":
			var err error
			if parts, err = anthropicMediaParts(parts, b); err != nil {
				return nil, err
			}
		case "tool_use":
			calls = append(calls, oaToolCall{ID: b.ID, Type: "function", Function: oaFunctionCall{Name: b.Name, Arguments: string(jsonObjectOr(b.Input))}})
		case "tool_result":
			text, media, err := toolResultContent(b.Content)
			if err != nil {
				return nil, err
			}
			if len(media) > 0 {
				attached = append(attached, oaPart{Type: "text", Text: "Content of tool result " + b.ToolUseID + ":"})
				attached = append(attached, media...)
				if text == "" {
					text = toolResultAttached
				}
			}
			if b.IsError && !strings.HasPrefix(text, "Error") {
				text = "Error: " + text
			}
			out = append(out, oaMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: rawString(text)})
		default:
			// thinking, redacted_thinking...: nothing OpenAI can take
		}
	}
	if len(attached) > 0 {
		parts = append(attached, parts...)
	}
	if len(parts) == 0 && len(calls) == 0 {
		return out, nil
	}
	msg := oaMessage{Role: m.Role, ToolCalls: calls}
	switch {
	case !textOnly(parts):
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

// toolResultAttached is the text of a tool message whose result is only
// images or documents, sent in the user message after it.
const toolResultAttached = "(the result's content follows in the next user message)"

// textOnly reports parts that are all text (sent as one string).
func textOnly(parts []oaPart) bool {
	for _, p := range parts {
		if p.Type != "text" {
			return false
		}
	}
	return true
}

// toolResultContent splits a tool_result's content (a string or blocks)
// into its text and its images and documents as content parts.
func toolResultContent(raw json.RawMessage) (string, []oaPart, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		text, err := anthropicText(raw)
		return text, nil, err
	}
	var blocks []anBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", nil, err
	}
	var texts []string
	var media []oaPart
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case "image", "document":
			parts, err := anthropicMediaParts(nil, b)
			if err != nil {
				return "", nil, err
			}
			for _, p := range parts {
				if p.Type == "text" { // a text document: a tool message takes it
					texts = append(texts, p.Text)
				} else {
					media = append(media, p)
				}
			}
		}
	}
	return strings.Join(texts, "\n"), media, nil
}

// anthropicMediaParts appends the OpenAI content parts of an image or
// document block to dst: an image an image_url part (a data: URL for
// base64); a PDF (base64 source) a "file" part with file_data as a data:
// URL and a filename (its title, else document.pdf), as the chat reference
// documents file inputs; a plain-text document text, after its title; a
// content document its text and image blocks. A document OpenAI has no way
// to take (a url source, a Files API file) is a bad request naming it:
// answering without it would be a silent drop, and the gateway still tries
// deployments that can read it.
func anthropicMediaParts(dst []oaPart, b anBlock) ([]oaPart, error) {
	src := b.Source
	if src == nil {
		return dst, nil
	}
	if b.Type == "image" {
		u := src.URL
		if src.Type == "base64" {
			u = "data:" + src.MediaType + ";base64," + src.Data
		}
		return append(dst, oaPart{Type: "image_url", ImageURL: &oaImageURL{URL: u}}), nil
	}
	switch src.Type {
	case "base64":
		name := b.Title
		if name == "" {
			name = "document.pdf"
		}
		return append(dst, oaPart{Type: "file", File: &oaFile{Filename: name, FileData: "data:" + src.MediaType + ";base64," + src.Data}}), nil
	case "text":
		text := src.Data
		if b.Title != "" {
			text = b.Title + "\n\n" + text
		}
		return append(dst, oaPart{Type: "text", Text: text}), nil
	case "content":
		if len(src.Content) > 0 && src.Content[0] == '"' {
			text, err := anthropicText(src.Content)
			if err != nil {
				return nil, err
			}
			return append(dst, oaPart{Type: "text", Text: text}), nil
		}
		var blocks []anBlock
		if err := json.Unmarshal(src.Content, &blocks); err != nil {
			return nil, err
		}
		for _, c := range blocks {
			switch c.Type {
			case "text":
				dst = append(dst, oaPart{Type: "text", Text: c.Text})
			case "image":
				var err error
				if dst, err = anthropicMediaParts(dst, c); err != nil {
					return nil, err
				}
			}
		}
		return dst, nil
	}
	return nil, fmt.Errorf("a document with a %q source cannot be sent to an OpenAI-compatible deployment", src.Type)
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
				id := tc.ID
				if id == "" {
					id = toolUseID(in.ID, len(out.Content))
				}
				// an id outside the Messages pattern would come back in the
				// client's next turn and fail it (messagesToolID)
				out.Content = append(out.Content, anBlock{Type: "tool_use", ID: messagesToolID(id), Name: tc.Function.Name, Input: jsonObjectOr([]byte(tc.Function.Arguments))})
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

// toolUseID is the id of the tool_use block at index of an answer whose
// OpenAI tool call came without one (some OpenAI-compatible servers send
// none): Anthropic requires tool_use.id (^[a-zA-Z0-9_-]+$), and the
// client's next turn names it in tool_result.tool_use_id. It derives from
// the completion id and the block's index, so the same answer (a replay,
// SPEC 18) names its calls the same; an answer without an id gets a random
// one, unique in the conversation.
func toolUseID(completionID string, index int) string {
	var b [12]byte
	if completionID == "" {
		_, _ = rand.Read(b[:])
	} else {
		sum := sha256.Sum256([]byte(completionID + "/" + strconv.Itoa(index)))
		copy(b[:], sum[:])
	}
	return "toolu_" + hex.EncodeToString(b[:])
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
	// toolGen: toolID was generated (the call came without an id), so a
	// later delta of the call that names one does not open a new block
	toolGen bool
	id      string // the completion id, from the first chunk
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
				if c.kind != "tool_use" || idx != c.toolIdx || (tc.ID != "" && tc.ID != c.toolID && !c.toolGen) {
					c.closeBlock()
					id, gen := tc.ID, tc.ID == ""
					if gen {
						id = toolUseID(c.id, c.next)
					}
					// toolID keeps the upstream's id, to compare; the client
					// gets one the Messages API takes back (messagesToolID)
					head, _ := json.Marshal(anBlock{Type: "tool_use", ID: messagesToolID(id), Name: tc.Function.Name, Input: json.RawMessage(`{}`)})
					c.openBlock("tool_use", idx, string(head))
					c.toolID, c.toolGen, c.tooled = id, gen, true
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
	c.started, c.id = true, id
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
	c.block, c.kind, c.toolIdx, c.toolID, c.toolGen = -1, "", -1, "", false
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
