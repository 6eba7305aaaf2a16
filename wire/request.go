// Package wire owns the client-facing request formats: it parses an OpenAI
// (chat, embeddings, images) or Anthropic Messages body once into the fields
// the gateway decides on, estimates tokens without a tokenizer, and edits
// top-level JSON fields in place without a second parse. It has no
// dependencies beyond the standard library and catalog's Operation.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"switchyard/catalog"
)

// Format is the wire format a client speaks.
type Format uint8

// The client formats.
const (
	FormatOpenAI Format = iota
	FormatAnthropic
)

// Message is one chat message reduced to what routing needs.
type Message struct {
	Role       string
	Text       string // every text part joined with "\n"
	ToolCalls  int    // assistant tool calls
	ToolResult bool   // role tool, or an Anthropic tool_result block
}

// Request is a parsed client request. Raw is the body as received; the
// other fields are read from it once.
type Request struct {
	Format Format
	Op     catalog.Operation
	Raw    []byte

	Model        string
	Stream       bool
	IncludeUsage bool // stream_options.include_usage asked by the client

	System   string // system prompt(s): OpenAI system/developer messages or Anthropic system
	Messages []Message
	Tools    int    // tools declared
	ToolsRaw []byte // tools as sent, for the session fingerprint

	MaxTokens       int    // max_tokens or max_completion_tokens; 0 when absent
	ReasoningEffort string // reasoning_effort or reasoning.effort
	Thinking        bool   // Anthropic thinking.type == "enabled"
	JSONSchema      bool   // response_format.type == "json_schema"

	// Session hints from the body (SPEC 8), first non-empty wins in that order.
	PromptCacheKey    string
	SessionID         string
	MetadataSessionID string
	MetadataUserID    string
	Conversation      string

	Input     []string // embeddings input
	Prompt    string   // images prompt
	ImageSize string   // images size
}

// Error is a client input problem: it names the field and the fix, and maps
// to HTTP 400.
type Error struct {
	Param   string
	Message string
}

func (e *Error) Error() string { return e.Message }

func badf(param, format string, args ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}

// openAIBody is the subset of an OpenAI chat/embeddings/images body we read.
type openAIBody struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages            []rawMessage      `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	ReasoningEffort     string            `json:"reasoning_effort"`
	Reasoning           *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	PromptCacheKey string          `json:"prompt_cache_key"`
	SessionID      string          `json:"session_id"`
	Metadata       *metadata       `json:"metadata"`
	Conversation   json.RawMessage `json:"conversation"`
	Thinking       *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	System json.RawMessage `json:"system"` // Anthropic
	Input  json.RawMessage `json:"input"`  // embeddings
	Prompt string          `json:"prompt"` // images
	Size   string          `json:"size"`
}

type metadata struct {
	SessionID string `json:"session_id"`
	UserID    string `json:"user_id"`
}

type rawMessage struct {
	Role       string       `json:"role"`
	Content    contentField `json:"content"`
	ToolCalls  []struct{}   `json:"tool_calls"`
	ToolCallID string       `json:"tool_call_id"`
}

// contentField decodes a message content (a string, an array of parts, or
// null) straight into its flattened text, without keeping a raw copy.
type contentField struct {
	text       string
	toolResult bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *contentField) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.text)
	}
	var err error
	if c.text, c.toolResult, err = messageText(b); err != nil {
		return errBadContent
	}
	return nil
}

// errBadContent marks a message content that is neither a string nor an
// array of parts; Parse finds which message it was.
var errBadContent = errors.New("bad message content")

// badContentIndex finds the first message whose content is invalid (error
// path only: it decodes the messages a second time).
func badContentIndex(body []byte) int {
	var b struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &b)
	for i, m := range b.Messages {
		if len(m.Content) > 0 && m.Content[0] != '"' {
			if _, _, err := messageText(m.Content); err != nil {
				return i
			}
		}
	}
	return 0
}

// contentPart is one element of an array content (OpenAI or Anthropic).
type contentPart struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"` // Anthropic tool_result content
	Input   json.RawMessage `json:"input"`   // Anthropic tool_use input
}

// Parse reads a body for op in format. It returns *Error for anything the
// client must fix; it never panics on input.
func Parse(body []byte, op catalog.Operation, format Format) (*Request, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badf("", "request body is empty: send a JSON object")
	}
	var b openAIBody
	if err := json.Unmarshal(body, &b); err != nil {
		if errors.Is(err, errBadContent) {
			i := badContentIndex(body)
			return nil, badf(fmt.Sprintf("messages[%d].content", i), "messages[%d].content must be a string or an array of content parts", i)
		}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, badf(ute.Field, "field %q has the wrong type: got JSON %s, want %s", ute.Field, ute.Value, ute.Type)
		}
		return nil, badf("", "request body is not valid JSON: %v", err)
	}
	r := &Request{
		Format: format, Op: op, Raw: body, Model: b.Model, Stream: b.Stream,
		Tools: len(b.Tools), PromptCacheKey: b.PromptCacheKey, SessionID: b.SessionID,
		ReasoningEffort: b.ReasoningEffort, Prompt: b.Prompt, ImageSize: b.Size,
	}
	if r.Model == "" {
		return nil, badf("model", "missing required field \"model\": name a public model or a tier alias")
	}
	if b.StreamOptions != nil {
		r.IncludeUsage = b.StreamOptions.IncludeUsage
	}
	if b.MaxCompletionTokens != nil {
		r.MaxTokens = *b.MaxCompletionTokens
	} else if b.MaxTokens != nil {
		r.MaxTokens = *b.MaxTokens
	}
	if r.MaxTokens < 0 {
		return nil, badf("max_tokens", "max_tokens must not be negative")
	}
	if r.ReasoningEffort == "" && b.Reasoning != nil {
		r.ReasoningEffort = b.Reasoning.Effort
	}
	r.Thinking = b.Thinking != nil && b.Thinking.Type == "enabled"
	r.JSONSchema = b.ResponseFormat != nil && b.ResponseFormat.Type == "json_schema"
	if b.Metadata != nil {
		r.MetadataSessionID, r.MetadataUserID = b.Metadata.SessionID, b.Metadata.UserID
	}
	if len(b.Conversation) > 0 && string(b.Conversation) != "null" {
		var s string
		if json.Unmarshal(b.Conversation, &s) == nil {
			r.Conversation = s
		} else {
			var c struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(b.Conversation, &c) == nil {
				r.Conversation = c.ID
			}
		}
	}
	if len(b.Tools) > 0 {
		r.ToolsRaw = toolsSpan(body)
	}

	switch op {
	case catalog.OpChat:
		if b.Messages == nil {
			return nil, badf("messages", "missing required field \"messages\": send an array of chat messages")
		}
		if len(b.Messages) == 0 {
			return nil, badf("messages", "\"messages\" is empty: send at least one message")
		}
		if format == FormatAnthropic {
			sys, err := textOf(b.System)
			if err != nil {
				return nil, badf("system", "system must be a string or an array of text blocks")
			}
			r.System = sys
			if b.MaxTokens == nil {
				return nil, badf("max_tokens", "missing required field \"max_tokens\" (Anthropic Messages API)")
			}
		}
		r.Messages = make([]Message, 0, len(b.Messages))
		var sys []string
		for i, m := range b.Messages {
			if m.Role == "" {
				return nil, badf(fmt.Sprintf("messages[%d].role", i), "messages[%d].role is required", i)
			}
			text, toolResult := m.Content.text, m.Content.toolResult
			msg := Message{Role: m.Role, Text: text, ToolCalls: len(m.ToolCalls), ToolResult: toolResult || m.Role == "tool"}
			if format == FormatOpenAI && (m.Role == "system" || m.Role == "developer") {
				sys = append(sys, text)
			}
			r.Messages = append(r.Messages, msg)
		}
		if len(sys) > 0 {
			r.System = strings.Join(sys, "\n")
		}
	case catalog.OpEmbeddings:
		if len(b.Input) == 0 || string(b.Input) == "null" {
			return nil, badf("input", "missing required field \"input\": a string or an array of strings")
		}
		in, err := inputStrings(b.Input)
		if err != nil {
			return nil, badf("input", "\"input\" must be a string, an array of strings or an array of token arrays")
		}
		r.Input = in
	case catalog.OpImages:
		if r.Prompt == "" {
			return nil, badf("prompt", "missing required field \"prompt\"")
		}
	}
	return r, nil
}

// messageText flattens a content value into its text, reporting whether it
// held a tool result.
func messageText(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, false, err
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false, err
	}
	var sb strings.Builder
	toolResult := false
	for _, p := range parts {
		var t string
		switch p.Type {
		case "tool_result":
			toolResult = true
			t, _ = textOf(p.Content)
		case "tool_use":
			t = string(p.Input)
		default:
			t = p.Text
		}
		if t == "" {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(t)
	}
	return sb.String(), toolResult, nil
}

// textOf reads a string or an array of text blocks.
func textOf(raw json.RawMessage) (string, error) {
	s, _, err := messageText(raw)
	return s, err
}

func inputStrings(raw json.RawMessage) ([]string, error) {
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return []string{s}, err
	}
	var many []json.RawMessage
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(many))
	for _, m := range many {
		if len(m) > 0 && m[0] == '"' {
			var s string
			if err := json.Unmarshal(m, &s); err != nil {
				return nil, err
			}
			out = append(out, s)
			continue
		}
		var toks []int
		if err := json.Unmarshal(m, &toks); err != nil {
			return nil, err
		}
		out = append(out, strings.Repeat("xxxx", len(toks)))
	}
	return out, nil
}

func toolsSpan(body []byte) []byte {
	if s, e, ok := FindTopLevel(body, "tools"); ok {
		return body[s:e]
	}
	return nil
}

// TextLen is the total characters of every message and the system prompt.
func (r *Request) TextLen() int {
	n := len(r.System)
	for i := range r.Messages {
		if r.Format == FormatOpenAI && (r.Messages[i].Role == "system" || r.Messages[i].Role == "developer") {
			continue // already counted in System
		}
		n += len(r.Messages[i].Text)
	}
	return n
}

// PromptTokens estimates input tokens without a tokenizer (SPEC 3):
// characters/4 rounded up plus 4 tokens of overhead per message, plus the
// declared tools' JSON.
func (r *Request) PromptTokens() int {
	switch r.Op {
	case catalog.OpEmbeddings:
		n := 0
		for _, s := range r.Input {
			n += (len(s) + 3) / 4
		}
		return n
	case catalog.OpImages:
		return (len(r.Prompt) + 3) / 4
	}
	chars := r.TextLen() + len(r.ToolsRaw)
	return (chars+3)/4 + 4*len(r.Messages) + 3
}

// OutputTokens is the output estimate: the requested max or the default.
func (r *Request) OutputTokens(defaultMax int) int {
	if r.Op != catalog.OpChat {
		return 0
	}
	if r.MaxTokens > 0 {
		return r.MaxTokens
	}
	return defaultMax
}

// LastUserText is the text of the last user message ("" when none).
func (r *Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" && !r.Messages[i].ToolResult {
			return r.Messages[i].Text
		}
	}
	return ""
}
