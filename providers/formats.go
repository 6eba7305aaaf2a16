package providers

import (
	"bytes"
	"encoding/json"

	"switchyard/wire"
)

// The JSON shapes of the OpenAI Chat Completions and Anthropic Messages APIs
// that the translators read and write. Fields a translator does not map are
// left out on purpose: they are dropped, not forwarded half-understood.

// oaRequest is an OpenAI chat completions request.
type oaRequest struct {
	Model               string          `json:"model"`
	Messages            []oaMessage     `json:"messages"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"` // string or array
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       json.RawMessage `json:"stream_options,omitempty"`
	Tools               []oaTool        `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"` // string or object
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	User                string          `json:"user,omitempty"`
	// N is how many choices the client asks for; the Messages API has one
	// answer, so its translation refuses more than 1.
	N *int `json:"n,omitempty"`
	// ResponseFormat is the answer's format ({"type":"json_schema",
	// "json_schema":{...}}, json_object or text); a JSON schema crosses
	// to and from the Messages API's output_config.format.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
}

// oaMessage is one request message; Content is a string, an array of parts
// or null.
type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []oaToolCall    `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// oaPart is one element of an array content.
type oaPart struct {
	Type     string      `json:"type"`
	Text     string      `json:"text,omitempty"`
	ImageURL *oaImageURL `json:"image_url,omitempty"`
	File     *oaFile     `json:"file,omitempty"`
}

// oaFile is a "file" content part's file: a user message's document (a
// PDF) as a data: URL with its name, or an uploaded file's id.
type oaFile struct {
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
}

type oaImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type oaToolCall struct {
	Index    *int           `json:"index,omitempty"` // stream deltas only
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function oaFunctionCall `json:"function"`
}

type oaFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type oaTool struct {
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// oaResponse is a chat completion, or (Object chat.completion.chunk) a chunk.
type oaResponse struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []oaChoice `json:"choices"`
	Usage   *oaUsage   `json:"usage,omitempty"`
}

type oaChoice struct {
	Index        int        `json:"index"`
	Message      *oaOutMsg  `json:"message,omitempty"`
	Delta        *oaDeltaIn `json:"delta,omitempty"`
	FinishReason *string    `json:"finish_reason"`
}

// oaOutMsg is a response message: content is null when there is no text.
type oaOutMsg struct {
	Role      string       `json:"role"`
	Content   *string      `json:"content"`
	Refusal   *string      `json:"refusal,omitempty"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

// oaDeltaIn is a chunk delta as read from an upstream.
type oaDeltaIn struct {
	Role      string       `json:"role,omitempty"`
	Content   *string      `json:"content,omitempty"`
	Refusal   *string      `json:"refusal,omitempty"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

// oaUsage is chat usage as an OpenAI-format client reads it (and as a
// translator decodes an upstream's): prompt_tokens counts the cached tokens,
// prompt_tokens_details says how many were cached (SPEC 10.2).
type oaUsage struct {
	PromptTokens        int              `json:"prompt_tokens"`
	CompletionTokens    int              `json:"completion_tokens"`
	TotalTokens         int              `json:"total_tokens"`
	PromptTokensDetails *oaPromptDetails `json:"prompt_tokens_details,omitempty"`
	// CompletionTokensDetails says how many of completion_tokens were
	// reasoning (CompletionUsage.completion_tokens_details of the OpenAI
	// API reference).
	CompletionTokensDetails *oaCompletionDetails `json:"completion_tokens_details,omitempty"`
}

type oaPromptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type oaCompletionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// usage normalizes an upstream's chat usage (nil: none reported).
func (u *oaUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	n := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		n.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		n.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return n
}

// oaUsageOf presents u in the OpenAI convention; prompt_tokens_details is
// there when some input was cached, completion_tokens_details when some
// output was reasoning. OpenAI has no count of cache writes: they stay in
// prompt_tokens.
func oaUsageOf(u Usage) *oaUsage {
	o := &oaUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	if u.CachedTokens > 0 {
		o.PromptTokensDetails = &oaPromptDetails{CachedTokens: u.CachedTokens}
	}
	if r := u.reasoning(); r > 0 {
		o.CompletionTokensDetails = &oaCompletionDetails{ReasoningTokens: r}
	}
	return o
}

// oaChunk is a chunk as written to an OpenAI-format client.
type oaChunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []oaChunkChoice `json:"choices"`
	Usage   *oaUsage        `json:"usage,omitempty"`
}

type oaChunkChoice struct {
	Index        int       `json:"index"`
	Delta        oaDeltaIn `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
}

// anRequest is an Anthropic Messages request.
type anRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        json.RawMessage `json:"system,omitempty"` // string or text blocks
	Messages      []anMessage     `json:"messages"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Tools         []anTool        `json:"tools,omitempty"`
	ToolChoice    *anToolChoice   `json:"tool_choice,omitempty"`
	Metadata      *anMetadata     `json:"metadata,omitempty"`
	OutputConfig  *anOutputConfig `json:"output_config,omitempty"`
}

// anOutputConfig is the Messages API's output_config; only its format is
// mapped (platform.claude.com/docs/en/build-with-claude/structured-outputs).
type anOutputConfig struct {
	Format *anOutputFormat `json:"format,omitempty"`
}

// anOutputFormat is a JSON output format: {"type":"json_schema","schema"}.
type anOutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// oaJSONSchemaFormat is the json_schema member of a chat response_format.
type oaJSONSchemaFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// anMessage is one message; Content is a string or an array of blocks.
type anMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anBlock is a content block of any type.
type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *anSource       `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // tool_result: string or blocks
	IsError   bool            `json:"is_error,omitempty"`
	Title     string          `json:"title,omitempty"` // document
}

// anSource is an image's or a document's source. A document's may also be
// text (Data holds the text), content (Content holds blocks) or file.
type anSource struct {
	Type      string          `json:"type"` // base64 | url | text | content | file
	MediaType string          `json:"media_type,omitempty"`
	Data      string          `json:"data,omitempty"`
	URL       string          `json:"url,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anToolChoice struct {
	Type                   string `json:"type"` // auto | any | tool | none
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type anMetadata struct {
	UserID string `json:"user_id,omitempty"`
}

// anResponse is a Messages response (also the message of message_start).
type anResponse struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	Role         string    `json:"role"`
	Model        string    `json:"model"`
	Content      []anBlock `json:"content"`
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	Usage        anUsage   `json:"usage"`
}

// anUsage is Anthropic's usage object, in the order Anthropic writes it:
// input_tokens excludes the cache reads and writes.
type anUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens,omitempty"`
	OutputTokens             int `json:"output_tokens"`
}

// UnmarshalJSON implements json.Unmarshaler: a count is read from any JSON
// number (an exponent, a fraction, beyond int64) instead of failing the
// whole answer or losing the stream's usage, and kept within ±2^40, so the
// sum prompt() cannot wrap around to a negative count while an absurd one
// still reaches Usage.Clamped, which caps and logs it (SPEC 14).
func (u *anUsage) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var w struct {
		InputTokens              tokenCount `json:"input_tokens"`
		CacheCreationInputTokens tokenCount `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     tokenCount `json:"cache_read_input_tokens"`
		OutputTokens             tokenCount `json:"output_tokens"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*u = anUsage{InputTokens: w.InputTokens.bounded(), CacheCreationInputTokens: w.CacheCreationInputTokens.bounded(),
		CacheReadInputTokens: w.CacheReadInputTokens.bounded(), OutputTokens: w.OutputTokens.bounded()}
	return nil
}

// prompt is every input token, cached or not, as OpenAI counts prompt_tokens.
func (u anUsage) prompt() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// usage normalizes Anthropic's counts: its input_tokens excludes the cache
// reads and writes, which Usage.PromptTokens includes (SPEC 10.2).
func (u anUsage) usage() Usage {
	return Usage{PromptTokens: u.prompt(), CompletionTokens: u.OutputTokens,
		CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
}

// anUsageOf presents u in the Anthropic convention: input_tokens without
// the cache reads and writes, which have fields of their own.
func anUsageOf(u Usage) anUsage {
	return anUsage{InputTokens: max(u.PromptTokens-u.CachedTokens-u.CacheWriteTokens, 0), OutputTokens: u.CompletionTokens,
		CacheReadInputTokens: u.CachedTokens, CacheCreationInputTokens: u.CacheWriteTokens}
}

// mergeDelta folds the usage of a message_delta into u. Its counts are
// cumulative; a count it leaves out (or at 0) keeps the message_start
// value, except output_tokens, which every message_delta carries.
func (u *Usage) mergeDelta(d anUsage) {
	a := anUsageOf(*u)
	if d.InputTokens > 0 {
		a.InputTokens = d.InputTokens
	}
	if d.CacheReadInputTokens > 0 {
		a.CacheReadInputTokens = d.CacheReadInputTokens
	}
	if d.CacheCreationInputTokens > 0 {
		a.CacheCreationInputTokens = d.CacheCreationInputTokens
	}
	a.OutputTokens = d.OutputTokens
	*u = a.usage()
}

// Stop reasons, Anthropic <-> OpenAI.
func finishFromStop(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn
}

func stopFromFinish(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// rawString is a JSON string literal as a RawMessage.
func rawString(s string) json.RawMessage { return wire.AppendString(nil, s) }

// jsonObjectOr returns raw when it is a JSON object, else "{}": Anthropic
// requires tool_use input to be an object, OpenAI sends arguments as text
// that may be empty or cut.
func jsonObjectOr(raw []byte) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' && json.Valid(raw) {
		return json.RawMessage(raw)
	}
	return json.RawMessage(`{}`)
}

// Anthropic stream event payloads, in the field order Anthropic sends.
type anMessageStart struct {
	Type    string     `json:"type"`
	Message anResponse `json:"message"`
}

type anBlockStart struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	ContentBlock json.RawMessage `json:"content_block"`
}

type anBlockDelta struct {
	Type  string  `json:"type"`
	Index int     `json:"index"`
	Delta anDelta `json:"delta"`
}

type anDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	PartialJSON string `json:"partial_json,omitempty"`
}

type anBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type anMessageDelta struct {
	Type  string         `json:"type"`
	Delta anStopDelta    `json:"delta"`
	Usage anMessageUsage `json:"usage"`
}

type anStopDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// anMessageUsageOf presents u as a message_delta's usage, in the
// Anthropic convention (anUsageOf).
func anMessageUsageOf(u Usage) anMessageUsage {
	a := anUsageOf(u)
	return anMessageUsage{InputTokens: a.InputTokens, CacheCreationInputTokens: a.CacheCreationInputTokens,
		CacheReadInputTokens: a.CacheReadInputTokens, OutputTokens: a.OutputTokens}
}

// anMessageUsage is the cumulative usage of a message_delta written to an
// Anthropic-format client.
type anMessageUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens,omitempty"`
	OutputTokens             int `json:"output_tokens"`
}

var messageStopData = []byte(`{"type":"message_stop"}`)
