package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"switchyard/internal/jsonspan"
	"unicode/utf16"
	"unicode/utf8"
)

// The bounded decoders of a request's arrays (SPEC 14). encoding/json has
// validated the whole body before it calls an UnmarshalJSON here, so these
// scan their value with the non-allocating jsonspan.SkipValue: an array
// is counted, and refused over its limit, before anything is allocated for
// its elements.

// countElements is the number of elements of the JSON array b, without
// allocating; -1 when b is not an array.
func countElements(b []byte) int {
	n := 0
	if jsonspan.EachElement(b, func(int, []byte) error { n++; return nil }) != nil {
		return -1
	}
	return n
}

func isNull(b []byte) bool {
	i := jsonspan.SkipSpace(b, 0)
	return len(b)-i >= 4 && string(b[i:i+4]) == "null"
}

// elementCount decodes an array by counting its elements only (tools, tool
// calls: the gateway needs how many, never their content). null is 0.
type elementCount int

// UnmarshalJSON implements json.Unmarshaler.
func (c *elementCount) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*c = 0
		return nil
	}
	n := countElements(b)
	if n < 0 {
		return &json.UnmarshalTypeError{Value: "non-array", Type: countType}
	}
	*c = elementCount(n)
	return nil
}

var countType = reflect.TypeOf([]any(nil))

// toolList decodes the tools array by counting its elements and keeping
// its span, a slice of the body (the session fingerprint reads it): the
// walk that counts them already found where it is, so no second walk of
// the body looks for it.
type toolList struct {
	n    elementCount
	span []byte
}

// UnmarshalJSON implements json.Unmarshaler. b is a slice of the body
// (encoding/json and the fast readers both hand one over), which the
// request keeps.
func (t *toolList) UnmarshalJSON(b []byte) error {
	if err := t.n.UnmarshalJSON(b); err != nil {
		return err
	}
	t.span = b
	return nil
}

// errBadContent marks a message content that is neither a string, null,
// nor an array of content parts.
var errBadContent = errors.New("bad message content")

// messageList decodes "messages" under server.max_messages: the count is
// checked before one message is decoded, and each message is scanned in
// place into the fields routing needs.
type messageList struct {
	max   int // set before decoding
	set   bool
	items []Message
	span  []byte // the array as sent (a slice of the body, like toolList's)
}

// UnmarshalJSON implements json.Unmarshaler.
func (m *messageList) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		m.set, m.items, m.span = false, nil, nil
		return nil
	}
	n := countElements(b)
	if n < 0 {
		return badf("messages", "field \"messages\" has the wrong type: want an array of chat messages")
	}
	if n > m.max {
		return &Error{Param: "messages", Code: "too_many_messages",
			Message: fmt.Sprintf("\"messages\" has %d messages; at most %d are allowed (server.max_messages): send fewer", n, m.max)}
	}
	m.set, m.span = true, b
	m.items = make([]Message, 0, n)
	return jsonspan.EachElement(b, func(i int, elem []byte) error {
		msg, err := decodeMessage(elem)
		if err != nil {
			if field, ok := err.(fieldError); ok {
				p := fmt.Sprintf("messages[%d].%s", i, string(field))
				if field == "content" {
					return badf(p, "%s must be a string or an array of content parts", p)
				}
				return badf(p, "field %q has the wrong type: want a string", p)
			}
			return badf(fmt.Sprintf("messages[%d]", i), "messages[%d] must be a JSON object", i)
		}
		m.items = append(m.items, msg)
		return nil
	})
}

// fieldError names the member of a message that has the wrong type.
type fieldError string

func (f fieldError) Error() string { return string(f) + " has the wrong type" }

// decodeMessage scans one chat message object.
func decodeMessage(obj []byte) (Message, error) {
	var msg Message
	err := jsonspan.EachMember(obj, func(key, val []byte) error {
		switch string(key) {
		case "role":
			if val[0] != '"' {
				if isNull(val) {
					return nil
				}
				return fieldError("role")
			}
			msg.Role = internRole(val)
		case "content":
			text, toolResult, err := messageText(val, 0)
			if err != nil {
				return fieldError("content")
			}
			msg.Text, msg.ToolResult = text, toolResult
		case "tool_calls":
			if n := countElements(val); n > 0 {
				msg.ToolCalls = n
			} else if n < 0 && !isNull(val) {
				return fieldError("tool_calls")
			}
		}
		return nil
	})
	msg.ToolResult = msg.ToolResult || msg.Role == "tool"
	return msg, err
}

// internRole returns a role string without allocating for the known roles.
func internRole(quoted []byte) string {
	switch string(quoted) {
	case `"user"`:
		return "user"
	case `"assistant"`:
		return "assistant"
	case `"system"`:
		return "system"
	case `"developer"`:
		return "developer"
	case `"tool"`:
		return "tool"
	}
	return decodeString(quoted)
}

// inputList decodes an embeddings "input" under server.max_input_items: a
// string, an array of strings, an array of tokens, or an array of token
// arrays. A token array is counted and kept as four characters per token
// (the estimate's unit), never decoded into integers.
type inputList struct {
	max   int // set before decoding
	set   bool
	items []string
}

var errBadInput = badf("input", "\"input\" must be a string, an array of strings, an array of tokens or an array of token arrays")

// UnmarshalJSON implements json.Unmarshaler.
func (in *inputList) UnmarshalJSON(b []byte) error {
	in.set, in.items = false, nil
	i := jsonspan.SkipSpace(b, 0)
	switch {
	case isNull(b):
		return nil
	case i < len(b) && b[i] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return errBadInput
		}
		in.set, in.items = true, []string{s}
		return nil
	}
	n := countElements(b)
	if n < 0 {
		return errBadInput
	}
	if tokens, ok := tokenCount(b); ok && n > 0 {
		in.set, in.items = true, []string{strings.Repeat("xxxx", tokens)}
		return nil
	}
	if n > in.max {
		return &Error{Param: "input", Code: "too_many_inputs",
			Message: fmt.Sprintf("\"input\" has %d items; at most %d are allowed (server.max_input_items): send fewer per request", n, in.max)}
	}
	in.set = true
	in.items = make([]string, 0, n)
	return jsonspan.EachElement(b, func(_ int, elem []byte) error {
		if elem[0] == '"' {
			var s string
			if err := json.Unmarshal(elem, &s); err != nil {
				return errBadInput
			}
			in.items = append(in.items, s)
			return nil
		}
		tokens, ok := tokenCount(elem)
		if !ok {
			return errBadInput
		}
		in.items = append(in.items, strings.Repeat("xxxx", tokens))
		return nil
	})
}

// tokenCount counts the elements of an array of integers; ok is false when
// b is not one (an empty array is a token array of 0).
func tokenCount(b []byte) (int, bool) {
	n := 0
	err := jsonspan.EachElement(b, func(_ int, elem []byte) error {
		if !isInteger(elem) {
			return jsonspan.ErrNotArray
		}
		n++
		return nil
	})
	return n, err == nil
}

// isInteger reports a JSON number with no fraction or exponent.
func isInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	return len(b) > 0 && allDigits(b)
}

// ParseInt parses a JSON integer that fits a token count: no fraction, no
// exponent, no leading zero, at most 18 digits (what encoding/json accepts
// into an int, short of the overflow edge).
func ParseInt(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) || !allDigits(b) {
		return 0, false
	}
	n := 0
	for _, c := range b {
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func trimWS(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && jsonspan.IsSpace(b[i]) {
		i++
	}
	for j > i && jsonspan.IsSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func bytesEqualString(b []byte, s string) bool { return string(b) == s }

// decodeString decodes a JSON string literal (valid JSON: the decoder
// checked it) with encoding/json's semantics: escapes resolved, an invalid
// byte or lone surrogate becomes U+FFFD. One allocation, the result.
func decodeString(q []byte) string {
	q = trimWS(q)
	if len(q) < 2 {
		return ""
	}
	body := q[1 : len(q)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		if utf8.Valid(body) {
			return string(body)
		}
		return string(appendValidRunes(make([]byte, 0, len(body)+8), body))
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		// the run up to the next escape, copied whole when it is valid
		// UTF-8 (a long prompt's text between its \n escapes); a rune at
		// a time otherwise
		if body[i] != '\\' {
			run := body[i:]
			if j := bytes.IndexByte(run, '\\'); j >= 0 {
				run = run[:j]
			}
			out = appendValidRunes(out, run)
			i += len(run)
			continue
		}
		if i+1 >= len(body) {
			break
		}
		e := body[i+1]
		i += 2
		switch e {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(body, i)
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
					r2 = hex4(body, i+2)
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // \" \\ \/
			out = append(out, e)
		}
	}
	return string(out)
}

// appendValidRunes appends run to out with each invalid UTF-8 byte
// replaced by U+FFFD, as encoding/json decodes it.
func appendValidRunes(out, run []byte) []byte {
	if utf8.Valid(run) {
		return append(out, run...)
	}
	for i := 0; i < len(run); {
		r, size := utf8.DecodeRune(run[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, run[i:i+size]...)
		}
		i += size
	}
	return out
}

// hex4 reads the four hex digits at b[i:]; -1 when they are not there.
func hex4(b []byte, i int) rune {
	if i+4 > len(b) {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
