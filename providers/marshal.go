package providers

import (
	"bytes"
	"encoding/json"

	"switchyard/wire"
)

// marshalMessages is json.Marshal(out), byte for byte, for a request whose
// messages (*msgs) each hold a raw content (content gives a message's):
// a turn of the conversation, the client's string or one json.Marshal
// made, that encoding/json would compact again a byte at a time (its
// Marshaler path always does), most of a long conversation's cost. out is
// marshalled with its messages nil; each message is marshalled with a
// placeholder content whose value is then replaced by the content's bytes
// (wire.EditTopLevel), and the array put in place of out's "messages"
// member. A content holding a byte compaction would change (HTML's <, >
// and &, U+2028, U+2029, which encoding/json escapes) is left to
// encoding/json. The OpenAI and Anthropic translations marshal their
// requests with it (BenchmarkTranslateLarge).
func marshalMessages[M any](out any, msgs *[]M, content func(*M) *json.RawMessage) ([]byte, error) {
	ms := *msgs
	*msgs = nil
	head, err := json.Marshal(out)
	*msgs = ms
	if err != nil || ms == nil {
		return head, err
	}
	size := 2
	for i := range ms {
		size += len(*content(&ms[i])) + 64
	}
	arr := append(make([]byte, 0, size), '[')
	for i := range ms {
		if i > 0 {
			arr = append(arr, ',')
		}
		m := ms[i]
		c := content(&m)
		raw := *c
		splice := len(raw) > 0 && !compactWouldChange(raw)
		if splice {
			*c = placeholderContent
		}
		b, err := json.Marshal(&m)
		if err != nil {
			return nil, err
		}
		if splice {
			b = wire.EditTopLevel(b, wire.TopLevelEdit{Key: "content", Value: raw})
		}
		arr = append(arr, b...)
	}
	arr = append(arr, ']')
	return wire.EditTopLevel(head, wire.TopLevelEdit{Key: "messages", Value: arr}), nil
}

// compactWouldChange reports whether b (compact JSON) holds a byte
// encoding/json's compaction escapes: <, > or &, or U+2028 or U+2029
// (each found a word at a time, not a rune at a time).
func compactWouldChange(b []byte) bool {
	return bytes.IndexAny(b, "<>&") >= 0 || bytes.Contains(b, lineSep) || bytes.Contains(b, paraSep)
}

var lineSep, paraSep = []byte("\u2028"), []byte("\u2029")

// placeholderContent stands for a message's content while the rest of the
// message is marshalled (marshalMessages).
var placeholderContent = json.RawMessage("0")
