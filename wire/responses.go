package wire

// The OpenAI Responses API request (POST /v1/responses, SPEC 10.1), parsed
// once into typed input items and the same routing view (System, Messages,
// Tools, MaxTokens, ReasoningEffort, JSONSchema, session hints) that chat
// requests fill, so tier classification, token estimates and session
// detection treat a Responses request exactly like a chat request.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"switchyard/catalog"
	"switchyard/internal/jsonspan"
)

// Input items are bounded like chat messages, by server.max_messages
// (Limits.MaxMessages), stored turns (previous_response_id) included.

// Responses is a parsed Responses API request (Request.Format ==
// FormatResponses). Fields the gateway echoes in the response keep the raw
// JSON the client sent.
type Responses struct {
	// ID is the id the gateway gives this response ("resp_..."); set by the
	// gateway before routing so the session and the store agree on it.
	ID string
	// Input is the conversation sent upstream, in order: the stored turns
	// that previous_response_id names, then this request's items with every
	// item_reference replaced by the stored item. Parse fills it with the
	// request's own items; ExpandResponses replaces it.
	Input []Item
	// Refs lists the ids of item_reference items in the request's input (in
	// order); Parse leaves those items in Input with Type "item_reference".
	Refs []string

	Instructions       string
	Tools              []Tool
	ToolChoice         json.RawMessage // "auto" | "none" | "required" | {"type":"function","name"}; nil when absent
	MaxOutputTokens    *int
	Temperature        *float64
	TopP               *float64
	ParallelToolCalls  *bool
	TextFormat         *TextFormat // text.format; nil when absent or "text"
	Text               json.RawMessage
	Reasoning          json.RawMessage
	Metadata           json.RawMessage
	Store              bool // default true
	PreviousResponseID string
	User               string
	PromptCacheKey     string
}

// Item is one input or output item of the Responses API.
type Item struct {
	Type   string `json:"type"` // message | function_call | function_call_output | item_reference
	ID     string `json:"id,omitempty"`
	Role   string `json:"role,omitempty"`   // message: user | assistant | system | developer
	Status string `json:"status,omitempty"` // as sent; informational
	// Content is a message's parts; a string content becomes one text part
	// (input_text, or output_text for the assistant).
	Content []Part `json:"content,omitempty"`

	CallID    string `json:"call_id,omitempty"`   // function_call, function_call_output
	Name      string `json:"name,omitempty"`      // function_call
	Arguments string `json:"arguments,omitempty"` // function_call: JSON text
	Output    string `json:"output,omitempty"`    // function_call_output: text (parts flattened)
	// OutputParts says a function_call_output's output was sent as an
	// array of parts (Output is their text): a reader that needs the
	// parts themselves (the response cache's key) reads the body. Set by
	// the parse only, never stored.
	OutputParts bool `json:"-"`
}

// Part is one content part of a message item.
type Part struct {
	Type     string `json:"type"` // input_text | output_text | refusal | input_image
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"` // input_image: https or data: URL
	Detail   string `json:"detail,omitempty"`
}

// Tool is a declared function tool.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// TextFormat is text.format when it asks for structured output.
type TextFormat struct {
	Type        string          `json:"type"` // json_schema | json_object
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// responsesBody is the request as sent.
type responsesBody struct {
	Model              string          `json:"model"`
	Stream             bool            `json:"stream"`
	Input              json.RawMessage `json:"input"`
	Instructions       json.RawMessage `json:"instructions"`
	Tools              json.RawMessage `json:"tools"` // counted, then decoded one by one (SPEC 14)
	ToolChoice         json.RawMessage `json:"tool_choice"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Text               json.RawMessage `json:"text"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Metadata           json.RawMessage `json:"metadata"`
	Store              *bool           `json:"store"`
	PreviousResponseID string          `json:"previous_response_id"`
	User               string          `json:"user"`
	SafetyIdentifier   string          `json:"safety_identifier"`
	PromptCacheKey     string          `json:"prompt_cache_key"`
	SessionID          string          `json:"session_id"`
	Conversation       json.RawMessage `json:"conversation"`

	// set by the one-pass reader (fastResponsesBody) when it read the input
	// array's items or the tools where they stand (and checked them as
	// parseInput and parseTools do); Input and Tools are then their spans,
	// not to be walked again
	items     []Item
	itemsRead bool
	tools     []Tool
	toolsRead bool
}

// rawItem is an input item as sent; content and output may be a string or
// an array of parts.
type rawItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Status    string          `json:"status"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`

	// parts is the content array read where it stands (partsRead), by the
	// one-pass reader; Content is then its span
	parts     []rawPart
	partsRead bool
}

type rawPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
}

type rawTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// parseResponses parses a Responses API body (SPEC 10.1). Every problem is
// an *Error naming the field; nothing the client sends makes it panic.
func parseResponses(body []byte, maxItems int) (*Request, error) {
	return parseResponsesWith(body, maxItems, true)
}

// parseResponsesWith is parseResponses, with the one-pass reader or (tests:
// onePass false) without it: the result is the same.
func parseResponsesWith(body []byte, maxItems int, onePass bool) (*Request, error) {
	var b responsesBody
	if !onePass || !fastResponsesBody(body, &b, maxItems) { // not the common shape: encoding/json decodes it and words any error
		// (the fast walk refuses a repeated key; this one names it)
		if k := repeatedKey(body); k != "" {
			return nil, errDuplicate(k)
		}
		b = responsesBody{}
		if err := json.Unmarshal(body, &b); err != nil {
			var ute *json.UnmarshalTypeError
			if errors.As(err, &ute) {
				return nil, badf(ute.Field, "field %q has the wrong type: got JSON %s, want %s", ute.Field, ute.Value, ute.Type)
			}
			return nil, badf("", "request body is not valid JSON: %v", err)
		}
	}
	if b.Model == "" {
		return nil, badf("model", "missing required field \"model\": name a public model or a tier alias")
	}
	rq := &Responses{
		ToolChoice: nonNull(b.ToolChoice), MaxOutputTokens: b.MaxOutputTokens, Temperature: b.Temperature,
		TopP: b.TopP, ParallelToolCalls: b.ParallelToolCalls, Text: nonNull(b.Text), Reasoning: nonNull(b.Reasoning),
		Metadata: nonNull(b.Metadata), Store: b.Store == nil || *b.Store,
		PreviousResponseID: strings.TrimSpace(b.PreviousResponseID), User: b.User, PromptCacheKey: b.PromptCacheKey,
	}
	r := &Request{
		Format: FormatResponses, Op: catalog.OpChat, Raw: body, Model: b.Model, Stream: b.Stream,
		PromptCacheKey: b.PromptCacheKey, SessionID: b.SessionID, Responses: rq,
		SafetyIdentifier: b.SafetyIdentifier, User: b.User,
	}
	if len(rq.Metadata) > 0 {
		if !metadataHints(rq.Metadata, r) {
			return nil, badf("metadata", "metadata must be an object of string values")
		}
	}
	if ins := nonNull(b.Instructions); len(ins) > 0 {
		if json.Unmarshal(ins, &rq.Instructions) != nil {
			return nil, badf("instructions", "instructions must be a string")
		}
	}
	if m := b.MaxOutputTokens; m != nil {
		if *m < 1 {
			return nil, badf("max_output_tokens", "max_output_tokens must be a positive integer, got %d", *m)
		}
		r.MaxTokens = *m
	}
	if len(rq.Reasoning) > 0 {
		var re struct {
			Effort string `json:"effort"`
		}
		if json.Unmarshal(rq.Reasoning, &re) != nil {
			return nil, badf("reasoning", "reasoning must be an object like {\"effort\":\"medium\"}")
		}
		r.ReasoningEffort = re.Effort
	}
	if len(rq.Text) > 0 {
		var t struct {
			Format *TextFormat `json:"format"`
		}
		if json.Unmarshal(rq.Text, &t) != nil {
			return nil, badf("text", "text must be an object like {\"format\":{\"type\":\"json_schema\",...}}")
		}
		if f := t.Format; f != nil {
			switch f.Type {
			case "text", "":
			case "json_object":
				rq.TextFormat = f
			case "json_schema":
				if f.Name == "" || len(f.Schema) == 0 {
					return nil, badf("text.format", "text.format of type json_schema needs \"name\" and \"schema\"")
				}
				rq.TextFormat = f
				r.JSONSchema = true
			default:
				return nil, badf("text.format.type", "text.format.type %q is not supported: use \"text\", \"json_object\" or \"json_schema\"", f.Type)
			}
		}
	}
	r.Conversation = conversationID(b.Conversation)
	var err error
	if b.toolsRead {
		rq.Tools = b.tools
	} else {
		err = parseTools(rq, b.Tools)
	}
	if err != nil {
		return nil, err
	}
	if len(rq.Tools) > 0 {
		r.Tools = len(rq.Tools)
		r.ToolsRaw = b.Tools
	}
	if err := checkToolChoice(rq.ToolChoice); err != nil {
		return nil, err
	}
	r.Measured = [3][]byte{b.Input, b.Tools, b.Instructions}
	var items []Item
	if b.itemsRead {
		items = b.items
	} else {
		items, err = parseInput(b.Input, maxItems)
	}
	if err != nil {
		return nil, err
	}
	if len(items) == 0 && rq.PreviousResponseID == "" {
		return nil, badf("input", "missing required field \"input\": send a string or an array of input items")
	}
	rq.Input = items
	for _, it := range items {
		if it.Type == "item_reference" {
			rq.Refs = append(rq.Refs, it.ID)
		}
	}
	r.fillResponsesView()
	return r, nil
}

// metadataHints reads the session and user hints of metadata (valid
// JSON, not null) into r, as a json.Unmarshal into a map[string]any and
// a string assertion of its session_id and user_id read them (keys with
// their escapes resolved, the last of a key given twice, a value that is
// not a string read as ""), without decoding the rest: that map cost some
// 45 times the bytes of a metadata full of small values (SPEC 14). false
// when metadata is not an object.
func metadataHints(md []byte, r *Request) bool {
	return jsonspan.EachMember(md, func(key, val []byte) error {
		var dst *string
		switch {
		case string(key) == "session_id":
			dst = &r.MetadataSessionID
		case string(key) == "user_id":
			dst = &r.MetadataUserID
		case len(key) <= 6*len("session_id") && bytes.IndexByte(key, '\\') >= 0:
			// escaped: "session_id" is at most 6 bytes a character sent so
			var q [2 + 6*len("session_id")]byte
			switch decodeString(append(append(append(q[:0], '"'), key...), '"')) {
			case "session_id":
				dst = &r.MetadataSessionID
			case "user_id":
				dst = &r.MetadataUserID
			}
		}
		if dst != nil {
			*dst = ""
			if val[0] == '"' {
				*dst = decodeString(val)
			}
		}
		return nil
	}) == nil
}

// conversationID reads the Responses conversation field: a string or
// {"id": ...}; "" when absent or neither.
func conversationID(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var c struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.ID
}

func nonNull(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// parseTools keeps function tools; a built-in tool is a 400 naming it.
func parseTools(rq *Responses, tools json.RawMessage) error {
	if len(tools) == 0 || isNull(tools) {
		return nil
	}
	n := countElements(tools)
	if n < 0 {
		return badf("tools", "field \"tools\" has the wrong type: want an array of tools")
	}
	if n > maxResponsesTools {
		return &Error{Param: "tools", Code: "too_many_tools",
			Message: fmt.Sprintf("\"tools\" has %d tools; at most %d are allowed: declare fewer", n, maxResponsesTools)}
	}
	rq.Tools = make([]Tool, 0, n)
	return jsonspan.EachElement(tools, func(i int, raw []byte) error {
		var t rawTool
		if err := jsonspan.Decode(raw, &t, fastTool); err != nil {
			return badf(fmt.Sprintf("tools[%d]", i), "tools[%d] must be an object like {\"type\":\"function\",\"name\":...}", i)
		}
		return addTool(&rq.Tools, i, &t)
	})
}

// addTool appends tools[i], t, to tools when it is a function tool.
func addTool(tools *[]Tool, i int, t *rawTool) error {
	switch t.Type {
	case "function":
	case "":
		return badf(fmt.Sprintf("tools[%d].type", i), "tools[%d].type is required: only \"function\" tools are supported", i)
	default:
		return badf(fmt.Sprintf("tools[%d].type", i), "tools[%d]: the built-in tool %q is not supported by this gateway: declare \"function\" tools and run them yourself", i, t.Type)
	}
	if t.Name == "" {
		return badf(fmt.Sprintf("tools[%d].name", i), "tools[%d].name is required for a function tool", i)
	}
	*tools = append(*tools, Tool{Name: t.Name, Description: t.Description, Parameters: nonNull(t.Parameters), Strict: t.Strict})
	return nil
}

// maxResponsesTools bounds the function tools of one Responses request:
// each is decoded and kept, so their count bounds the allocation (SPEC 14).
// Far above what providers accept (OpenAI: 128).
const maxResponsesTools = 1024

func checkToolChoice(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto", "none", "required":
			return nil
		}
		return badf("tool_choice", "tool_choice %q is not supported: use \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"name\":...}", s)
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &tc) != nil {
		return badf("tool_choice", "tool_choice must be a string or {\"type\":\"function\",\"name\":...}")
	}
	if tc.Type != "function" {
		return badf("tool_choice.type", "tool_choice of type %q (a built-in tool) is not supported by this gateway: name a function tool", tc.Type)
	}
	if tc.Name == "" {
		return badf("tool_choice.name", "tool_choice.name is required for a function tool choice")
	}
	return nil
}

// ExpandResponses replaces the request's input with items (the stored turns
// and this request's items with references resolved) and recomputes the
// routing view, so the classifier and the token estimate see the whole
// conversation the upstream will see.
func (r *Request) ExpandResponses(items []Item, lim Limits) error {
	lim = lim.orDefaults()
	if len(items) > lim.MaxMessages {
		return badf("previous_response_id", "the conversation has %d items with the stored turns; at most %d are allowed (server.max_messages): start a new conversation", len(items), lim.MaxMessages)
	}
	r.Responses.Input = items
	r.fillResponsesView()
	return nil
}

// fillResponsesView derives System and Messages from the instructions and
// input items, the way chat requests fill them.
func (r *Request) fillResponsesView() {
	rq := r.Responses
	var sys []string
	if rq.Instructions != "" {
		sys = append(sys, rq.Instructions)
	}
	r.Messages = make([]Message, 0, len(rq.Input))
	for i := range rq.Input {
		it := &rq.Input[i]
		switch it.Type {
		case "message":
			text := it.Text()
			if it.Role == "system" || it.Role == "developer" {
				sys = append(sys, text)
				continue
			}
			r.Messages = append(r.Messages, Message{Role: it.Role, Text: text})
		case "function_call":
			r.Messages = append(r.Messages, Message{Role: "assistant", Text: it.Arguments, ToolCalls: 1})
		case "function_call_output":
			r.Messages = append(r.Messages, Message{Role: "tool", Text: it.Output, ToolResult: true})
		}
	}
	r.System = strings.Join(sys, "\n")
}

// Size is what the item adds to a request in bytes: its text, image URLs,
// ids, names, arguments and outputs. Expanding previous_response_id and
// item_reference counts it against server.max_body_bytes before building
// anything (SPEC 10.1, 14).
func (it *Item) Size() int {
	n := len(it.ID) + len(it.CallID) + len(it.Name) + len(it.Arguments) + len(it.Output)
	for i := range it.Content {
		n += len(it.Content[i].Text) + len(it.Content[i].ImageURL)
	}
	return n
}

// Text joins the text of a message item's parts with "\n".
func (it *Item) Text() string {
	if len(it.Content) == 1 {
		return it.Content[0].Text
	}
	var sb strings.Builder
	for _, p := range it.Content {
		if p.Text == "" {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(p.Text)
	}
	return sb.String()
}
