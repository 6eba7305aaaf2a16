package providers

// The Gemini and Vertex AI paths of `switchyard mockllm` (SPEC 10, 13): the
// same simulation as the OpenAI and Anthropic paths, in Google's wire
// format, plus a fake OAuth2 token endpoint so a vertex provider can point
// its key's token_uri at the mock.
//
//	POST .../models/{model}:generateContent          Gemini JSON
//	POST .../models/{model}:streamGenerateContent    Gemini SSE (alt=sse)
//	POST .../models/{model}:batchEmbedContents       Gemini embeddings
//	POST .../publishers/anthropic/models/{model}:rawPredict        Claude on Vertex
//	POST .../publishers/anthropic/models/{model}:streamRawPredict  (SSE)
//	POST /token                                      {"access_token",...}
//
// Signatures and tokens are not checked.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"switchyard/catalog"
	"switchyard/routing"
	"switchyard/wire"
)

// serveGoogle serves the Google paths; false when r is not one of them.
func (m *MockServer) serveGoogle(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if p == "/token" {
		if r.Method != http.MethodPost {
			writeGoogleError(w, http.StatusMethodNotAllowed, "use POST")
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"ya29.mock-%d","token_type":"Bearer","expires_in":3600}`, m.tokens.Add(1))
		return true
	}
	i := strings.LastIndex(p, "/models/")
	if i < 0 {
		return false
	}
	model, method, ok := strings.Cut(p[i+len("/models/"):], ":")
	if !ok || model == "" {
		return false
	}
	switch method {
	case "generateContent", "streamGenerateContent", "batchEmbedContents", "rawPredict", "streamRawPredict":
	default:
		return false
	}
	if r.Method != http.MethodPost {
		writeGoogleError(w, http.StatusMethodNotAllowed, "use POST")
		return true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mockMaxBody))
	if err != nil {
		writeGoogleError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return true
	}
	switch method {
	case "rawPredict", "streamRawPredict":
		m.serveVertexClaude(w, r, model, method == "streamRawPredict", body)
	case "batchEmbedContents":
		m.serveGeminiEmbed(w, r, model, body)
	default:
		m.serveGemini(w, r, model, method == "streamGenerateContent", body)
	}
	return true
}

// serveGemini answers generateContent and streamGenerateContent: the
// request's text becomes the simulated prompt, the simulated answer a
// Gemini response (or one SSE event per simulated chunk).
func (m *MockServer) serveGemini(w http.ResponseWriter, r *http.Request, model string, stream bool, body []byte) {
	var in gmRequest
	if err := json.Unmarshal(body, &in); err != nil || len(in.Contents) == 0 {
		writeGoogleError(w, http.StatusBadRequest, "Invalid JSON payload received, or no contents.")
		return
	}
	var text strings.Builder
	if in.SystemInstruction != nil {
		for _, p := range in.SystemInstruction.Parts {
			text.WriteString(p.Text + "\n")
		}
	}
	for _, c := range in.Contents {
		for _, p := range c.Parts {
			text.WriteString(p.Text + "\n")
			if p.FunctionResponse != nil {
				text.Write(p.FunctionResponse.Response)
			}
		}
	}
	chat := map[string]any{"model": model, "stream": stream, "messages": []map[string]string{{"role": "user", "content": text.String()}}}
	if g := in.GenerationConfig; g != nil && g.MaxOutputTokens != nil {
		chat["max_tokens"] = *g.MaxOutputTokens
	}
	raw, _ := json.Marshal(chat)
	creq, err := wire.Parse(raw, catalog.OpChat, wire.FormatOpenAI)
	if err != nil {
		writeGoogleError(w, http.StatusBadRequest, err.Error())
		return
	}
	d := &catalog.Deployment{}
	d.UpstreamModel = model
	resp, err := m.sim.Do(r.Context(), d, &Request{Op: catalog.OpChat, Stream: stream, Client: creq, WantUsage: true, PromptTokens: creq.PromptTokens()})
	if err != nil {
		writeGoogleSimError(w, AsError(err), creq.PromptTokens(), stream)
		return
	}
	if !stream {
		var oa oaResponse
		if json.Unmarshal(resp.Body, &oa) != nil || len(oa.Choices) == 0 || oa.Choices[0].Message == nil {
			writeGoogleError(w, http.StatusInternalServerError, "simulation produced no answer")
			return
		}
		t := ""
		if c := oa.Choices[0].Message.Content; c != nil {
			t = *c
		}
		finish := "STOP"
		if f := oa.Choices[0].FinishReason; f != nil && *f == "length" {
			finish = "MAX_TOKENS"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(geminiMockEvent(model, t, finish, &resp.Usage))
		return
	}
	defer resp.Stream.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	finish := "STOP"
	for {
		ev, err := resp.Stream.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				u := resp.Stream.Usage()
				w.Write(appendData(nil, geminiMockEvent(model, "", finish, &u)))
				rc.Flush()
			}
			return
		}
		rd := newSSEReader(bytes.NewReader(ev))
		for {
			_, data, err := rd.next()
			if err != nil {
				break
			}
			var ch oaResponse
			if isDone(data) || json.Unmarshal(data, &ch) != nil || len(ch.Choices) == 0 || ch.Choices[0].Delta == nil {
				continue
			}
			if f := ch.Choices[0].FinishReason; f != nil && *f == "length" {
				finish = "MAX_TOKENS"
			}
			if c := ch.Choices[0].Delta.Content; c != nil && *c != "" {
				w.Write(appendData(nil, geminiMockEvent(model, *c, "", nil)))
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// geminiMockEvent is a GenerateContentResponse with one text part (none
// when text is empty), its finishReason and usage when given.
func geminiMockEvent(model, text, finish string, u *Usage) []byte {
	c := gmCandidate{Content: &gmContent{Role: "model", Parts: []gmPart{}}, FinishReason: finish}
	if text != "" {
		c.Content.Parts = append(c.Content.Parts, gmPart{Text: text})
	}
	out := gmResponse{Candidates: []gmCandidate{c}, ModelVersion: model, ResponseID: "mock-response"}
	if u != nil {
		out.UsageMetadata = &gmUsage{PromptTokenCount: tokenCount(u.PromptTokens), CandidatesTokenCount: tokenCount(u.CompletionTokens), TotalTokenCount: tokenCount(u.PromptTokens + u.CompletionTokens)}
	}
	b, _ := json.Marshal(out)
	return b
}

// serveGeminiEmbed answers batchEmbedContents.
func (m *MockServer) serveGeminiEmbed(w http.ResponseWriter, r *http.Request, model string, body []byte) {
	var in struct {
		Requests []struct {
			Content gmContent `json:"content"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(body, &in); err != nil || len(in.Requests) == 0 {
		writeGoogleError(w, http.StatusBadRequest, "Invalid JSON payload received, or no requests.")
		return
	}
	inputs := make([]string, 0, len(in.Requests))
	for _, q := range in.Requests {
		var t strings.Builder
		for _, p := range q.Content.Parts {
			t.WriteString(p.Text)
		}
		inputs = append(inputs, t.String())
	}
	raw, _ := json.Marshal(map[string]any{"model": model, "input": inputs})
	creq, err := wire.Parse(raw, catalog.OpEmbeddings, wire.FormatOpenAI)
	if err != nil {
		writeGoogleError(w, http.StatusBadRequest, err.Error())
		return
	}
	d := &catalog.Deployment{}
	d.UpstreamModel = model
	resp, err := m.sim.Do(r.Context(), d, &Request{Op: catalog.OpEmbeddings, Client: creq, PromptTokens: creq.PromptTokens()})
	if err != nil {
		writeGoogleSimError(w, AsError(err), creq.PromptTokens(), false)
		return
	}
	var oa struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	_ = json.Unmarshal(resp.Body, &oa)
	type values struct {
		Values []float64 `json:"values"`
	}
	out := struct {
		Embeddings []values `json:"embeddings"`
	}{}
	for _, e := range oa.Data {
		out.Embeddings = append(out.Embeddings, values{e.Embedding})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// serveVertexClaude answers rawPredict and streamRawPredict: a Messages
// body without model, with anthropic_version, answered as Messages.
func (m *MockServer) serveVertexClaude(w http.ResponseWriter, r *http.Request, model string, stream bool, body []byte) {
	if _, _, ok := wire.FindTopLevel(body, "anthropic_version"); !ok {
		writeMockError(w, wire.FormatAnthropic, &Error{Status: http.StatusBadRequest, Message: "anthropic_version: Field required"})
		return
	}
	body = wire.SetTopLevel(body, "model", wire.AppendString(nil, model))
	body = wire.DeleteTopLevel(body, "anthropic_version")
	creq, err := wire.Parse(body, catalog.OpChat, wire.FormatAnthropic)
	if err != nil {
		writeMockError(w, wire.FormatAnthropic, &Error{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	d := &catalog.Deployment{}
	d.UpstreamModel = model
	resp, err := m.sim.Do(r.Context(), d, &Request{Op: catalog.OpChat, Stream: stream && creq.Stream, Client: creq, PromptTokens: creq.PromptTokens()})
	if err != nil {
		writeMockError(w, wire.FormatAnthropic, AsError(err))
		return
	}
	if resp.Stream == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp.Body)
		return
	}
	defer resp.Stream.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for {
		ev, err := resp.Stream.Next()
		if err != nil {
			return
		}
		if _, err := w.Write(ev); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// googleStatus names an HTTP status the way Google APIs do in error.status.
func googleStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// googleErrorBody is a Google API error:
// {"error":{"code":429,"message":"...","status":"RESOURCE_EXHAUSTED"}}.
func googleErrorBody(status int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": googleStatus(status)}})
	return b
}

func writeGoogleError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(googleErrorBody(status, msg))
}

// writeGoogleSimError writes a simulated failure as Gemini reports it: a
// context-window error as INVALID_ARGUMENT naming the token count, a
// content-policy one as a 200 whose prompt is blocked, others by status.
func writeGoogleSimError(w http.ResponseWriter, e *Error, prompt int, stream bool) {
	switch e.Class {
	case routing.ClassCanceled:
		return
	case routing.ClassContextWindow:
		writeGoogleError(w, http.StatusBadRequest, fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", prompt, max(prompt-1, 0)))
		return
	case routing.ClassContentPolicy:
		b := fmt.Appendf(nil, `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":%d,"totalTokenCount":%d}}`, prompt, prompt)
		w.Header().Set("Content-Type", "application/json")
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			b = appendData(nil, b)
		}
		w.Write(b)
		return
	}
	status := e.Status
	if status == 0 {
		status = http.StatusGatewayTimeout
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	writeGoogleError(w, status, msg+" (simulated)")
}
