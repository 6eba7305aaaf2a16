package providers

// Translation for a Responses API client (POST /v1/responses) served by a
// Gemini deployment: the Responses request goes through the chat mapping
// (instructions, items, tools, text.format as response_format,
// reasoning.effort) into a generateContent request, and the Gemini answer
// or stream becomes a Responses object or event stream, event by event
// (SPEC 10.1).

import (
	"encoding/json"

	"switchyard/wire"
)

// responsesToGeminiBody is the generateContent body for a Responses request.
func responsesToGeminiBody(rq *wire.Responses, model string) ([]byte, error) {
	chat, err := responsesToChat(rq, "", false)
	if err != nil {
		return nil, err
	}
	in := gmChatIn{oaRequest: chat.oaRequest, ResponseFormat: chat.ResponseFormat, ReasoningEffort: chat.ReasoningEffort, model: model}
	out, err := chatToGemini(&in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// geminiToResponses translates a generateContent response into a response
// object (candidate 0).
func geminiToResponses(raw []byte, rq *wire.Responses, model string, created int64, done ResponsesDone) ([]byte, Usage, error) {
	a, err := readGeminiAnswer(raw, model)
	if err != nil {
		return nil, Usage{}, err
	}
	c := a.first()
	calls := make([]respCallIn, 0, len(c.calls))
	for _, tc := range c.calls {
		calls = append(calls, respCallIn{id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments})
	}
	refusal := ""
	if c.finish == "content_filter" && c.text == "" && len(calls) == 0 {
		refusal = "the model declined to answer"
	}
	return buildResponse(rq, respID(rq), created, a.model, c.text, refusal, calls, c.finish, a.u, done), a.u, nil
}

// newGeminiToResponsesStream converts a Gemini stream for a Responses client.
func newGeminiToResponsesStream(rq *wire.Responses, model string, created int64, done ResponsesDone) *geminiStream {
	return newGeminiStream(model, created, true, newChatToResponsesStream(rq, model, created, done))
}
