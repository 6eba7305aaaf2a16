package providers

// Translation for an OpenAI-format client (POST /v1/chat/completions) served
// by a Gemini deployment (kind gemini, or a Gemini model on vertex): the chat
// request becomes a generateContent request, and the Gemini response or
// streamGenerateContent event stream becomes a chat completion or chunk
// stream, event by event (SPEC 10). The Anthropic and Responses
// translations build the same chat request and read the same parsed answer
// (translate_anthropic_to_gemini.go, translate_responses_gemini.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"strings"

	"switchyard/routing"
	"switchyard/wire"
)

// gmChatIn is a chat request as the Gemini translation reads it: the fields
// chat shares with Messages (oaRequest) plus the chat-only ones Gemini maps.
type gmChatIn struct {
	oaRequest
	ResponseFormat  json.RawMessage `json:"response_format,omitempty"`
	ReasoningEffort string          `json:"reasoning_effort,omitempty"`
	N               *int            `json:"n,omitempty"`

	// thinkingBudget is an Anthropic client's thinking.budget_tokens; it
	// wins over ReasoningEffort.
	thinkingBudget *int
	// model is the upstream model (Gemini 3 needs thought signatures).
	model string
}

// openAIToGeminiRequest translates an OpenAI chat completions body into a
// generateContent body for model.
func openAIToGeminiRequest(raw []byte, model string) ([]byte, error) {
	var in gmChatIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest("openai request: %v", err)
	}
	in.model = model
	out, err := chatToGemini(&in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// chatToGemini maps a parsed chat request onto a generateContent request:
// system and developer messages become systemInstruction, user and tool
// messages user turns (tool results functionResponse parts), assistant
// messages model turns (tool calls functionCall parts); consecutive turns of
// one role are merged, so parallel tool results go back in one turn.
func chatToGemini(in *gmChatIn) (*gmRequest, error) {
	out := &gmRequest{}
	var system []gmPart
	names := map[string]string{} // tool_call_id -> function name, for functionResponse
	for i, m := range in.Messages {
		var role string
		var parts []gmPart
		switch m.Role {
		case "system", "developer":
			text, err := openAIText(m.Content)
			if err != nil {
				return nil, badRequest("messages[%d].content: %v", i, err)
			}
			if text != "" {
				system = append(system, gmPart{Text: text})
			}
			continue
		case "user":
			p, err := geminiParts(m.Content)
			if err != nil {
				return nil, badRequest("messages[%d]: %v", i, err)
			}
			role, parts = "user", p
		case "assistant":
			text, err := openAIText(m.Content)
			if err != nil {
				return nil, badRequest("messages[%d].content: %v", i, err)
			}
			if text != "" {
				parts = append(parts, gmPart{Text: text})
			}
			for j, tc := range m.ToolCalls {
				names[tc.ID] = tc.Function.Name
				part := gmPart{FunctionCall: &gmFunctionCall{Name: tc.Function.Name, Args: jsonObjectOr([]byte(tc.Function.Arguments))}}
				if j == 0 && needsSignature(in.model) {
					// Gemini 3 rejects a replayed call without the first
					// call's thought signature, which OpenAI-shaped history
					// cannot carry: Google's documented sentinel stands in
					// (https://ai.google.dev/gemini-api/docs/thought-signatures)
					part.ThoughtSignature = skipSignature
				}
				parts = append(parts, part)
			}
			role = "model"
		case "tool":
			text, err := openAIText(m.Content)
			if err != nil {
				return nil, badRequest("messages[%d].content: %v", i, err)
			}
			name := names[m.ToolCallID]
			if name == "" {
				name = m.Name
			}
			if name == "" {
				name = m.ToolCallID
			}
			role, parts = "user", []gmPart{{FunctionResponse: &gmFunctionResponse{Name: name, Response: toolResponse(text)}}}
		default:
			return nil, badRequest("messages[%d]: role %q cannot be sent to a Gemini deployment", i, m.Role)
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			continue
		}
		out.Contents = append(out.Contents, gmContent{Role: role, Parts: parts})
	}
	if len(out.Contents) == 0 {
		return nil, badRequest("messages: the request has no user or assistant message to send")
	}
	if len(system) > 0 {
		out.SystemInstruction = &gmContent{Parts: system}
	}
	gc, err := generationConfig(in)
	if err != nil {
		return nil, err
	}
	out.GenerationConfig = gc
	var decls []gmFunctionDecl
	for _, t := range in.Tools {
		if t.Type != "function" && t.Type != "" {
			return nil, badRequest("tools: type %q cannot be sent to a Gemini deployment", t.Type)
		}
		decls = append(decls, gmFunctionDecl{Name: t.Function.Name, Description: t.Function.Description, Parameters: geminiSchema(t.Function.Parameters)})
	}
	if len(decls) > 0 {
		out.Tools = []gmTool{{FunctionDeclarations: decls}}
	}
	tc, err := geminiToolConfig(in.ToolChoice)
	if err != nil {
		return nil, badRequest("tool_choice: %v", err)
	}
	if len(decls) > 0 {
		out.ToolConfig = tc
	}
	return out, nil
}

// skipSignature is the thoughtSignature Google documents for replayed
// function calls whose real signature is not available.
const skipSignature = "skip_thought_signature_validator"

// needsSignature reports a Gemini 3 model, which validates thought
// signatures on replayed function calls.
func needsSignature(model string) bool {
	model = strings.TrimPrefix(model, "models/")
	return strings.HasPrefix(model, "gemini-3.") || strings.HasPrefix(model, "gemini-3-")
}

// generationConfig maps the sampling, length, stop, candidate, output format
// and reasoning fields; nil when the request sets none.
func generationConfig(in *gmChatIn) (*gmGenConfig, error) {
	gc := gmGenConfig{Temperature: in.Temperature, TopP: in.TopP}
	switch {
	case in.MaxCompletionTokens != nil && *in.MaxCompletionTokens > 0:
		gc.MaxOutputTokens = in.MaxCompletionTokens
	case in.MaxTokens != nil && *in.MaxTokens > 0:
		gc.MaxOutputTokens = in.MaxTokens
	}
	stop, err := stopSequences(in.Stop)
	if err != nil {
		return nil, badRequest("stop: %v", err)
	}
	gc.StopSequences = stop
	if in.N != nil && *in.N > 1 && !in.Stream {
		gc.CandidateCount = in.N // a stream relays candidate 0 only
	}
	if rf := bytes.TrimSpace(in.ResponseFormat); len(rf) > 0 && string(rf) != "null" {
		var f struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(rf, &f); err != nil {
			return nil, badRequest("response_format: %v", err)
		}
		switch f.Type {
		case "json_object":
			gc.ResponseMimeType = "application/json"
		case "json_schema":
			gc.ResponseMimeType = "application/json"
			gc.ResponseSchema = geminiSchema(f.JSONSchema.Schema)
		}
	}
	budget := in.thinkingBudget
	if b, ok := thinkingBudgets[in.ReasoningEffort]; ok && budget == nil {
		budget = &b
	}
	if budget != nil {
		b := *budget
		if b == 0 && strings.Contains(in.model, "-pro") {
			b = minProThinking // Pro models cannot turn thinking off
		}
		gc.ThinkingConfig = &gmThinking{ThinkingBudget: &b}
	}
	if gc.Temperature == nil && gc.TopP == nil && gc.MaxOutputTokens == nil && gc.StopSequences == nil &&
		gc.CandidateCount == nil && gc.ResponseMimeType == "" && gc.ThinkingConfig == nil {
		return nil, nil
	}
	return &gc, nil
}

// geminiParts maps a user message's content (a string or text and image
// parts) to Gemini parts: data: URLs become inlineData, other URLs fileData.
func geminiParts(raw json.RawMessage) ([]gmPart, error) {
	c := bytes.TrimSpace(raw)
	switch {
	case len(c) == 0 || string(c) == "null":
		return nil, nil
	case c[0] == '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, nil
		}
		return []gmPart{{Text: s}}, nil
	}
	var parts []oaPart
	if err := json.Unmarshal(c, &parts); err != nil {
		return nil, fmt.Errorf("content must be a string or an array of parts")
	}
	var out []gmPart
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text":
			if p.Text != "" {
				out = append(out, gmPart{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL != nil {
				out = append(out, imagePart(p.ImageURL.URL))
			}
		case "file":
			// a document inline (a PDF as a data: URL: inlineData takes it,
			// https://ai.google.dev/gemini-api/docs/document-processing); an
			// uploaded OpenAI file id means nothing to Gemini
			var s *anSource
			if p.File != nil {
				s = imageSource(p.File.FileData)
			}
			if s == nil || s.Type != "base64" {
				return nil, fmt.Errorf("a file part without file_data as a data: URL cannot be sent to a Gemini deployment")
			}
			out = append(out, gmPart{InlineData: &gmBlob{MimeType: s.MediaType, Data: s.Data}})
		default:
			return nil, fmt.Errorf("content part type %q cannot be sent to a Gemini deployment", p.Type)
		}
	}
	return out, nil
}

// imagePart maps an image URL to inlineData (a data: URL) or fileData, whose
// MIME type is guessed from the extension.
func imagePart(u string) gmPart {
	if s := imageSource(u); s.Type == "base64" {
		return gmPart{InlineData: &gmBlob{MimeType: s.MediaType, Data: s.Data}}
	}
	mt := mime.TypeByExtension(path.Ext(strings.SplitN(u, "?", 2)[0]))
	if mt == "" {
		mt = "image/jpeg"
	}
	return gmPart{FileData: &gmFileData{MimeType: mt, FileURI: u}}
}

// toolResponse is a functionResponse.response, which must be an object: a
// tool result that is a JSON object goes as it is, anything else as
// {"output": text} (the key Google's reference names for a function's output).
func toolResponse(text string) json.RawMessage {
	t := bytes.TrimSpace([]byte(text))
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(struct {
		Output string `json:"output"`
	}{text})
	return b
}

// geminiToolConfig maps "auto" | "required" | "none" |
// {"type":"function","function":{"name"}} to functionCallingConfig.
func geminiToolConfig(raw json.RawMessage) (*gmToolConfig, error) {
	tc, err := anthropicToolChoice(raw)
	if err != nil || tc == nil {
		return nil, err
	}
	switch tc.Type {
	case "none":
		return &gmToolConfig{gmFunctionCallingConfig{Mode: "NONE"}}, nil
	case "any":
		return &gmToolConfig{gmFunctionCallingConfig{Mode: "ANY"}}, nil
	case "tool":
		return &gmToolConfig{gmFunctionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{tc.Name}}}, nil
	}
	return &gmToolConfig{gmFunctionCallingConfig{Mode: "AUTO"}}, nil
}

// gmAnswer is a finished Gemini answer, read once for every client format.
type gmAnswer struct {
	id, model string
	choices   []gmChoice // one per candidate, in index order
	u         Usage
}

type gmChoice struct {
	index  int
	text   string
	calls  []oaToolCall
	finish string // OpenAI vocabulary
}

// readGeminiAnswer parses a generateContent response. A prompt blocked
// before any candidate, or a candidate stopped for safety with nothing
// produced, is a content_policy failure (SPEC 10); an answer with no
// candidate at all is the upstream's fault.
func readGeminiAnswer(raw []byte, model string) (*gmAnswer, error) {
	if s, _, ok := wire.FindTopLevel(raw, "error"); ok && raw[s] == '{' {
		return nil, googleEventError(raw)
	}
	var in gmResponse
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, upstreamGarbage(err)
	}
	a := &gmAnswer{id: in.ResponseID, model: in.ModelVersion, u: in.UsageMetadata.usage()}
	if a.model == "" {
		a.model = model
	}
	if len(in.Candidates) == 0 {
		if pf := in.PromptFeedback; pf != nil && pf.BlockReason != "" {
			return nil, blockedError(pf.BlockReason)
		}
		return nil, &Error{Class: routing.ClassServerError, Message: "the Gemini answer has no candidate"}
	}
	produced := false // a candidate holds text or a call
	filtered := ""    // a candidate's safety finishReason
	for _, c := range in.Candidates {
		ch := gmChoice{index: c.Index}
		var text strings.Builder
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				switch {
				case p.Thought:
					// thought summaries are not part of the answer
				case p.FunctionCall != nil:
					ch.calls = append(ch.calls, oaToolCall{ID: callID(p.FunctionCall.ID), Type: "function",
						Function: oaFunctionCall{Name: p.FunctionCall.Name, Arguments: geminiArgs(p.FunctionCall.Args)}})
				default:
					text.WriteString(p.Text)
				}
			}
		}
		ch.text = text.String()
		ch.finish = finishFromGemini(c.FinishReason, len(ch.calls) > 0)
		if ch.finish == "" {
			ch.finish = "stop"
		}
		if ch.text != "" || len(ch.calls) > 0 {
			produced = true
		} else if ch.finish == "content_filter" && filtered == "" {
			filtered = c.FinishReason
		}
		a.choices = append(a.choices, ch)
	}
	if !produced && filtered != "" {
		// no candidate produced anything and one was stopped for safety:
		// nothing to answer with, whatever candidateCount asked for
		return nil, blockedError(filtered)
	}
	return a, nil
}

// geminiArgs is a functionCall's args as OpenAI tool call arguments: the
// object as compact JSON text ("{}" when absent or not an object).
func geminiArgs(raw json.RawMessage) string {
	obj := jsonObjectOr(raw)
	var b bytes.Buffer
	if json.Compact(&b, obj) != nil {
		return string(obj)
	}
	return b.String()
}

// callID is the tool call id of a functionCall: its own when Gemini sent
// one, else a generated one.
func callID(id string) string {
	if id != "" {
		return id
	}
	return newCallID()
}

// first is the answer's candidate 0 (the only one Messages and Responses
// clients see).
func (a *gmAnswer) first() gmChoice {
	for _, c := range a.choices {
		if c.index == 0 {
			return c
		}
	}
	return a.choices[0]
}

// chatID presents a Gemini responseId as a completion id.
func chatID(id string) string {
	if id == "" {
		return "chatcmpl-switchyard"
	}
	return "chatcmpl-" + id
}

// geminiToOpenAIResponse translates a generateContent response into a chat
// completion, one choice per candidate.
func geminiToOpenAIResponse(raw []byte, model string, created int64) ([]byte, Usage, error) {
	a, err := readGeminiAnswer(raw, model)
	if err != nil {
		return nil, Usage{}, err
	}
	type choice struct {
		Index        int      `json:"index"`
		Message      oaOutMsg `json:"message"`
		FinishReason string   `json:"finish_reason"`
	}
	out := struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *oaUsage `json:"usage"`
	}{ID: chatID(a.id), Object: "chat.completion", Created: created, Model: a.model, Usage: oaUsageOf(a.u)}
	for _, c := range a.choices {
		msg := oaOutMsg{Role: "assistant", ToolCalls: c.calls}
		if c.text != "" || len(c.calls) == 0 {
			t := c.text
			msg.Content = &t
		}
		out.Choices = append(out.Choices, choice{Index: c.index, Message: msg, FinishReason: c.finish})
	}
	body, err := json.Marshal(out)
	return body, a.u, err
}

// geminiChunker turns streamGenerateContent events into OpenAI chunk
// payloads (unframed JSON), candidate 0 only: a role chunk first, then one
// chunk per text part and per functionCall part (a whole call: Gemini
// sends a call's arguments in one piece), and at the end the finish chunk,
// the usage chunk and [DONE]. Gemini has no end marker: the stream ends
// with the body, after an event with a finishReason.
type geminiChunker struct {
	model     string
	created   int64
	withUsage bool // end with the usage chunk

	id       string
	started  bool
	produced bool   // text or a call was relayed
	calls    int    // tool calls relayed
	reason   string // Gemini finishReason, once seen
	u        Usage
	out      [][]byte
}

func (c *geminiChunker) feed(data []byte) ([][]byte, error) {
	c.out = nil
	if s, _, ok := wire.FindTopLevel(data, "error"); ok && data[s] == '{' {
		return nil, googleEventError(data)
	}
	var ev gmResponse
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, upstreamGarbage(err)
	}
	if ev.UsageMetadata != nil {
		c.u = ev.UsageMetadata.usage()
	}
	if !c.started {
		if ev.ModelVersion != "" {
			c.model = ev.ModelVersion
		}
		c.id = chatID(ev.ResponseID)
	}
	if len(ev.Candidates) == 0 {
		if pf := ev.PromptFeedback; pf != nil && pf.BlockReason != "" {
			return nil, blockedError(pf.BlockReason)
		}
		return nil, nil
	}
	for _, cand := range ev.Candidates {
		if cand.Index != 0 {
			continue
		}
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				switch {
				case p.Thought:
				case p.FunctionCall != nil:
					idx := c.calls
					c.calls++
					c.produced = true
					c.chunk(oaDeltaIn{ToolCalls: []oaToolCall{{Index: &idx, ID: callID(p.FunctionCall.ID), Type: "function",
						Function: oaFunctionCall{Name: p.FunctionCall.Name, Arguments: geminiArgs(p.FunctionCall.Args)}}}}, nil)
				case p.Text != "":
					c.produced = true
					t := p.Text
					c.chunk(oaDeltaIn{Content: &t}, nil)
				}
			}
		}
		if cand.FinishReason != "" {
			c.reason = cand.FinishReason
			if finishFromGemini(c.reason, false) == "content_filter" && !c.produced {
				return nil, blockedError(c.reason)
			}
		}
	}
	return c.out, nil
}

// end returns the closing payloads, or the error of a stream cut before
// its finishReason.
func (c *geminiChunker) end() ([][]byte, error) {
	c.out = nil
	if c.reason == "" {
		return nil, streamCut()
	}
	finish := finishFromGemini(c.reason, c.calls > 0)
	c.chunk(oaDeltaIn{}, &finish)
	if !c.withUsage {
		c.out = append(c.out, doneData)
		return c.out, nil
	}
	data, _ := json.Marshal(struct {
		ID      string          `json:"id"`
		Object  string          `json:"object"`
		Created int64           `json:"created"`
		Model   string          `json:"model"`
		Choices []oaChunkChoice `json:"choices"`
		Usage   *oaUsage        `json:"usage"`
	}{c.id, "chat.completion.chunk", c.created, c.model, []oaChunkChoice{}, oaUsageOf(c.u)})
	c.out = append(c.out, data, doneData)
	return c.out, nil
}

// chunk appends one chunk payload, after the role chunk the first time.
func (c *geminiChunker) chunk(d oaDeltaIn, finish *string) {
	if !c.started {
		c.started = true
		empty := ""
		c.chunk(oaDeltaIn{Role: "assistant", Content: &empty}, nil)
	}
	data, _ := json.Marshal(oaChunk{
		ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model,
		Choices: []oaChunkChoice{{Index: 0, Delta: d, FinishReason: finish}},
	})
	c.out = append(c.out, data)
}

// geminiStream is the converter of a Gemini stream: the chunker's payloads
// framed for an OpenAI-format client (the usage chunk only when asked), or
// handed on to next, the chat-chunk converter of the client's format
// (Anthropic events, Responses events).
type geminiStream struct {
	c    geminiChunker
	next converter // nil: an OpenAI-format client
}

// newGeminiStream builds the converter; wantUsage (OpenAI clients) asks
// for the usage chunk, which a next converter always gets.
func newGeminiStream(model string, created int64, wantUsage bool, next converter) *geminiStream {
	return &geminiStream{c: geminiChunker{model: model, created: created, id: chatID(""), withUsage: wantUsage || next != nil}, next: next}
}

func (s *geminiStream) event(_ string, data []byte) ([]byte, bool, error) {
	payloads, err := s.c.feed(data)
	if err != nil {
		return nil, false, err
	}
	return s.relay(payloads)
}

func (s *geminiStream) relay(payloads [][]byte) ([]byte, bool, error) {
	var out []byte
	done := false
	for _, p := range payloads {
		if s.next == nil {
			done = done || isDone(p)
			out = appendData(out, p)
			continue
		}
		if r, ok := s.next.(*chatToResponsesStream); ok && isDone(p) {
			// the chat usage chunk has no cached-token details: the
			// Responses object gets the whole usage (SPEC 10.2)
			r.u = s.c.u
		}
		b, d, err := s.next.event("", p)
		if err != nil {
			return nil, false, err
		}
		out = append(out, b...)
		done = done || d
	}
	return out, done, nil
}

// eof: the Gemini stream's clean end.
func (s *geminiStream) eof() ([]byte, error) {
	payloads, err := s.c.end()
	if err != nil {
		return nil, err
	}
	out, _, err := s.relay(payloads)
	return out, err
}

func (s *geminiStream) usage() Usage { return s.c.u }

var _ converter = (*geminiStream)(nil)
