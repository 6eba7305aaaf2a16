package providers

// Translation for a Responses API client (POST /v1/responses) served by an
// OpenAI-compatible or simulated deployment: the Responses request becomes a
// chat completions request, and the chat completion or chunk stream becomes
// a Responses object or event stream (SPEC 10.1).

import (
	"bytes"
	"encoding/json"

	"switchyard/wire"
)

// chatOut is the chat completions request written for a Responses client:
// the fields chat and Messages share (oaRequest, which the Anthropic
// translation reads) plus the chat-only ones.
type chatOut struct {
	oaRequest
	Tools           []chatToolOut   `json:"tools,omitempty"` // shadows oaRequest.Tools: adds strict
	ResponseFormat  json.RawMessage `json:"response_format,omitempty"`
	ReasoningEffort string          `json:"reasoning_effort,omitempty"`
	PromptCacheKey  string          `json:"prompt_cache_key,omitempty"`
}

type chatToolOut struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
}

// responsesToChat maps a Responses request onto a chat request for model:
// instructions become the first system message, message items messages,
// function_call items assistant tool_calls (consecutive ones in one
// message), function_call_output items tool messages, max_output_tokens
// max_completion_tokens, text.format response_format.
func responsesToChat(rq *wire.Responses, model string, stream bool) (*chatOut, error) {
	out := &chatOut{oaRequest: oaRequest{
		Model: model, Temperature: rq.Temperature, TopP: rq.TopP, Stream: stream, ParallelToolCalls: rq.ParallelToolCalls,
		MaxCompletionTokens: rq.MaxOutputTokens, User: rq.User,
	}, PromptCacheKey: rq.PromptCacheKey}
	if stream {
		out.StreamOptions = includeUsage
	}
	if rq.Instructions != "" {
		out.Messages = append(out.Messages, oaMessage{Role: "system", Content: rawString(rq.Instructions)})
	}
	for i := range rq.Input {
		it := &rq.Input[i]
		switch it.Type {
		case "message":
			m, err := chatMessageOf(it)
			if err != nil {
				return nil, badRequest("input[%d]: %v", i, err)
			}
			out.Messages = append(out.Messages, m)
		case "function_call":
			tc := oaToolCall{ID: it.CallID, Type: "function", Function: oaFunctionCall{Name: it.Name, Arguments: it.Arguments}}
			if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == "assistant" {
				out.Messages[n-1].ToolCalls = append(out.Messages[n-1].ToolCalls, tc)
				continue
			}
			out.Messages = append(out.Messages, oaMessage{Role: "assistant", Content: jsonNull, ToolCalls: []oaToolCall{tc}})
		case "function_call_output":
			out.Messages = append(out.Messages, oaMessage{Role: "tool", ToolCallID: it.CallID, Content: rawString(it.Output)})
		default:
			return nil, badRequest("input[%d]: item type %q cannot be sent upstream", i, it.Type)
		}
	}
	if len(out.Messages) == 0 {
		return nil, badRequest("input: the request has no message to send")
	}
	for _, t := range rq.Tools {
		var ct chatToolOut
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters, ct.Function.Strict = t.Name, t.Description, t.Parameters, t.Strict
		out.Tools = append(out.Tools, ct)
		out.oaRequest.Tools = append(out.oaRequest.Tools, oaTool{Type: "function", Function: oaFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	if tc := rq.ToolChoice; len(tc) > 0 {
		if tc[0] == '"' {
			out.ToolChoice = tc
		} else {
			var named struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(tc, &named) // validated by wire
			b := append([]byte(`{"type":"function","function":{"name":`), wire.AppendString(nil, named.Name)...)
			out.ToolChoice = append(b, "}}"...)
		}
	}
	if f := rq.TextFormat; f != nil {
		switch f.Type {
		case "json_object":
			out.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
		case "json_schema":
			rf := struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name        string          `json:"name"`
					Description string          `json:"description,omitempty"`
					Schema      json.RawMessage `json:"schema"`
					Strict      *bool           `json:"strict,omitempty"`
				} `json:"json_schema"`
			}{Type: "json_schema"}
			rf.JSONSchema.Name, rf.JSONSchema.Description, rf.JSONSchema.Schema, rf.JSONSchema.Strict = f.Name, f.Description, f.Schema, f.Strict
			out.ResponseFormat, _ = json.Marshal(rf)
		}
	}
	if len(rq.Reasoning) > 0 {
		var re struct {
			Effort string `json:"effort"`
		}
		_ = json.Unmarshal(rq.Reasoning, &re)
		out.ReasoningEffort = re.Effort
	}
	return out, nil
}

// chatMessageOf maps one message item: a single text part becomes a string
// content, images image_url parts; system and developer become system.
func chatMessageOf(it *wire.Item) (oaMessage, error) {
	role := it.Role
	if role == "developer" {
		role = "system" // every OpenAI-compatible server knows system
	}
	m := oaMessage{Role: role}
	hasImage := false
	for _, p := range it.Content {
		if p.Type == "input_image" {
			hasImage = true
		}
	}
	if !hasImage || role != "user" {
		if hasImage {
			return m, errImageRole(it.Role)
		}
		m.Content = rawString(it.Text())
		return m, nil
	}
	parts := make([]oaPart, 0, len(it.Content))
	for _, p := range it.Content {
		if p.Type == "input_image" {
			parts = append(parts, oaPart{Type: "image_url", ImageURL: &oaImageURL{URL: p.ImageURL, Detail: p.Detail}})
			continue
		}
		parts = append(parts, oaPart{Type: "text", Text: p.Text})
	}
	raw, err := json.Marshal(parts)
	m.Content = raw
	return m, err
}

type imageRoleError string

func (e imageRoleError) Error() string {
	return "input_image parts are only allowed in user messages, not in a " + string(e) + " message"
}

func errImageRole(role string) error { return imageRoleError(role) }

// responsesToChatBody is the upstream body of responsesToChat.
func responsesToChatBody(rq *wire.Responses, model string, stream bool) ([]byte, error) {
	out, err := responsesToChat(rq, model, stream)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// chatToResponses translates a chat completion into a response object.
func chatToResponses(raw []byte, rq *wire.Responses, created int64, done ResponsesDone) ([]byte, Usage, error) {
	var in oaResponse
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, Usage{}, upstreamGarbage(err)
	}
	u := in.Usage.usage()
	var text, refusal, finish string
	var calls []respCallIn
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		if c.FinishReason != nil {
			finish = *c.FinishReason
		}
		if m := c.Message; m != nil {
			if m.Content != nil {
				text = *m.Content
			}
			if m.Refusal != nil {
				refusal = *m.Refusal
			}
			for _, tc := range m.ToolCalls {
				calls = append(calls, respCallIn{id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments})
			}
		}
	}
	return buildResponse(rq, respID(rq), created, in.Model, text, refusal, calls, finish, u, done), u, nil
}

// chatToResponsesStream turns chat chunks into Responses events.
type chatToResponsesStream struct {
	e      *respEmitter
	finish string
	u      Usage
}

func newChatToResponsesStream(rq *wire.Responses, model string, created int64, done ResponsesDone) *chatToResponsesStream {
	return &chatToResponsesStream{e: newRespEmitter(rq, created, model, done)}
}

func (c *chatToResponsesStream) event(_ string, data []byte) ([]byte, bool, error) {
	if isDone(data) {
		c.e.finish(c.finish, c.u)
		return c.e.result(true)
	}
	if bytes.Contains(data, errorKey) && hasError(data) { // "error": null is no error
		return nil, false, midStreamError(data)
	}
	var ch oaResponse
	if err := json.Unmarshal(data, &ch); err != nil {
		return nil, false, upstreamGarbage(err)
	}
	if ch.Model != "" && !c.e.started {
		c.e.model = ch.Model
	}
	c.e.start()
	if ch.Usage != nil {
		c.u = ch.Usage.usage()
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue
		}
		if d := choice.Delta; d != nil {
			if d.Content != nil {
				c.e.textDelta(*d.Content)
			}
			if d.Refusal != nil {
				c.e.refusalDelta(*d.Refusal)
			}
			for _, tc := range d.ToolCalls {
				key := 0
				if tc.Index != nil {
					key = *tc.Index
				}
				// a new id at a known index is a new call (some
				// OpenAI-compatible servers reuse index 0)
				if !c.e.hasTool(key) || (tc.ID != "" && tc.ID != c.e.callID) {
					c.e.toolStart(key, tc.ID, tc.Function.Name)
				}
				c.e.toolArgs(key, tc.Function.Arguments)
			}
		}
		if choice.FinishReason != nil {
			c.finish = *choice.FinishReason
		}
	}
	return c.e.result(false)
}

// eof: a server that ends the body after its finish chunk but without
// [DONE] still completes the response; one cut before that did not finish.
func (c *chatToResponsesStream) eof() ([]byte, error) {
	if c.finish == "" {
		return nil, streamCut()
	}
	c.e.finish(c.finish, c.u)
	out, _, err := c.e.result(true)
	return out, err
}

func (c *chatToResponsesStream) usage() Usage { return c.u }

var _ converter = (*chatToResponsesStream)(nil)
