package providers

import (
	"encoding/json"
	"testing"
)

// TestHostile4GoogleSchemaEnums: Gemini's Schema is an OpenAPI subset whose
// enum is a list of strings for a STRING value (https://ai.google.dev/api/caching#Schema:
// "enum[] string: possible values of the element of Type.STRING with enum
// format"; Vertex's v1 Schema reference types enum[] as string too). A JSON
// Schema enum of numbers or booleans, common in MCP and OpenAI tool
// definitions, makes generateContent answer 400 INVALID_ARGUMENT ("Invalid
// value at '...parameters.properties[0].value.enum[0]' (TYPE_STRING), 1",
// or "enum: only allowed for STRING type"), so every request carrying such a
// tool fails on every Gemini and Vertex deployment. The translation keeps a
// string enum, turns a null member into nullable, and drops any other enum
// (the value's type still constrains it).
func TestHostile4GoogleSchemaEnums(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"integer enum dropped",
			`{"type":"object","properties":{"level":{"type":"integer","enum":[0,1,2],"description":"d"}}}`,
			`{"type":"object","properties":{"level":{"type":"integer","description":"d"}}}`},
		{"number enum dropped",
			`{"type":"object","properties":{"x":{"type":"number","enum":[0.5,1]}}}`,
			`{"type":"object","properties":{"x":{"type":"number"}}}`},
		{"boolean enum dropped",
			`{"type":"object","properties":{"b":{"type":"boolean","enum":[true]}}}`,
			`{"type":"object","properties":{"b":{"type":"boolean"}}}`},
		{"mixed enum dropped",
			`{"type":"object","properties":{"m":{"enum":["a",1]}}}`,
			`{"type":"object","properties":{"m":{}}}`},
		{"nested in items and anyOf",
			`{"type":"object","properties":{"l":{"type":"array","items":{"type":"integer","enum":[1,2]}},"u":{"anyOf":[{"type":"integer","enum":[3]},{"type":"string","enum":["x"]}]}}}`,
			`{"type":"object","properties":{"l":{"type":"array","items":{"type":"integer"}},"u":{"anyOf":[{"type":"integer"},{"type":"string","enum":["x"]}]}}}`},
		{"string enum kept",
			`{"type":"object","properties":{"unit":{"type":"string","enum":["c","f"]}}}`,
			`{"type":"object","properties":{"unit":{"type":"string","enum":["c","f"]}}}`},
		{"null member becomes nullable",
			`{"type":"object","properties":{"unit":{"type":["string","null"],"enum":["c","f",null]}}}`,
			`{"type":"object","properties":{"unit":{"type":"string","nullable":true,"enum":["c","f"]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := geminiSchema(json.RawMessage(tc.in))
			assertJSON(t, got, tc.want)
		})
	}

	// end to end: a chat tool with an integer enum reaches Gemini without it
	body, err := openAIToGeminiRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"safesearch":{"type":"integer","enum":[0,1,2]}}}}}]}`), "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	var req gmRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, req.Tools[0].FunctionDeclarations[0].Parameters, `{"type":"object","properties":{"safesearch":{"type":"integer"}}}`)
}
