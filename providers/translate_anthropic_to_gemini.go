package providers

// Translation for an Anthropic-format client (POST /v1/messages) served by
// a Gemini deployment: the Messages request goes through the chat mapping
// (so the Anthropic and chat translations agree on messages, tool results
// and images) into a generateContent request, with thinking.budget_tokens
// as thinkingConfig; the Gemini answer becomes a Messages response, and the
// Gemini stream becomes Messages events through the chat chunks, event by
// event (SPEC 10).

import (
	"encoding/json"
)

// anthropicToGeminiRequest translates a Messages body into a
// generateContent body for model.
func anthropicToGeminiRequest(raw []byte, model string) ([]byte, error) {
	// the chat mapping without OpenAI's limits: Gemini takes up to 5 stop
	// sequences, not 4
	c, err := anthropicToChat(raw, "", false)
	if err != nil {
		return nil, err
	}
	chat, err := marshalOpenAI(&c.oaRequest)
	if err != nil {
		return nil, err
	}
	in := gmChatIn{model: model}
	if err := json.Unmarshal(chat, &in); err != nil {
		return nil, badRequest("anthropic request: %v", err)
	}
	var th struct {
		Thinking *struct {
			Type         string `json:"type"`
			BudgetTokens int    `json:"budget_tokens"`
		} `json:"thinking"`
	}
	if json.Unmarshal(raw, &th) == nil && th.Thinking != nil {
		// enabled: its budget; disabled: none; adaptive (the model decides):
		// Gemini's dynamic thinking, -1
		// (https://ai.google.dev/gemini-api/docs/thinking#set-budget); a type
		// this gateway does not know leaves the model's default
		b, known := 0, true
		switch th.Thinking.Type {
		case "enabled":
			b = th.Thinking.BudgetTokens
		case "adaptive":
			b = -1
		case "disabled":
		default:
			known = false
		}
		if known {
			in.thinkingBudget = &b
		}
	}
	out, err := chatToGemini(&in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// geminiToAnthropicResponse translates a generateContent response into a
// Messages response (candidate 0). Usage keeps the Messages convention
// (SPEC 10.2): input_tokens excludes the cached tokens, reported as
// cache_read_input_tokens.
func geminiToAnthropicResponse(raw []byte, model string) ([]byte, Usage, error) {
	a, err := readGeminiAnswer(raw, model)
	if err != nil {
		return nil, Usage{}, err
	}
	c := a.first()
	out := anResponse{ID: anthropicID(chatID(a.id)), Type: "message", Role: "assistant", Model: a.model, Content: []anBlock{}}
	if c.text != "" {
		out.Content = append(out.Content, anBlock{Type: "text", Text: c.text})
	}
	for _, tc := range c.calls {
		out.Content = append(out.Content, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: jsonObjectOr([]byte(tc.Function.Arguments))})
	}
	stop := stopFromFinish(c.finish)
	out.StopReason = &stop
	out.Usage = anUsageOf(a.u)
	body, err := json.Marshal(out)
	return body, a.u, err
}

// newGeminiToAnthropicStream converts a Gemini stream for a Messages client.
func newGeminiToAnthropicStream(model string, created int64, promptTokens int) *geminiStream {
	// the Messages convention (input_tokens without the cached tokens,
	// cache_read_input_tokens) is the chat-to-Messages converter's
	return newGeminiStream(model, created, true, newOpenAIToAnthropicStream(model, promptTokens))
}
