package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"switchyard/internal/jsonspan"
)

// errSlowPath stops fastBody's walk: the body is left to encoding/json.
var errSlowPath = errors.New("wire: not the fast path's shape")

// fastBodyFields are openAIBody's members, as encoding/json matches them:
// a key equal to one of them ignoring case is that field (the fast path
// takes only the exact spelling of the ones it decodes).
var fastBodyFields = []string{"model", "stream", "stream_options", "messages", "tools", "max_tokens",
	"max_completion_tokens", "reasoning_effort", "reasoning", "response_format", "prompt_cache_key",
	"session_id", "safety_identifier", "user", "metadata", "conversation", "thinking", "system",
	"input", "prompt", "size"}

// fastBody decodes body into b as json.Unmarshal does, without reflection,
// for the shape nearly every chat request has: a JSON object whose members
// that name a field are spelled exactly as the field and given once, with
// model and the other strings plain (no escapes, valid UTF-8), stream a
// boolean, max_tokens and max_completion_tokens integers and messages
// whatever messageList decodes. Members that name no field are skipped, as
// encoding/json skips them. ok false leaves b partly written and the body
// to json.Unmarshal (into a fresh openAIBody), which decodes every other
// shape and words every error: so for any body fastBody accepts, b is what
// json.Unmarshal gives (TestFastBodyMatchesEncodingJSON, FuzzFastBody).
// On the benchmark's body (BenchmarkParseChat) the parse takes 1.3-1.6 µs
// and 6 allocations this way, 2.9-3.6 µs and 12 through encoding/json.
func fastBody(body []byte, b *openAIBody) bool {
	if !json.Valid(body) { // the walk reads valid JSON only, as json.Unmarshal checks first
		return false
	}
	var seen uint32 // the fields given so far, a bit each
	once := func(bit uint32) bool {
		if seen&bit != 0 {
			return false // named twice: the last wins in encoding/json, left to it
		}
		seen |= bit
		return true
	}
	err := jsonspan.EachMember(body, func(key, val []byte) error {
		ok := true
		switch k := string(key); k {
		case "stream":
			ok = once(1<<0) && (string(val) == "true" || string(val) == "false")
			b.Stream = string(val) == "true"
		case "messages":
			ok = once(1<<1) && !isNull(val) && b.Messages.UnmarshalJSON(val) == nil
		case "max_tokens", "max_completion_tokens":
			dst, bit := &b.MaxTokens, uint32(1<<2)
			if k == "max_completion_tokens" {
				dst, bit = &b.MaxCompletionTokens, 1<<3
			}
			*dst, ok = plainInt(val, once(bit))
		default:
			f := fastStringField(k)
			if f < 0 {
				// another field (an object, a raw value...), or a spelling
				// encoding/json would match to a field: its decoding, not ours
				ok = !namesField(key)
				break
			}
			*fastStrings[f].field(b), ok = plainString(val, once(1<<(4+f)))
		}
		if !ok {
			return errSlowPath
		}
		return nil
	})
	return err == nil
}

// fastStrings are the string fields fastBody decodes.
var fastStrings = [...]struct {
	name  string
	field func(*openAIBody) *string
}{
	{"model", func(b *openAIBody) *string { return &b.Model }},
	{"reasoning_effort", func(b *openAIBody) *string { return &b.ReasoningEffort }},
	{"prompt_cache_key", func(b *openAIBody) *string { return &b.PromptCacheKey }},
	{"session_id", func(b *openAIBody) *string { return &b.SessionID }},
	{"safety_identifier", func(b *openAIBody) *string { return &b.SafetyIdentifier }},
	{"user", func(b *openAIBody) *string { return &b.User }},
}

// fastStringField is the index of the string field named k in fastStrings,
// -1 when k names none.
func fastStringField(k string) int {
	for i := range fastStrings {
		if fastStrings[i].name == k {
			return i
		}
	}
	return -1
}

// namesField reports whether encoding/json could match key to a field of
// openAIBody: any key with an escape (it may decode to a field's name), or
// one equal to a field's name ignoring case.
func namesField(key []byte) bool {
	if bytes.IndexByte(key, '\\') >= 0 {
		return true
	}
	for _, f := range fastBodyFields {
		if len(f) == len(key) && strings.EqualFold(f, string(key)) {
			return true
		}
	}
	return false
}

// plainString is a JSON string without escapes and in valid UTF-8 (what
// encoding/json gives unchanged); ok false for anything else, or when ok
// is false already.
func plainString(val []byte, ok bool) (string, bool) {
	if !ok || len(val) < 2 || val[0] != '"' {
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
// exponent, null or anything else, or when ok is false already.
func plainInt(val []byte, ok bool) (*int, bool) {
	if !ok || len(val) == 0 || len(val) > 19 {
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
