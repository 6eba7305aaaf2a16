package gateway

import (
	"bytes"

	"switchyard/wire"
)

// The JSON string fields that carry an answer's content, per client format
// and mode: what a request without upstream usage is charged for (SPEC 3,
// 14: the content characters relayed, not the stream's framing). Each
// list names the fields that hold new content once, so nothing is counted
// twice (a Responses stream repeats its text in ...done and
// response.completed; only its deltas count).
var (
	contentFieldsOpenAI    = [][]byte{[]byte(`"content":"`), []byte(`"arguments":"`), []byte(`"reasoning_content":"`)}
	contentFieldsAnthropic = [][]byte{[]byte(`"text":"`), []byte(`"partial_json":"`), []byte(`"thinking":"`)}
	contentFieldsResponses = [][]byte{[]byte(`"delta":"`)}
	contentFieldsRespSync  = [][]byte{[]byte(`"text":"`), []byte(`"arguments":"`)}
)

// contentFields names the content fields of a client format's answers.
func contentFields(f wire.Format, stream bool) [][]byte {
	switch f {
	case wire.FormatAnthropic:
		return contentFieldsAnthropic
	case wire.FormatResponses:
		if stream {
			return contentFieldsResponses
		}
		return contentFieldsRespSync
	default:
		return contentFieldsOpenAI
	}
}

// contentChars counts the characters of content in b, an answer or some of
// its stream events: the length of every string value of the given fields,
// a JSON escape counting as one character. It allocates nothing.
func contentChars(b []byte, fields [][]byte) int64 {
	var n int64
	for _, f := range fields {
		rest := b
		for {
			i := bytes.Index(rest, f)
			if i < 0 {
				break
			}
			rest = rest[i+len(f):]
			j := 0
			for j < len(rest) && rest[j] != '"' {
				switch {
				case rest[j] == '\\' && j+1 < len(rest) && rest[j+1] == 'u':
					j += 6
				case rest[j] == '\\':
					j += 2
				default:
					j++
					if rest[j-1]&0xC0 == 0x80 {
						continue // a UTF-8 continuation byte: its character is counted
					}
				}
				n++
			}
			rest = rest[min(j, len(rest)):]
		}
	}
	return n
}
