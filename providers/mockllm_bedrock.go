package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"switchyard/catalog"
	"switchyard/routing"
	"switchyard/wire"
)

// The Bedrock side of `switchyard mockllm` (SPEC 10, 13):
//
//	POST /model/{modelId}/converse          Converse, JSON
//	POST /model/{modelId}/converse-stream   ConverseStream, event-stream frames
//
// Signatures are not checked. The Converse request is handed to the same
// simulation as the other formats (as a Messages request), and its answer
// or events are written back in Converse's shapes; stream frames are
// encoded with the AWS SDK's event-stream encoder. Simulated failures come
// as Bedrock errors (x-amzn-errortype and {"message"}), a content-policy
// hit as a guardrail intervention with no content.

// serveBedrock answers a /model/... request.
func (m *MockServer) serveBedrock(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/model/")
	i := strings.LastIndexByte(rest, '/')
	var model, op string
	if i > 0 {
		model, op = rest[:i], rest[i+1:]
	}
	model, err := url.PathUnescape(model)
	if err != nil || model == "" || (op != "converse" && op != "converse-stream") {
		writeBedrockError(w, http.StatusNotFound, "UnknownOperationException", "Unknown operation "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		writeBedrockError(w, http.StatusMethodNotAllowed, "ValidationException", "use POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mockMaxBody))
	if err != nil {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", "reading the body: "+err.Error())
		return
	}
	var cv cvRequest
	if err := json.Unmarshal(body, &cv); err != nil {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", "malformed request body: "+err.Error())
		return
	}
	stream := op == "converse-stream"
	an := converseToMessagesBody(&cv, model, stream)
	creq, err := wire.Parse(an, catalog.OpChat, wire.FormatAnthropic)
	if err != nil {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	d := &catalog.Deployment{}
	d.UpstreamModel = model
	resp, err := m.sim.Do(r.Context(), d, &Request{Op: catalog.OpChat, Stream: stream, Client: creq, PromptTokens: creq.PromptTokens()})
	reqID := "sim-" + strconv.FormatUint(m.sim.seq.Load(), 10)
	w.Header().Set("X-Amzn-Requestid", reqID)
	if err != nil {
		e := AsError(err)
		if e.Class == routing.ClassCanceled {
			return
		}
		if e.Class == routing.ClassContentPolicy {
			writeGuardrail(w, stream)
			return
		}
		status, typ := bedrockErrorFor(e)
		writeBedrockError(w, status, typ, e.Message)
		return
	}
	if resp.Stream == nil {
		out, err := messagesToConverse(resp.Body)
		if err != nil {
			writeBedrockError(w, http.StatusInternalServerError, "InternalServerException", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
		return
	}
	defer resp.Stream.Close()
	w.Header().Set("Content-Type", eventStreamType)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	fw := &frameWriter{w: w, enc: eventstream.NewEncoder()}
	conv := &messagesToConverseStream{}
	for {
		chunk, err := resp.Stream.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fw.exception("internalServerException", AsError(err).Message)
			}
			return
		}
		sse := newSSEReader(bytes.NewReader(chunk))
		for {
			name, data, err := sse.next()
			if err != nil {
				break
			}
			for _, ev := range conv.event(name, data) {
				if fw.event(ev.name, ev.data) != nil {
					return
				}
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// bedrockErrorFor names a simulated failure the way Bedrock does.
func bedrockErrorFor(e *Error) (int, string) {
	switch e.Class {
	case routing.ClassRateLimited:
		return http.StatusTooManyRequests, "ThrottlingException"
	case routing.ClassContextWindow:
		return http.StatusBadRequest, "ValidationException"
	case routing.ClassAuth:
		return http.StatusForbidden, "AccessDeniedException"
	case routing.ClassBadRequest:
		return http.StatusBadRequest, "ValidationException"
	case routing.ClassNotFound:
		return http.StatusNotFound, "ResourceNotFoundException"
	case routing.ClassTimeout:
		return http.StatusRequestTimeout, "ModelTimeoutException"
	}
	if e.Status == http.StatusServiceUnavailable {
		return e.Status, "ServiceUnavailableException"
	}
	return http.StatusInternalServerError, "InternalServerException"
}

// writeBedrockError writes an AWS JSON error.
func writeBedrockError(w http.ResponseWriter, status int, typ, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"message": msg})
	w.Write(b)
}

// writeGuardrail answers as a guardrail that intervened before any content.
func writeGuardrail(w http.ResponseWriter, stream bool) {
	usage := cvUsage{InputTokens: 1}
	if !stream {
		var out cvResponse
		out.Output.Message = &cvMessage{Role: "assistant", Content: []cvBlock{}}
		out.StopReason, out.Usage = "guardrail_intervened", &usage
		b, _ := json.Marshal(out)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", eventStreamType)
	fw := &frameWriter{w: w, enc: eventstream.NewEncoder()}
	fw.event("messageStart", []byte(`{"role":"assistant"}`))
	fw.event("messageStop", []byte(`{"stopReason":"guardrail_intervened"}`))
	b, _ := json.Marshal(map[string]any{"usage": usage, "metrics": map[string]int{"latencyMs": 0}})
	fw.event("metadata", b)
}

// frameWriter encodes ConverseStream frames.
type frameWriter struct {
	w   io.Writer
	enc *eventstream.Encoder
}

func (f *frameWriter) event(eventType string, payload []byte) error {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("event"))
	h.Set(":event-type", eventstream.StringValue(eventType))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return f.enc.Encode(f.w, eventstream.Message{Headers: h, Payload: payload})
}

func (f *frameWriter) exception(exceptionType, msg string) error {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("exception"))
	h.Set(":exception-type", eventstream.StringValue(exceptionType))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	b, _ := json.Marshal(map[string]string{"message": msg})
	return f.enc.Encode(f.w, eventstream.Message{Headers: h, Payload: b})
}

// converseToMessagesBody is the Messages body the simulation answers for a
// Converse request: text, tool use and tool results, system, maxTokens.
func converseToMessagesBody(cv *cvRequest, model string, stream bool) []byte {
	out := anRequest{Model: model, MaxTokens: 1024, Stream: stream}
	if ic := cv.InferenceConfig; ic != nil && ic.MaxTokens != nil && *ic.MaxTokens > 0 {
		out.MaxTokens = *ic.MaxTokens
	}
	var sys []string
	for _, s := range cv.System {
		sys = append(sys, s.Text)
	}
	if len(sys) > 0 {
		out.System = rawString(strings.Join(sys, "\n"))
	}
	for _, m := range cv.Messages {
		var blocks []anBlock
		for _, b := range m.Content {
			switch {
			case b.Text != nil:
				blocks = append(blocks, anBlock{Type: "text", Text: *b.Text})
			case b.ToolUse != nil:
				blocks = append(blocks, anBlock{Type: "tool_use", ID: b.ToolUse.ToolUseID, Name: b.ToolUse.Name, Input: jsonObjectOr(b.ToolUse.Input)})
			case b.ToolResult != nil:
				var texts []string
				for _, c := range b.ToolResult.Content {
					if c.Text != nil {
						texts = append(texts, *c.Text)
					}
				}
				blocks = append(blocks, anBlock{Type: "tool_result", ToolUseID: b.ToolResult.ToolUseID, Content: rawString(strings.Join(texts, "\n"))})
			}
		}
		if len(blocks) == 0 {
			continue
		}
		content, _ := json.Marshal(blocks)
		out.Messages = append(out.Messages, anMessage{Role: m.Role, Content: content})
	}
	b, _ := json.Marshal(out)
	return b
}

// converseStopReason is the Converse name of a Messages stop_reason.
func converseStopReason(stop string) string {
	switch stop {
	case "max_tokens", "tool_use", "stop_sequence":
		return stop
	case "refusal":
		return "content_filtered"
	}
	return "end_turn"
}

// messagesToConverse writes a Messages response as a Converse response.
func messagesToConverse(raw []byte) ([]byte, error) {
	var in anResponse
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	var out cvResponse
	msg := &cvMessage{Role: "assistant", Content: []cvBlock{}}
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			t := b.Text
			msg.Content = append(msg.Content, cvBlock{Text: &t})
		case "tool_use":
			msg.Content = append(msg.Content, cvBlock{ToolUse: &cvToolUse{ToolUseID: b.ID, Name: b.Name, Input: jsonObjectOr(b.Input)}})
		}
	}
	out.Output.Message = msg
	stop := "end_turn"
	if in.StopReason != nil {
		stop = converseStopReason(*in.StopReason)
	}
	out.StopReason = stop
	u := in.Usage
	out.Usage = &cvUsage{InputTokens: tokenCount(u.InputTokens), OutputTokens: tokenCount(u.OutputTokens), TotalTokens: tokenCount(u.InputTokens + u.OutputTokens),
		CacheReadInputTokens: tokenCount(u.CacheReadInputTokens), CacheWriteInputTokens: tokenCount(u.CacheCreationInputTokens)}
	return json.Marshal(out)
}

// messagesToConverseStream turns Messages events into ConverseStream
// events (the inverse of converseToAnthropicStream, for the mock).
type messagesToConverseStream struct {
	stop string
	u    cvUsage
}

func (c *messagesToConverseStream) event(name string, data []byte) []anEventOut {
	var ev anEventIn
	if json.Unmarshal(data, &ev) != nil {
		return nil
	}
	mk := func(t string, v any) []anEventOut {
		b, _ := json.Marshal(v)
		return []anEventOut{{name: t, data: b}}
	}
	switch name {
	case "message_start":
		if ev.Message != nil {
			c.u.InputTokens = tokenCount(ev.Message.Usage.InputTokens)
		}
		return mk("messageStart", map[string]string{"role": "assistant"})
	case "content_block_start":
		if b := ev.ContentBlock; b != nil && b.Type == "tool_use" {
			return mk("contentBlockStart", map[string]any{"contentBlockIndex": ev.Index,
				"start": map[string]any{"toolUse": map[string]string{"toolUseId": b.ID, "name": b.Name}}})
		}
	case "content_block_delta":
		if d := ev.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				return mk("contentBlockDelta", map[string]any{"contentBlockIndex": ev.Index, "delta": map[string]string{"text": d.Text}})
			case "input_json_delta":
				return mk("contentBlockDelta", map[string]any{"contentBlockIndex": ev.Index,
					"delta": map[string]any{"toolUse": map[string]string{"input": d.PartialJSON}}})
			}
		}
	case "content_block_stop":
		return mk("contentBlockStop", map[string]any{"contentBlockIndex": ev.Index})
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != nil {
			c.stop = converseStopReason(*ev.Delta.StopReason)
		}
		if ev.Usage != nil {
			c.u.OutputTokens = tokenCount(ev.Usage.OutputTokens)
			if ev.Usage.InputTokens > 0 {
				c.u.InputTokens = tokenCount(ev.Usage.InputTokens)
			}
		}
	case "message_stop":
		if c.stop == "" {
			c.stop = "end_turn"
		}
		c.u.TotalTokens = c.u.InputTokens + c.u.OutputTokens
		out := mk("messageStop", map[string]string{"stopReason": c.stop})
		return append(out, mk("metadata", map[string]any{"usage": c.u, "metrics": map[string]int{"latencyMs": 1}})...)
	}
	return nil
}
