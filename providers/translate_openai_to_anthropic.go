package providers

// Translation for an OpenAI-format client (POST /v1/chat/completions) served
// by an Anthropic deployment: the OpenAI chat request becomes an Anthropic
// Messages request, and the Anthropic message or event stream becomes an
// OpenAI chat completion or chunk stream (SPEC 10).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"switchyard/wire"
)

// defaultAnthropicMaxTokens fills max_tokens, which Anthropic requires and
// OpenAI clients often omit.
const defaultAnthropicMaxTokens = 4096

// openAIToAnthropicRequest translates an OpenAI chat completions body into
// an Anthropic Messages body for model.
func openAIToAnthropicRequest(raw []byte, model string, stream bool) ([]byte, error) {
	var in oaRequest
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest("openai request: %v", err)
	}
	out, err := chatToAnthropic(&in, model, stream)
	if err != nil {
		return nil, err
	}
	return marshalAnthropic(out)
}

// marshalAnthropic is json.Marshal(out), byte for byte
// (TestMarshalAnthropicIsJSONMarshal), without encoding/json compacting
// every message's content once more (marshalMessages).
func marshalAnthropic(out *anRequest) ([]byte, error) {
	return marshalMessages(out, &out.Messages, func(m *anMessage) *json.RawMessage { return &m.Content })
}

// chatToAnthropic maps a parsed chat request onto a Messages request (the
// Responses translation builds the chat request and comes through here).
func chatToAnthropic(in *oaRequest, model string, stream bool) (*anRequest, error) {
	if in.N != nil && *in.N > 1 {
		// one answer is all the Messages API gives: serving n > 1 with one
		// choice would drop the rest unsaid
		return nil, badRequest("n: an Anthropic deployment answers with one choice, not %d", *in.N)
	}
	out := &anRequest{Model: model, MaxTokens: defaultAnthropicMaxTokens, TopP: in.TopP, Stream: stream}
	if f, err := anthropicOutputFormat(in.ResponseFormat); err != nil {
		return nil, badRequest("response_format: %v", err)
	} else if f != nil {
		out.OutputConfig = &anOutputConfig{Format: f}
	}
	switch {
	case in.MaxCompletionTokens != nil && *in.MaxCompletionTokens > 0:
		out.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil && *in.MaxTokens > 0:
		out.MaxTokens = *in.MaxTokens
	}
	if t := in.Temperature; t != nil {
		v := min(*t, 1) // OpenAI allows 0..2, Anthropic 0..1
		out.Temperature = &v
	}
	if stop, err := stopSequences(in.Stop); err != nil {
		return nil, badRequest("stop: %v", err)
	} else {
		out.StopSequences = stop
	}
	if in.User != "" {
		out.Metadata = &anMetadata{UserID: in.User}
	}
	var system []string
	var msgs []anMessageBlocks
	for i, m := range in.Messages {
		if m.Role == "system" || m.Role == "developer" {
			text, err := openAIText(m.Content)
			if err != nil {
				return nil, badRequest("messages[%d].content: %v", i, err)
			}
			system = append(system, text)
			continue
		}
		role, blocks, err := openAIMessageToAnthropic(m)
		if err != nil {
			return nil, badRequest("messages[%d]: %v", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		// Anthropic wants alternating turns: merge consecutive same-role
		// messages (several tool results become one user turn).
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			continue
		}
		msgs = append(msgs, anMessageBlocks{Role: role, Content: blocks})
	}
	if len(system) > 0 {
		out.System = rawString(strings.Join(system, "\n"))
	}
	out.Messages = make([]anMessage, len(msgs))
	for i, m := range msgs {
		content, err := json.Marshal(m.Content)
		if err != nil {
			return nil, badRequest("messages: %v", err)
		}
		out.Messages[i] = anMessage{Role: m.Role, Content: content}
	}
	for _, t := range in.Tools {
		if t.Type != "function" && t.Type != "" {
			return nil, badRequest("tools: type %q cannot be sent to an Anthropic deployment", t.Type)
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, anTool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	tc, err := anthropicToolChoice(in.ToolChoice)
	if err != nil {
		return nil, badRequest("tool_choice: %v", err)
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls && len(out.Tools) > 0 {
		if tc == nil {
			tc = &anToolChoice{Type: "auto"}
		}
		tc.DisableParallelToolUse = true
	}
	if len(out.Tools) > 0 || (tc != nil && tc.Type == "none") {
		out.ToolChoice = tc
	}
	return out, nil
}

// anthropicOutputFormat maps a chat response_format onto the Messages
// API's output_config.format: a json_schema's schema becomes {"type":
// "json_schema","schema"} (platform.claude.com/docs/en/build-with-claude/
// structured-outputs). text, json_object (which has no schema to give) and
// a json_schema without one map to nothing: nil.
func anthropicOutputFormat(raw json.RawMessage) (*anOutputFormat, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var rf struct {
		Type       string             `json:"type"`
		JSONSchema oaJSONSchemaFormat `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, err
	}
	s := bytes.TrimSpace(rf.JSONSchema.Schema)
	if rf.Type != "json_schema" || len(s) == 0 || string(s) == "null" {
		return nil, nil
	}
	return &anOutputFormat{Type: "json_schema", Schema: s}, nil
}

// anMessageBlocks is a message being assembled.
type anMessageBlocks struct {
	Role    string
	Content []anBlock
}

// openAIMessageToAnthropic maps one non-system OpenAI message to an
// Anthropic role and content blocks.
func openAIMessageToAnthropic(m oaMessage) (string, []anBlock, error) {
	switch m.Role {
	case "tool":
		text, err := openAIText(m.Content)
		if err != nil {
			return "", nil, err
		}
		return "user", []anBlock{{Type: "tool_result", ToolUseID: messagesToolID(m.ToolCallID), Content: rawString(text)}}, nil
	case "user", "assistant":
	default:
		return "", nil, fmt.Errorf("role %q cannot be sent to an Anthropic deployment", m.Role)
	}
	var blocks []anBlock
	c := bytes.TrimSpace(m.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return "", nil, err
		}
		if s != "" {
			blocks = append(blocks, anBlock{Type: "text", Text: s})
		}
	default:
		var parts []oaPart
		if err := json.Unmarshal(c, &parts); err != nil {
			return "", nil, fmt.Errorf("content must be a string or an array of parts")
		}
		for _, p := range parts {
			switch p.Type {
			case "text":
				if p.Text != "" {
					blocks = append(blocks, anBlock{Type: "text", Text: p.Text})
				}
			case "image_url":
				if p.ImageURL == nil {
					continue
				}
				blocks = append(blocks, anBlock{Type: "image", Source: imageSource(p.ImageURL.URL)})
			default:
				return "", nil, fmt.Errorf("content part type %q cannot be sent to an Anthropic deployment", p.Type)
			}
		}
	}
	for _, tc := range m.ToolCalls {
		blocks = append(blocks, anBlock{Type: "tool_use", ID: messagesToolID(tc.ID), Name: tc.Function.Name, Input: jsonObjectOr([]byte(tc.Function.Arguments))})
	}
	return m.Role, blocks, nil
}

// messagesToolID is a chat tool call id as the Messages API takes it in
// tool_use.id and tool_result.tool_use_id: ^[a-zA-Z0-9_-]+$, or it answers
// 400. OpenAI-compatible servers name calls otherwise (Kimi's
// "functions.get_weather:0"), and an empty id is no id. A valid id is
// kept; any other has each byte outside the pattern replaced by '_' and a
// hash of the whole id appended, so the call and its result still agree
// (both go through here) and two ids never become one.
func messagesToolID(id string) string {
	valid := id != ""
	for i := 0; i < len(id) && valid; i++ {
		valid = anthropicIDByte(id[i])
	}
	if valid {
		return id
	}
	b := make([]byte, 0, len(id)+9)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !anthropicIDByte(c) {
			c = '_'
		}
		b = append(b, c)
	}
	sum := sha256.Sum256([]byte(id))
	return string(hex.AppendEncode(append(b, '_'), sum[:4]))
}

// anthropicIDByte reports a byte ^[a-zA-Z0-9_-]+$ allows.
func anthropicIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// imageSource maps an OpenAI image URL (http(s) or a data: URL) to an
// Anthropic image source.
func imageSource(u string) *anSource {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok {
			media, _ := strings.CutSuffix(meta, ";base64")
			return &anSource{Type: "base64", MediaType: media, Data: data}
		}
	}
	return &anSource{Type: "url", URL: u}
}

// openAIText flattens a string or an array of text parts.
func openAIText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		if s, ok := wire.StringValue(raw); ok { // without encoding/json's scan of a long turn
			return s, nil
		}
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []oaPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("must be a string or an array of text parts")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

func stopSequences(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	var many []string
	err := json.Unmarshal(raw, &many)
	return many, err
}

// anthropicToolChoice maps "auto" | "required" | "none" |
// {"type":"function","function":{"name"}}.
func anthropicToolChoice(raw json.RawMessage) (*anToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		switch s {
		case "auto":
			return &anToolChoice{Type: "auto"}, nil
		case "required":
			return &anToolChoice{Type: "any"}, nil
		case "none":
			return &anToolChoice{Type: "none"}, nil
		}
		return nil, fmt.Errorf("unknown value %q", s)
	}
	var t oaTool
	if err := json.Unmarshal(raw, &t); err != nil || t.Function.Name == "" {
		return nil, fmt.Errorf("want \"auto\", \"required\", \"none\" or a named function")
	}
	return &anToolChoice{Type: "tool", Name: t.Function.Name}, nil
}

// anthropicToOpenAIResponse translates an Anthropic message into an OpenAI
// chat completion, returning the usage it reported.
func anthropicToOpenAIResponse(raw []byte, created int64) ([]byte, Usage, error) {
	var in anResponse
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, Usage{}, upstreamGarbage(err)
	}
	u := in.Usage.usage()
	msg := &oaOutMsg{Role: "assistant"}
	var texts []string
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, oaToolCall{ID: b.ID, Type: "function", Function: oaFunctionCall{Name: b.Name, Arguments: string(jsonObjectOr(b.Input))}})
		}
	}
	if len(texts) > 0 {
		s := strings.Join(texts, "")
		msg.Content = &s
	}
	finish := "stop"
	if in.StopReason != nil {
		finish = finishFromStop(*in.StopReason)
	}
	out := oaResponse{
		ID: openAIID(in.ID), Object: "chat.completion", Created: created, Model: in.Model,
		Choices: []oaChoice{{Index: 0, Message: msg, FinishReason: &finish}},
		Usage:   oaUsageOf(u),
	}
	body, err := json.Marshal(out)
	return body, u, err
}

// openAIID presents an Anthropic message id as a completion id.
func openAIID(id string) string {
	if rest, ok := strings.CutPrefix(id, "msg_"); ok {
		return "chatcmpl-" + rest
	}
	if id == "" {
		return "chatcmpl-switchyard"
	}
	return id
}

// anthropicToOpenAIStream turns Anthropic events into OpenAI chunks: a role
// chunk at message_start, content and tool-call deltas, a finish chunk at
// message_stop, the usage chunk when the client asked for it, and [DONE].
type anthropicToOpenAIStream struct {
	wantUsage bool
	created   int64

	id, model string
	tools     map[int]int  // Anthropic block index -> OpenAI tool_calls index
	noArgs    map[int]bool // Anthropic block index of an open tool call with no arguments yet
	finish    string
	u         Usage
	stopped   bool
}

func newAnthropicToOpenAIStream(model string, created int64, wantUsage bool) *anthropicToOpenAIStream {
	return &anthropicToOpenAIStream{model: model, created: created, wantUsage: wantUsage, id: "chatcmpl-switchyard"}
}

// anEventIn is any Anthropic stream event as read.
type anEventIn struct {
	Type         string      `json:"type"`
	Index        int         `json:"index"`
	Message      *anResponse `json:"message"`
	ContentBlock *anBlock    `json:"content_block"`
	Delta        *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anUsage `json:"usage"`
}

func (c *anthropicToOpenAIStream) event(name string, data []byte) ([]byte, bool, error) {
	if name == "error" {
		return nil, false, midStreamError(data)
	}
	if name == "ping" {
		return nil, false, nil
	}
	var ev anEventIn
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, false, upstreamGarbage(err)
	}
	switch ev.Type {
	case "message_start":
		if m := ev.Message; m != nil {
			c.id = openAIID(m.ID)
			if m.Model != "" {
				c.model = m.Model
			}
			c.u = m.Usage.usage()
		}
		empty := ""
		return c.chunk(oaDeltaIn{Role: "assistant", Content: &empty}, nil), false, nil
	case "content_block_start":
		b := ev.ContentBlock
		if b == nil {
			return nil, false, nil
		}
		switch b.Type {
		case "tool_use":
			if c.tools == nil {
				c.tools, c.noArgs = map[int]int{}, map[int]bool{}
			}
			idx := len(c.tools)
			c.tools[ev.Index] = idx
			c.noArgs[ev.Index] = true
			return c.chunk(oaDeltaIn{ToolCalls: []oaToolCall{{Index: &idx, ID: b.ID, Type: "function", Function: oaFunctionCall{Name: b.Name}}}}, nil), false, nil
		case "text":
			if b.Text != "" {
				return c.chunk(oaDeltaIn{Content: &b.Text}, nil), false, nil
			}
		}
	case "content_block_delta":
		if ev.Delta == nil {
			return nil, false, nil
		}
		switch ev.Delta.Type {
		case "text_delta":
			return c.chunk(oaDeltaIn{Content: &ev.Delta.Text}, nil), false, nil
		case "input_json_delta":
			idx, ok := c.tools[ev.Index]
			if !ok || ev.Delta.PartialJSON == "" {
				return nil, false, nil
			}
			delete(c.noArgs, ev.Index)
			return c.chunk(oaDeltaIn{ToolCalls: []oaToolCall{{Index: &idx, Function: oaFunctionCall{Arguments: ev.Delta.PartialJSON}}}}, nil), false, nil
		}
	case "content_block_stop":
		// A tool without input streams no partial_json but "" (its start
		// says input {}): its OpenAI arguments are "{}", as in a sync
		// answer (jsonObjectOr), never "", which no client parses as JSON.
		if c.noArgs[ev.Index] {
			delete(c.noArgs, ev.Index)
			idx := c.tools[ev.Index]
			return c.chunk(oaDeltaIn{ToolCalls: []oaToolCall{{Index: &idx, Function: oaFunctionCall{Arguments: "{}"}}}}, nil), false, nil
		}
	case "message_delta":
		ev.applyMessageDelta(&c.finish, &c.u)
	case "message_stop":
		c.stopped = true
		return c.end(), true, nil
	}
	return nil, false, nil
}

// applyMessageDelta folds an Anthropic message_delta into a stream's finish
// reason and usage: the stop reason, the output tokens, and the input
// tokens when the event carries them.
func (ev *anEventIn) applyMessageDelta(finish *string, u *Usage) {
	if ev.Delta != nil && ev.Delta.StopReason != nil {
		*finish = finishFromStop(*ev.Delta.StopReason)
	}
	if eu := ev.Usage; eu != nil {
		u.mergeDelta(*eu)
	}
}

// end writes the finish chunk, the usage chunk if wanted, and [DONE].
func (c *anthropicToOpenAIStream) end() []byte {
	finish := c.finish
	if finish == "" {
		finish = "stop"
	}
	out := c.chunk(oaDeltaIn{}, &finish)
	if c.wantUsage {
		data, _ := json.Marshal(oaChunk{
			ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model, Choices: []oaChunkChoice{},
			Usage: oaUsageOf(c.u),
		})
		out = appendData(out, data)
	}
	return appendData(out, doneData)
}

func (c *anthropicToOpenAIStream) chunk(d oaDeltaIn, finish *string) []byte {
	data, _ := json.Marshal(oaChunk{
		ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model,
		Choices: []oaChunkChoice{{Index: 0, Delta: d, FinishReason: finish}},
	})
	return appendData(make([]byte, 0, len(data)+8), data)
}

// eof: Anthropic ends every complete stream with message_stop.
func (c *anthropicToOpenAIStream) eof() ([]byte, error) { return nil, streamCut() }

func (c *anthropicToOpenAIStream) usage() Usage { return c.u }

var _ converter = (*anthropicToOpenAIStream)(nil)
