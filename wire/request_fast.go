package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"switchyard/internal/jsonspan"
)

// errSlowPath stops fastBody's walk: the body is left to encoding/json.
var errSlowPath = errors.New("wire: not the fast path's shape")

// fastBodyFields are openAIBody's members, as encoding/json matches them:
// a key equal to one of them ignoring case is that field (the fast path
// takes only the exact spelling).
var fastBodyFields = [...]string{"model", "stream", "stream_options", "messages", "tools", "max_tokens",
	"max_completion_tokens", "reasoning_effort", "reasoning", "response_format", "prompt_cache_key",
	"session_id", "safety_identifier", "user", "metadata", "conversation", "thinking", "system",
	"input", "prompt", "size"}

// fastBody decodes body into b as json.Unmarshal does, with the walk the
// rest of the package uses instead of reflection over the whole body, for
// every body whose members that name a field are spelled exactly as the
// field and given once: strings plain (no escapes, valid UTF-8), stream a
// boolean, max_tokens and max_completion_tokens integers; messages, tools,
// input, system and conversation through their own UnmarshalJSON (as
// encoding/json calls it, null included); and the small objects
// (stream_options, reasoning, response_format, metadata, thinking) through
// json.Unmarshal of that member alone. Members that name no field are
// skipped, as encoding/json skips them. ok false (a member in another case
// or with an escape, one named twice, a null or another type where a
// string, boolean or integer belongs, any member that does not decode)
// leaves b partly written and the body to json.Unmarshal (into a fresh
// openAIBody), which also words every error: so for any body fastBody
// accepts, b is what json.Unmarshal gives (TestFastBodyMatchesEncodingJSON,
// FuzzFastBody). On the benchmark's body (BenchmarkParseChat) the parse
// takes 1.3-1.6 µs and 6 allocations this way, 2.9-3.6 µs and 12 through
// encoding/json.
func fastBody(body []byte, b *openAIBody) bool {
	// one pass that validates as it reads (jsonspan.Cursor), EachField's
	// rules: the messages and tools arrays, most of an agent's bytes, are
	// walked where they stand rather than measured first and walked again
	c := jsonspan.NewCursor(body)
	var keys keyList
	return c.Object(func(key []byte) bool {
		f, ok := keys.field(key, fastBodyFields[:])
		switch {
		case !ok:
			return false
		case f < 0:
			_, ok := c.Value()
			return ok
		case fastBodyFields[f] == "messages" && c.Peek() == '[':
			return fastMessages(&c, &b.Messages)
		case fastBodyFields[f] == "tools" && c.Peek() == '[':
			return fastTools(&c, &b.Tools)
		default:
			val, ok := c.Value()
			return ok && fastMember(b, fastBodyFields[f], val)
		}
	}) && c.End()
}

// fastMessages reads a messages array at the cursor as
// messageList.UnmarshalJSON does (each message through decodeMessage),
// counting as it goes rather than first: false for more than m.max
// messages or one decodeMessage refuses (encoding/json's path then words
// the error).
func fastMessages(c *jsonspan.Cursor, m *messageList) bool {
	var items []Message // grown as read: a short chat allocates one message, as when counted first
	span, ok := c.Span(func() bool {
		return c.Array(func() bool {
			if len(items) == m.max {
				return false
			}
			elem, ok := c.Value()
			if !ok {
				return false
			}
			msg, err := decodeMessage(elem)
			items = append(items, msg)
			return err == nil
		})
	})
	if !ok {
		return false
	}
	if items == nil {
		items = make([]Message, 0) // never nil, as UnmarshalJSON makes it (no allocation)
	}
	m.set, m.items, m.span = true, items, span
	return true
}

// fastTools reads a tools array at the cursor as toolList.UnmarshalJSON
// does: its elements counted (each validated, not decoded) and its span.
func fastTools(c *jsonspan.Cursor, t *toolList) bool {
	n := 0
	span, ok := c.Span(func() bool {
		return c.Array(func() bool {
			n++
			_, ok := c.Value()
			return ok
		})
	})
	if !ok {
		return false
	}
	t.n, t.span = elementCount(n), span
	return true
}

// fastMember decodes the member name (a field of openAIBody) into b; false
// when its value is not of the fast path's shape.
func fastMember(b *openAIBody, name string, val []byte) bool {
	var ok bool
	switch name {
	case "stream":
		ok = string(val) == "true" || string(val) == "false"
		b.Stream = string(val) == "true"
	case "max_tokens":
		b.MaxTokens, ok = plainInt(val)
	case "max_completion_tokens":
		b.MaxCompletionTokens, ok = plainInt(val)
	case "messages":
		ok = b.Messages.UnmarshalJSON(val) == nil
	case "tools":
		ok = b.Tools.UnmarshalJSON(val) == nil
	case "input":
		ok = b.Input.UnmarshalJSON(val) == nil
	case "system":
		b.System, ok = val, true // a slice of the body (Measured keeps it)
	case "conversation":
		ok = b.Conversation.UnmarshalJSON(val) == nil
	case "stream_options":
		ok = json.Unmarshal(val, &b.StreamOptions) == nil
	case "reasoning":
		ok = json.Unmarshal(val, &b.Reasoning) == nil
	case "response_format":
		ok = json.Unmarshal(val, &b.ResponseFormat) == nil
	case "metadata":
		ok = json.Unmarshal(val, &b.Metadata) == nil
	case "thinking":
		ok = json.Unmarshal(val, &b.Thinking) == nil
	default: // the string fields
		var dst *string
		switch name {
		case "model":
			dst = &b.Model
		case "reasoning_effort":
			dst = &b.ReasoningEffort
		case "prompt_cache_key":
			dst = &b.PromptCacheKey
		case "session_id":
			dst = &b.SessionID
		case "safety_identifier":
			dst = &b.SafetyIdentifier
		case "user":
			dst = &b.User
		case "prompt":
			dst = &b.Prompt
		case "size":
			dst = &b.Size
		default:
			return false
		}
		*dst, ok = plainString(val)
	}
	return ok
}

// plainString is a JSON string without escapes and in valid UTF-8 (what
// encoding/json gives unchanged); ok false for anything else.
func plainString(val []byte) (string, bool) {
	if len(val) < 2 || val[0] != '"' {
		return "", false
	}
	s := val[1 : len(val)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

// plainInt is a JSON integer that fits an int, as a new *int (what
// encoding/json sets a *int field to); ok false for a fraction, an
// exponent, null or anything else.
func plainInt(val []byte) (*int, bool) {
	if len(val) == 0 || len(val) > 19 {
		return nil, false
	}
	for i, c := range val {
		if (c < '0' || c > '9') && !(i == 0 && c == '-') {
			return nil, false
		}
	}
	n, err := strconv.Atoi(string(val))
	if err != nil {
		return nil, false
	}
	return &n, true
}
