package providers

import (
	"net/http"
	"strings"
	"testing"

	"switchyard/routing"
)

// TestUpstreamErrorFieldsBounded: an upstream error object's message, type
// and code reach the client, the audit entry and the log bounded (a 1 MiB
// message was relayed whole; only a body that is not an error object was
// cut), while classification still reads the whole message: a
// context-window phrase past the cut still classifies.
func TestUpstreamErrorFieldsBounded(t *testing.T) {
	long := strings.Repeat("x ", 50_000)
	cases := []struct {
		name string
		err  *Error
		want routing.Class
	}{
		{"openai 400", newStatusError("openai", 400, []byte(`{"error":{"message":"`+long+` maximum context length exceeded","type":"`+strings.Repeat("t", 5000)+`","code":"`+strings.Repeat("c", 5000)+`"}}`), http.Header{}), routing.ClassContextWindow},
		{"openai 500", newStatusError("openai", 500, []byte(`{"message":"`+long+`","type":"`+strings.Repeat("t", 5000)+`"}`), http.Header{}), routing.ClassServerError},
		{"in a stream", midStreamError([]byte(`{"error":{"message":"` + long + `","code":"` + strings.Repeat("c", 5000) + `"}}`)), routing.ClassServerError},
		{"bedrock", newBedrockError(400, http.Header{}, []byte(`{"__type":"ValidationException","message":"`+long+` input is too long for requested model"}`)), routing.ClassContextWindow},
		{"bedrock stream", bedrockStreamException("internalServerException", []byte(`{"message":"`+long+`"}`)), routing.ClassServerError},
	}
	for _, c := range cases {
		e := c.err
		const mark = len("…") // a cut text ends with it (wire.Truncate)
		if len(e.Message) > errorMessageMax+mark || len(e.Type) > errorFieldMax+mark || len(e.Code) > errorFieldMax+mark {
			t.Errorf("%s: message %d, type %d, code %d bytes: want at most %d, %d, %d", c.name, len(e.Message), len(e.Type), len(e.Code), errorMessageMax+mark, errorFieldMax+mark, errorFieldMax+mark)
		}
		if e.Class != c.want {
			t.Errorf("%s: class %v, want %v (classified on the whole message)", c.name, e.Class, c.want)
		}
	}
}
