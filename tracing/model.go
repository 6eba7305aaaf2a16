package tracing

import (
	"bytes"
	"encoding/json"

	"switchyard/wire"
)

// maxModelName bounds gen_ai.response.model: a hostile upstream does not
// get to put a megabyte into every span.
const maxModelName = 256

// ResponseModel reads the model an upstream says answered, for
// gen_ai.response.model, from a sync response body or from the first
// event(s) of a stream, in the OpenAI or Anthropic format: the top-level
// "model" (chat completions, embeddings, Anthropic messages, an OpenAI
// chunk), or the "model" of a top-level "message" (Anthropic message_start)
// or "response" (Responses API events). It returns "" when there is none
// or it is not a short string. The input is the upstream's and is
// distrusted: ResponseModel never panics and reads only the first event.
func ResponseModel(b []byte) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) > 0 && b[0] != '{' {
		b = firstData(b)
	}
	if m := modelOf(b); m != "" {
		return m
	}
	for _, outer := range [...]string{"message", "response"} {
		if s, e, ok := wire.FindTopLevel(b, outer); ok && b[s] == '{' {
			if m := modelOf(b[s:e]); m != "" {
				return m
			}
		}
	}
	return ""
}

// firstData returns the payload of the first SSE "data:" line in b.
func firstData(b []byte) []byte {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return bytes.TrimSpace(rest)
		}
	}
	return nil
}

// modelOf is the top-level "model" string of the JSON object b, or "".
func modelOf(b []byte) string {
	s, e, ok := wire.FindTopLevel(b, "model")
	if !ok || b[s] != '"' || e-s > maxModelName+2 {
		return ""
	}
	var m string
	if json.Unmarshal(b[s:e], &m) != nil {
		return ""
	}
	return m
}
