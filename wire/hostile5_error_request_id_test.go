package wire

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// The Anthropic API's errors page (docs.claude.com/en/api/errors, "Error
// shapes") shows the request's id as a top-level request_id beside type
// and error; the official Go SDK's ErrorResponse declares it required
// (shared.ErrorResponse.RequestID, json "request_id"). AppendError wrote no
// request_id, whatever id the gateway had for the request. The OpenAI
// shape has no such key and keeps none; an empty id writes none.
func TestHostile5AnthropicErrorCarriesRequestID(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      Format
		id     string
		wantID bool
	}{
		{"anthropic with id", FormatAnthropic, `req_"1\`, true},
		{"anthropic without id", FormatAnthropic, "", false},
		{"openai ignores it", FormatOpenAI, "req_1", false},
	} {
		b := AppendError(nil, tc.f, ErrorBody{Type: "invalid_request_error", Message: "bad", RequestID: tc.id})
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatalf("%s: %s is not JSON: %v", tc.name, b, err)
		}
		if _, ok := raw["request_id"]; ok != tc.wantID {
			t.Errorf("%s: %s: request_id present %v, want %v", tc.name, b, ok, tc.wantID)
		}
		if tc.f != FormatAnthropic {
			continue
		}
		var er anthropic.ErrorResponse
		if err := json.Unmarshal(b, &er); err != nil {
			t.Fatalf("%s: the SDK cannot decode %s: %v", tc.name, b, err)
		}
		if er.Type != "error" || er.Error.Type != "invalid_request_error" || er.Error.Message != "bad" {
			t.Errorf("%s: SDK read %+v from %s", tc.name, er, b)
		}
		if tc.wantID && (!er.JSON.RequestID.Valid() || er.RequestID != tc.id) {
			t.Errorf("%s: SDK read request_id %q from %s, want %q", tc.name, er.RequestID, b, tc.id)
		}
	}
}
