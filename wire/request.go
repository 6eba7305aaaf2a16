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
	"switchyard/internal/jsonspan"

	"switchyard/catalog"
)

// Format is the wire format a client speaks.
type Format uint8

// The client formats.
const (
	FormatOpenAI Format = iota
	FormatAnthropic
	FormatResponses // the OpenAI Responses API (POST /v1/responses), a chat operation
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

	// Measured holds the spans of Raw the parse measured of its largest
	// members (messages or input, tools, system or instructions), so that a
	// second walk of Raw's top level (the response cache's key) steps over
	// them (jsonspan.EachMemberMeasured). An entry may be nil, or a copy
	// that is not of Raw's bytes, which such a walk scans as before.
	Measured [3][]byte

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

	// End-user hints from the body (SPEC 3.1): OpenAI's safety_identifier
	// and user (Anthropic's metadata.user_id is MetadataUserID).
	SafetyIdentifier string
	User             string

	Input     []string // embeddings input
	Prompt    string   // images prompt
	ImageSize string   // images size

	Responses *Responses // FormatResponses only: the typed request (responses.go)
}

// MaxEndUserBytes is the longest end-user id a request may name (SPEC 3.1).
const MaxEndUserBytes = 128

// EndUser is the end user the body names (SPEC 3.1), the first present of
// safety_identifier, user and metadata.user_id, with the field it came
// from; "" when none (an empty string is none).
func (r *Request) EndUser() (user, field string) {
	switch {
	case r.SafetyIdentifier != "":
		return r.SafetyIdentifier, "safety_identifier"
	case r.User != "":
		return r.User, "user"
	case r.MetadataUserID != "":
		return r.MetadataUserID, "metadata.user_id"
	}
	return "", ""
}

// Error is a client input problem: it names the field and the fix, and maps
// to HTTP 400.
type Error struct {
	Param   string
	Code    string // set for a shape limit: too_many_messages, too_many_inputs
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
	Messages            messageList `json:"messages"`
	Tools               toolList    `json:"tools"`
	MaxTokens           *int        `json:"max_tokens"`
	MaxCompletionTokens *int        `json:"max_completion_tokens"`
	ReasoningEffort     string      `json:"reasoning_effort"`
	Reasoning           *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	PromptCacheKey   string          `json:"prompt_cache_key"`
	SessionID        string          `json:"session_id"`
	SafetyIdentifier string          `json:"safety_identifier"`
	User             string          `json:"user"`
	Metadata         *metadata       `json:"metadata"`
	Conversation     json.RawMessage `json:"conversation"`
	Thinking         *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	System json.RawMessage `json:"system"` // Anthropic
	Input  inputList       `json:"input"`  // embeddings
	Prompt string          `json:"prompt"` // images
	Size   string          `json:"size"`
}

type metadata struct {
	SessionID string `json:"session_id"`
	UserID    string `json:"user_id"`
}

// Default shape limits (SPEC 13 server.max_messages, server.max_input_items).
const (
	DefaultMaxMessages   = 10000
	DefaultMaxInputItems = 2048
)

// Limits bounds a request's shape (SPEC 14); a zero field takes its default.
type Limits struct {
	MaxMessages   int // chat messages; server.max_messages
	MaxInputItems int // embedding inputs; server.max_input_items
}

func (l Limits) orDefaults() Limits {
	if l.MaxMessages <= 0 {
		l.MaxMessages = DefaultMaxMessages
	}
	if l.MaxInputItems <= 0 {
		l.MaxInputItems = DefaultMaxInputItems
	}
	return l
}

// Parse reads a body for op in format under the default Limits.
func Parse(body []byte, op catalog.Operation, format Format) (*Request, error) {
	return ParseLimited(body, op, format, Limits{})
}

// newOpenAIBody is an empty body with lim's shape limits, what a parse
// fills.
func newOpenAIBody(lim Limits) openAIBody {
	var b openAIBody
	b.Messages.max, b.Input.max = lim.MaxMessages, lim.MaxInputItems
	return b
}

// ParseLimited reads a body for op in format. It returns *Error for
// anything the client must fix, a shape over lim included; it never panics
// on input. Parsing allocates at most a small multiple of the body: arrays
// are counted before anything is built for their elements, and the
// elements nobody needs (tools, tool calls) are only counted.
func ParseLimited(body []byte, op catalog.Operation, format Format, lim Limits) (*Request, error) {
	lim = lim.orDefaults()
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badf("", "request body is empty: send a JSON object")
	}
	if format == FormatResponses {
		return parseResponses(body, lim.MaxMessages)
	}
	b := newOpenAIBody(lim)
	if !fastBody(body, &b) { // not the common shape: encoding/json decodes it and words any error
		// (fastBody's walk refuses a repeated key; this one names it)
		if k := repeatedKey(body); k != "" {
			return nil, errDuplicate(k)
		}
		b = newOpenAIBody(lim)
		if err := json.Unmarshal(body, &b); err != nil {
			var we *Error
			if errors.As(err, &we) {
				return nil, we
			}
			var ute *json.UnmarshalTypeError
			if errors.As(err, &ute) {
				return nil, badf(ute.Field, "field %q has the wrong type: got JSON %s, want %s", ute.Field, ute.Value, ute.Type)
			}
			return nil, badf("", "request body is not valid JSON: %v", err)
		}
	}
	r := &Request{
		Format: format, Op: op, Raw: body, Model: b.Model, Stream: b.Stream,
		Tools: int(b.Tools.n), PromptCacheKey: b.PromptCacheKey, SessionID: b.SessionID,
		ReasoningEffort: b.ReasoningEffort, Prompt: b.Prompt, ImageSize: b.Size,
		SafetyIdentifier: b.SafetyIdentifier, User: b.User,
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
	r.Conversation = conversationID(b.Conversation)
	if b.Tools.n > 0 {
		r.ToolsRaw = b.Tools.span
	}
	r.Measured = [3][]byte{b.Messages.span, b.Tools.span, b.System}

	switch op {
	case catalog.OpChat:
		if !b.Messages.set {
			return nil, badf("messages", "missing required field \"messages\": send an array of chat messages")
		}
		if len(b.Messages.items) == 0 {
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
		r.Messages = b.Messages.items
		var sys []string
		for i := range r.Messages {
			m := &r.Messages[i]
			if m.Role == "" {
				return nil, badf(fmt.Sprintf("messages[%d].role", i), "messages[%d].role is required", i)
			}
			if format == FormatOpenAI && (m.Role == "system" || m.Role == "developer") {
				sys = append(sys, m.Text)
			}
		}
		if len(sys) > 0 {
			r.System = strings.Join(sys, "\n")
		}
	case catalog.OpEmbeddings:
		if !b.Input.set {
			return nil, badf("input", "missing required field \"input\": a string or an array of strings")
		}
		r.Input = b.Input.items
	case catalog.OpImages:
		if r.Prompt == "" {
			return nil, badf("prompt", "missing required field \"prompt\"")
		}
	}
	return r, nil
}

// maxToolResultDepth bounds how deep nested tool_result contents are read
// for text: each level scans its content again, so the depth bounds the work.
const maxToolResultDepth = 2

// messageText flattens a content value (a string, an array of parts, or
// null) into its text, reporting whether it held a tool result. raw is
// valid JSON. The parts are scanned in place: a content of a million empty
// parts allocates nothing per part.
func messageText(raw []byte, depth int) (string, bool, error) {
	raw = trimWS(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", false, nil
	}
	if raw[0] == '"' {
		return decodeString(raw), false, nil
	}
	if raw[0] != '[' {
		return "", false, errBadContent
	}
	var sb strings.Builder
	toolResult := false
	err := jsonspan.EachElement(raw, func(_ int, elem []byte) error {
		var typ, text, content, input []byte
		err := jsonspan.EachMember(elem, func(key, val []byte) error {
			switch string(key) {
			case "type":
				typ = val
			case "text":
				text = val
			case "content":
				content = val
			case "input":
				input = val
			}
			return nil
		})
		if err != nil || (typ != nil && typ[0] != '"') || (text != nil && text[0] != '"' && !isNull(text)) {
			return errBadContent
		}
		var t string
		switch {
		case bytesEqualString(typ, `"tool_result"`):
			toolResult = true
			if depth < maxToolResultDepth {
				t, _, _ = messageText(content, depth+1)
			}
		case bytesEqualString(typ, `"tool_use"`):
			t = string(input)
		case text != nil && text[0] == '"':
			t = decodeString(text)
		}
		if t == "" {
			return nil
		}
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(t)
		return nil
	})
	if err != nil {
		return "", false, errBadContent
	}
	return sb.String(), toolResult, nil
}

// textOf reads a string or an array of text blocks.
func textOf(raw json.RawMessage) (string, error) {
	s, _, err := messageText(raw, 0)
	return s, err
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
