package providers

import (
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

// TestResponsesTextFormatToAnthropic: a Responses request's text.format
// json_schema reaches an Anthropic deployment as output_config.format, as
// a chat request's response_format does; it was dropped, and a client
// asking for schema-valid JSON got free text.
func TestResponsesTextFormatToAnthropic(t *testing.T) {
	body := `{"model":"m","input":"give me a point","text":{"format":{"type":"json_schema","name":"pt","schema":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}}}}`
	r, err := wire.Parse([]byte(body), catalog.OpChat, wire.FormatResponses)
	if err != nil {
		t.Fatal(err)
	}
	out, err := responsesToAnthropicBody(r.Responses, "claude-x", false)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); !strings.Contains(s, `"output_config"`) || !strings.Contains(s, `"json_schema"`) || !strings.Contains(s, `"required":["x"]`) {
		t.Fatalf("the schema did not reach the Messages body: %s", out)
	}
}
