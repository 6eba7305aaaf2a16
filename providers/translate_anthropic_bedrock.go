package providers

// Translation between the Anthropic Messages API and Amazon Bedrock's
// Converse API (SPEC 10 `bedrock`): a Messages request becomes a Converse
// request, and a Converse response or converse-stream event sequence
// becomes a Messages response or Messages stream events. Messages is the
// pivot of the bedrock adapter: an OpenAI chat or Responses client is first
// mapped onto Messages by the existing translators (chatToAnthropic,
// responsesToChat), and the Messages events a Converse stream becomes are
// fed to the existing Messages -> client converters, so every client format
// agrees on messages, tools, images and stop reasons across providers.
//
// Shapes follow the Bedrock Runtime API reference: Converse,
// ConverseStream, Message, ContentBlock, ToolSpecification, ToolChoice,
// InferenceConfiguration, TokenUsage, ConverseStreamOutput and its event
// types (MessageStartEvent, ContentBlockStartEvent, ContentBlockDeltaEvent,
// ContentBlockStopEvent, MessageStopEvent, ConverseStreamMetadataEvent).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"switchyard/routing"
)

// cvRequest is a Converse (and ConverseStream) request body; the model id
// travels in the path.
type cvRequest struct {
	Messages        []cvMessage        `json:"messages"`
	System          []cvSystemBlock    `json:"system,omitempty"`
	InferenceConfig *cvInferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *cvToolConfig      `json:"toolConfig,omitempty"`
}

type cvSystemBlock struct {
	Text string `json:"text"`
}

type cvInferenceConfig struct {
	MaxTokens     *int     `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type cvMessage struct {
	Role    string    `json:"role"` // user | assistant
	Content []cvBlock `json:"content"`
}

// cvBlock is a ContentBlock: exactly one member is set.
type cvBlock struct {
	Text       *string       `json:"text,omitempty"`
	Image      *cvImage      `json:"image,omitempty"`
	ToolUse    *cvToolUse    `json:"toolUse,omitempty"`
	ToolResult *cvToolResult `json:"toolResult,omitempty"`
	// Reasoning is reasoningContent: read so it can be skipped, never sent.
	Reasoning json.RawMessage `json:"reasoningContent,omitempty"`
}

type cvImage struct {
	Format string `json:"format"` // png | jpeg | gif | webp
	Source struct {
		Bytes string `json:"bytes"` // base64 in the JSON protocol
	} `json:"source"`
}

type cvToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type cvToolResult struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []cvToolResultBlock `json:"content"`
	Status    string              `json:"status,omitempty"` // success | error
}

type cvToolResultBlock struct {
	Text  *string         `json:"text,omitempty"`
	Image *cvImage        `json:"image,omitempty"`
	JSON  json.RawMessage `json:"json,omitempty"`
}

type cvToolConfig struct {
	Tools      []cvTool      `json:"tools"`
	ToolChoice *cvToolChoice `json:"toolChoice,omitempty"`
}

type cvTool struct {
	ToolSpec cvToolSpec `json:"toolSpec"`
}

type cvToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
}

// cvToolChoice is a ToolChoice union: auto, any or tool.
type cvToolChoice struct {
	Auto *struct{}  `json:"auto,omitempty"`
	Any  *struct{}  `json:"any,omitempty"`
	Tool *cvNameRef `json:"tool,omitempty"`
}

type cvNameRef struct {
	Name string `json:"name"`
}

// cvResponse is a Converse response.
type cvResponse struct {
	Output struct {
		Message *cvMessage `json:"message"`
	} `json:"output"`
	StopReason string   `json:"stopReason"`
	Usage      *cvUsage `json:"usage"`
}

// cvUsage is TokenUsage. Bedrock's inputTokens excludes the cache read and
// write tokens (SPEC 10.2), as Anthropic's input_tokens does. The counts
// are tokenCounts: any JSON number is clamped, never a malformed answer.
type cvUsage struct {
	InputTokens           tokenCount `json:"inputTokens"`
	OutputTokens          tokenCount `json:"outputTokens"`
	TotalTokens           tokenCount `json:"totalTokens"`
	CacheReadInputTokens  tokenCount `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens tokenCount `json:"cacheWriteInputTokens,omitempty"`
}

// clampBedrock takes a negative count as 0 and one over 100 million as 100
// million, logging either (SPEC 14).
func clampBedrock(field string, n tokenCount) int {
	if f := float64(n); f < 0 || f > MaxUsageTokens {
		slog.Warn("bedrock: token count out of range clamped", "field", field, "value", f, "clamped", n.clamped())
	}
	return n.clamped()
}

// normalized is the usage in the gateway's convention: prompt tokens count
// the cached and cache-written ones too.
func (u *cvUsage) normalized() Usage {
	if u == nil {
		return Usage{}
	}
	in := clampBedrock("inputTokens", u.InputTokens)
	read := clampBedrock("cacheReadInputTokens", u.CacheReadInputTokens)
	write := clampBedrock("cacheWriteInputTokens", u.CacheWriteInputTokens)
	return Usage{
		PromptTokens:     min(in+read+write, MaxUsageTokens),
		CompletionTokens: clampBedrock("outputTokens", u.OutputTokens),
		CachedTokens:     read,
		CacheWriteTokens: write,
	}
}

// ---- request: Messages -> Converse ----

// anthropicRawToConverse translates an Anthropic-format client body.
func anthropicRawToConverse(raw []byte) (*cvRequest, error) {
	var in anRequest
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest("anthropic request: %v", err)
	}
	return anthropicToConverse(&in, in.MaxTokens > 0)
}

// anthropicToConverse maps a Messages request onto a Converse request.
// maxTokens reports whether in.MaxTokens came from the client (the chat
// mapping fills a default that a Converse request need not carry).
func anthropicToConverse(in *anRequest, maxTokens bool) (*cvRequest, error) {
	out := &cvRequest{}
	ic := cvInferenceConfig{Temperature: in.Temperature, TopP: in.TopP, StopSequences: in.StopSequences}
	if maxTokens && in.MaxTokens > 0 {
		n := in.MaxTokens
		ic.MaxTokens = &n
	}
	if ic.MaxTokens != nil || ic.Temperature != nil || ic.TopP != nil || len(ic.StopSequences) > 0 {
		out.InferenceConfig = &ic
	}
	system, err := anthropicSystemTexts(in.System)
	if err != nil {
		return nil, badRequest("system: %v", err)
	}
	for _, s := range system {
		out.System = append(out.System, cvSystemBlock{Text: s})
	}
	for i, m := range in.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, badRequest("messages[%d].role: %q cannot be sent to a Bedrock deployment", i, m.Role)
		}
		blocks, err := anthropicContentToConverse(m.Content)
		if err != nil {
			return nil, badRequest("messages[%d].content: %v", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		// Converse wants alternating turns, like Messages: merge neighbours.
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == m.Role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
			continue
		}
		out.Messages = append(out.Messages, cvMessage{Role: m.Role, Content: blocks})
	}
	// tool_choice none has no Converse equivalent (ToolChoice is auto, any
	// or tool): the tools are not offered, so the model cannot call one the
	// client ruled out, and the transcript's tool blocks go as text below
	if len(in.Tools) > 0 && (in.ToolChoice == nil || in.ToolChoice.Type != "none") {
		tc := &cvToolConfig{}
		for _, t := range in.Tools {
			spec := cvToolSpec{Name: t.Name, Description: t.Description}
			spec.InputSchema.JSON = jsonObjectOr(t.InputSchema)
			tc.Tools = append(tc.Tools, cvTool{ToolSpec: spec})
		}
		if c := in.ToolChoice; c != nil {
			switch c.Type {
			case "auto":
				tc.ToolChoice = &cvToolChoice{Auto: &struct{}{}}
			case "any":
				tc.ToolChoice = &cvToolChoice{Any: &struct{}{}}
			case "tool":
				tc.ToolChoice = &cvToolChoice{Tool: &cvNameRef{Name: c.Name}}
			}
		}
		out.ToolConfig = tc
	}
	if out.ToolConfig == nil {
		toolBlocksAsText(out.Messages)
	}
	if len(out.Messages) == 0 {
		return nil, badRequest("messages: no content to send")
	}
	return out, nil
}

// toolBlocksAsText rewrites the tool calls and results of msgs as text, in
// place, for a request that offers no tools. Converse refuses toolUse and
// toolResult blocks without a toolConfig (the API reference: it "must be
// defined" when the messages hold them), which a conversation over an
// agent's transcript without this turn's tools (a summary, a side
// question) does not send; declaring the transcript's tools instead would
// let the model call a tool the client did not offer. A call becomes
// "[tool call NAME (id ID): INPUT]" in its assistant turn, a result
// "[tool result for ID: TEXT]" ("tool error" when it failed) in its user
// turn, with the images a result held after it.
func toolBlocksAsText(msgs []cvMessage) {
	for i := range msgs {
		m := &msgs[i]
		if !slices.ContainsFunc(m.Content, func(b cvBlock) bool { return b.ToolUse != nil || b.ToolResult != nil }) {
			continue
		}
		out := make([]cvBlock, 0, len(m.Content)+1)
		for _, b := range m.Content {
			switch {
			case b.ToolUse != nil:
				u := b.ToolUse
				input := string(u.Input)
				if input == "" {
					input = "{}"
				}
				out = append(out, textBlock("[tool call "+u.Name+" (id "+u.ToolUseID+"): "+input+"]"))
			case b.ToolResult != nil:
				r := b.ToolResult
				kind := "tool result"
				if r.Status == "error" {
					kind = "tool error"
				}
				var sb strings.Builder
				var images []cvBlock
				for _, c := range r.Content {
					switch {
					case c.Text != nil:
						sb.WriteString(*c.Text)
					case len(c.JSON) > 0:
						sb.Write(c.JSON)
					case c.Image != nil:
						images = append(images, cvBlock{Image: c.Image})
						continue
					default:
						continue
					}
					sb.WriteByte('\n')
				}
				out = append(out, textBlock("["+kind+" for "+r.ToolUseID+": "+strings.TrimSuffix(sb.String(), "\n")+"]"))
				out = append(out, images...)
			default:
				out = append(out, b)
			}
		}
		m.Content = out
	}
}

func textBlock(s string) cvBlock { return cvBlock{Text: &s} }

// anthropicSystemTexts reads a system prompt given as a string or as text
// blocks.
func anthropicSystemTexts(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var blocks []anBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("must be a string or an array of text blocks")
	}
	var out []string
	for _, b := range blocks {
		if b.Type != "text" {
			return nil, fmt.Errorf("block type %q is not text", b.Type)
		}
		if b.Text != "" {
			out = append(out, b.Text)
		}
	}
	return out, nil
}

// anthropicContentToConverse maps a string or an array of Messages blocks.
// Thinking blocks are dropped (Converse replays reasoning only with its own
// signatures); a block type with no Converse equivalent is a bad request.
func anthropicContentToConverse(raw json.RawMessage) ([]cvBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, nil
		}
		return []cvBlock{{Text: &s}}, nil
	}
	var blocks []anBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("must be a string or an array of blocks")
	}
	out := make([]cvBlock, 0, len(blocks))
	for i := range blocks {
		b := &blocks[i]
		switch b.Type {
		case "text":
			if b.Text != "" {
				t := b.Text
				out = append(out, cvBlock{Text: &t})
			}
		case "image":
			img, err := converseImage(b.Source)
			if err != nil {
				return nil, err
			}
			out = append(out, cvBlock{Image: img})
		case "tool_use":
			out = append(out, cvBlock{ToolUse: &cvToolUse{ToolUseID: converseToolID(b.ID), Name: b.Name, Input: jsonObjectOr(b.Input)}})
		case "tool_result":
			content, err := toolResultToConverse(b.Content)
			if err != nil {
				return nil, fmt.Errorf("tool_result: %v", err)
			}
			tr := &cvToolResult{ToolUseID: converseToolID(b.ToolUseID), Content: content}
			if b.IsError {
				tr.Status = "error"
			}
			out = append(out, cvBlock{ToolResult: tr})
		case "thinking", "redacted_thinking":
		default:
			return nil, fmt.Errorf("block type %q cannot be sent to a Bedrock deployment", b.Type)
		}
	}
	return out, nil
}

// maxToolID is the longest toolUseId Converse takes.
const maxToolID = 64

// converseToolID is a tool call id in the shape Converse takes (1 to 64
// of [a-zA-Z0-9_-], API reference "ToolUseBlock"): a valid id as it is;
// any other (an id another deployment wrote, "functions.f:0", or one too
// long) its allowed characters and a hash of the whole, so a call and its
// result, rewritten alike, still pair up and distinct ids stay distinct.
func converseToolID(id string) string {
	ok := id != "" && len(id) <= maxToolID
	for i := 0; ok && i < len(id); i++ {
		ok = toolIDByte(id[i])
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	h := "_" + hex.EncodeToString(sum[:12])
	var sb strings.Builder
	for i := 0; i < len(id) && sb.Len() < maxToolID-len(h); i++ {
		if toolIDByte(id[i]) {
			sb.WriteByte(id[i])
		} else {
			sb.WriteByte('_')
		}
	}
	return sb.String() + h
}

func toolIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// toolResultToConverse maps a tool_result's content (a string or text and
// image blocks). Converse wants at least one block.
func toolResultToConverse(raw json.RawMessage) ([]cvToolResultBlock, error) {
	raw = bytes.TrimSpace(raw)
	var out []cvToolResultBlock
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		out = append(out, cvToolResultBlock{Text: &s})
	default:
		var blocks []anBlock
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return nil, fmt.Errorf("content must be a string or an array of blocks")
		}
		for i := range blocks {
			switch b := &blocks[i]; b.Type {
			case "text":
				t := b.Text
				out = append(out, cvToolResultBlock{Text: &t})
			case "image":
				img, err := converseImage(b.Source)
				if err != nil {
					return nil, err
				}
				out = append(out, cvToolResultBlock{Image: img})
			default:
				return nil, fmt.Errorf("block type %q cannot be sent to a Bedrock deployment", b.Type)
			}
		}
	}
	if len(out) == 0 {
		empty := ""
		out = append(out, cvToolResultBlock{Text: &empty})
	}
	return out, nil
}

// converseImage maps a base64 image source. Converse takes image bytes (or
// an S3 location), never a URL: a URL image is a bad request rather than a
// fetch the gateway would make on the client's behalf.
func converseImage(src *anSource) (*cvImage, error) {
	if src == nil || src.Type != "base64" {
		return nil, fmt.Errorf("a Bedrock deployment takes images as base64 data (a data: URL), not by URL")
	}
	format, ok := strings.CutPrefix(strings.ToLower(src.MediaType), "image/")
	switch {
	case !ok:
		return nil, fmt.Errorf("image media type %q is not an image", src.MediaType)
	case format == "jpg":
		format = "jpeg"
	case format == "png", format == "jpeg", format == "gif", format == "webp":
	default:
		return nil, fmt.Errorf("image format %q is not one of png, jpeg, gif, webp", format)
	}
	img := &cvImage{Format: format}
	img.Source.Bytes = src.Data
	return img, nil
}

// ---- response: Converse -> Messages ----

// anthropicStop maps a Converse stopReason onto a Messages stop_reason;
// finishFromStop then gives the OpenAI finish reason. A guardrail or
// content filter becomes refusal, which reads as content_filter.
func anthropicStop(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence", "max_tokens", "tool_use", "model_context_window_exceeded":
		return stop
	case "guardrail_intervened", "content_filtered":
		return "refusal"
	}
	return "end_turn"
}

// contentFiltered reports a stopReason that is a content filter (SPEC 10).
func contentFiltered(stop string) bool {
	return stop == "guardrail_intervened" || stop == "content_filtered"
}

// errContentFiltered is a Converse answer filtered before any content: a
// content_policy failure that walks that fallback chain (SPEC 7.3, 10).
func errContentFiltered(stop string) *Error {
	return &Error{Status: 400, Class: routing.ClassContentPolicy, Type: "invalid_request_error", Code: "content_filter",
		Message: "Bedrock filtered the answer before any content (stopReason " + stop + ")"}
}

// converseToAnthropic translates a Converse response into a Messages
// response with the given id and model, and returns its normalized usage.
func converseToAnthropic(raw []byte, id, model string) (*anResponse, Usage, error) {
	var in cvResponse
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, Usage{}, upstreamGarbage(err)
	}
	u := in.Usage.normalized()
	out := &anResponse{ID: id, Type: "message", Role: "assistant", Model: model, Content: []anBlock{}, Usage: anUsageOf(u)}
	if m := in.Output.Message; m != nil {
		for _, b := range m.Content {
			switch {
			case b.Text != nil:
				out.Content = append(out.Content, anBlock{Type: "text", Text: *b.Text})
			case b.ToolUse != nil:
				out.Content = append(out.Content, anBlock{Type: "tool_use", ID: b.ToolUse.ToolUseID, Name: b.ToolUse.Name, Input: jsonObjectOr(b.ToolUse.Input)})
			}
		}
	}
	if contentFiltered(in.StopReason) && !hasContent(out.Content) {
		return nil, u, errContentFiltered(in.StopReason)
	}
	stop := anthropicStop(in.StopReason)
	out.StopReason = &stop
	return out, u, nil
}

func hasContent(blocks []anBlock) bool {
	for _, b := range blocks {
		if b.Type == "tool_use" || b.Text != "" {
			return true
		}
	}
	return false
}
