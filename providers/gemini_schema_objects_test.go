package providers

import (
	"encoding/json"
	"testing"
)

// TestGeminiSchemaEmptyObjects: Gemini refuses an OBJECT schema whose
// properties are present but empty ("properties: should be non-empty for
// OBJECT type") and a required name its properties do not define
// ("property is not defined"), at any depth; JSON Schemas of MCP and
// OpenAI tools carry both (a free-form options object, a required list
// naming a property another keyword described). The translation keeps a
// nested free-form object as {"type":"object"} (still required where it
// was) and keeps of required only the names its properties define.
func TestGeminiSchemaEmptyObjects(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"nested empty properties dropped, the object kept",
			`{"type":"object","properties":{"opts":{"type":"object","properties":{},"additionalProperties":true},"q":{"type":"string"}},"required":["opts","q"]}`,
			`{"type":"object","properties":{"opts":{"type":"object"},"q":{"type":"string"}},"required":["opts","q"]}`},
		{"in array items",
			`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{},"required":["id"]}}}}`,
			`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object"}}}}`},
		{"required names without a property dropped",
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","b"]}`,
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
		{"required without properties dropped",
			`{"type":"object","properties":{"x":{"type":"object","required":["y"]}}}`,
			`{"type":"object","properties":{"x":{"type":"object"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertJSON(t, geminiSchema(json.RawMessage(tc.in)), tc.want)
		})
	}
	// the top level without properties still sends no parameters
	if got := geminiSchema(json.RawMessage(`{"type":"object","properties":{}}`)); got != nil {
		t.Errorf("top-level empty object: %s, want none", got)
	}
}
