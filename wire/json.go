package wire

import (
	"bytes"
	"math"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal. It is the module's one
// JSON string encoder: the output is always valid UTF-8 and valid JSON,
// whatever s holds (an invalid byte becomes U+FFFD, control characters are
// escaped, and so are U+2028 and U+2029, which some JavaScript parsers
// reject in a string). Hot paths build JSON by appending with it instead of
// marshalling.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s, &plainSafe, false) }

// AppendMarshalString appends s exactly as encoding/json's Marshal writes
// a string: as AppendString does, with <, > and & escaped too (\u003c)
// and \b and \f spelled so. The response cache's canonical JSON is
// defined by Marshal's bytes.
func AppendMarshalString[S []byte | string](dst []byte, s S) []byte {
	return appendString(dst, s, &marshalSafe, true)
}

// AppendMarshalFloat appends f (finite) as encoding/json's Marshal writes
// a float64: ES6's number to string, shortest, in exponent form below 1e-6
// and from 1e21.
func AppendMarshalFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-07 is written e-7
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// plainSafe and marshalSafe say which ASCII bytes each encoder writes as
// they are; a byte from 0x80 up is in neither: it starts a rune to check.
var plainSafe, marshalSafe = func() (plain, marshal [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
		marshal[c] = plain[c] && c != '<' && c != '>' && c != '&'
	}
	return plain, marshal
}()

// MarshalsAsIs reports whether AppendMarshalString writes s unchanged
// between its quotes.
func MarshalsAsIs(s []byte) bool {
	ascii := true
	for _, c := range s {
		if !marshalSafe[c] {
			if c < utf8.RuneSelf {
				return false
			}
			ascii = false
		}
	}
	if ascii {
		return true
	}
	// U+2028 and U+2029 are E2 80 A8 and E2 80 A9
	return utf8.Valid(s) && !bytes.Contains(s, []byte("\u2028")) && !bytes.Contains(s, []byte("\u2029"))
}

// MarshalsLiteralAsIs reads the JSON string literal that starts at q[0]
// (a quote; q valid JSON from there) and returns its length when
// AppendMarshalString, given what it decodes to, writes it back byte for
// byte, else 0: one pass that accepts the escapes Marshal writes itself
// for the characters they stand for (\" \\ \n \r \t \b \f) and valid
// UTF-8 other than U+2028 and U+2029.
func MarshalsLiteralAsIs(q []byte) int {
	for i := 1; i < len(q); {
		c := q[i]
		switch {
		case marshalSafe[c]:
			i++
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(q) {
				return 0
			}
			switch q[i+1] {
			case '"', '\\', 'n', 'r', 't', 'b', 'f':
				i += 2
			default:
				return 0
			}
		case c < utf8.RuneSelf:
			return 0
		default:
			r, size := utf8.DecodeRune(q[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return 0
			}
			i += size
		}
	}
	return 0
}

func appendString[S []byte | string](dst []byte, s S, safe *[256]bool, shortBF bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case shortBF && c == '\b':
				dst = append(dst, '\\', 'b')
			case shortBF && c == '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		n := min(len(s)-i, utf8.UTFMax)
		r, size := utf8.DecodeRuneInString(string(s[i : i+n]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ErrorBody is the one error body of SPEC 14, in either client format.
type ErrorBody struct {
	// Type is the error type: the OpenAI type (invalid_request_error, ...)
	// or, for FormatAnthropic, the Anthropic type (authentication_error, ...).
	Type    string
	Code    string // OpenAI only; null when empty
	Param   string // OpenAI only; null when empty
	Message string
	// RequestID is the request's id, written as the Anthropic shape's
	// top-level request_id (docs.claude.com/en/api/errors, "Error shapes");
	// omitted when empty. The OpenAI shape has no such key.
	RequestID string
}

// AppendError appends e in format f: OpenAI
// {"error":{"message","type","code","param"}} (empty code and param are
// null) or Anthropic {"type":"error","error":{"type","message"}} with
// "request_id" when e has one. Every
// error the gateway answers with, and every error the simulated upstream
// sends, is written by it.
func AppendError(dst []byte, f Format, e ErrorBody) []byte {
	if f == FormatAnthropic {
		dst = append(dst, `{"type":"error","error":{"type":`...)
		dst = AppendString(dst, e.Type)
		dst = append(dst, `,"message":`...)
		dst = AppendString(dst, e.Message)
		if e.RequestID == "" {
			return append(dst, "}}"...)
		}
		dst = append(dst, `},"request_id":`...)
		dst = AppendString(dst, e.RequestID)
		return append(dst, '}')
	}
	dst = append(dst, `{"error":{"message":`...)
	dst = AppendString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = AppendString(dst, e.Type)
	dst = append(dst, `,"code":`...)
	dst = appendStringOrNull(dst, e.Code)
	dst = append(dst, `,"param":`...)
	dst = appendStringOrNull(dst, e.Param)
	return append(dst, "}}"...)
}

func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return AppendString(dst, s)
}

// Truncate returns at most n bytes of s, cut at a character boundary, with
// "..." appended when something was cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		n = 0
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}
