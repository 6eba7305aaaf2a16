package providers

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHostile5GeminiSchemaRefs: Gemini's Schema (responseSchema, and a
// function declaration's parameters) is an OpenAPI 3.0 subset with no $ref
// or $defs field (https://ai.google.dev/api/caching#Schema lists type,
// format, title, description, nullable, enum, items, properties, required,
// anyOf, ...; Google's own GenAI SDKs inline $defs/$ref before sending). A
// schema from the OpenAI SDK's Pydantic helper names its nested models in
// $defs and points at them with $ref: dropping the $ref left the nested
// model as an empty schema ("items": {}), so Gemini answered with no
// structure (or refused the empty items). The references are inlined.
func TestHostile5GeminiSchemaRefs(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			// client.beta.chat.completions.parse(response_format=Plan), Plan
			// holding list[Step]: the OpenAI SDK's strict schema
			name: "pydantic $defs",
			in: `{"$defs":{"Step":{"additionalProperties":false,"properties":{"explanation":{"title":"Explanation","type":"string"},"output":{"title":"Output","type":"string"}},"required":["explanation","output"],"title":"Step","type":"object"}},
				"additionalProperties":false,"properties":{"steps":{"items":{"$ref":"#/$defs/Step"},"title":"Steps","type":"array"},"final_answer":{"title":"Final Answer","type":"string"}},"required":["steps","final_answer"],"title":"Plan","type":"object"}`,
			want: `{"properties":{"steps":{"items":{"properties":{"explanation":{"title":"Explanation","type":"string"},"output":{"title":"Output","type":"string"}},"required":["explanation","output"],"title":"Step","type":"object"},"title":"Steps","type":"array"},"final_answer":{"title":"Final Answer","type":"string"}},"required":["steps","final_answer"],"title":"Plan","type":"object"}`,
		},
		{
			// draft-07 "definitions", a root that is itself a $ref, and a
			// sibling description that wins over the definition's
			name: "definitions and root ref",
			in:   `{"$ref":"#/definitions/Out","definitions":{"Out":{"type":"object","properties":{"unit":{"$ref":"#/definitions/Unit","description":"the unit"}}},"Unit":{"type":"string","enum":["c","f"],"description":"a unit"}}}`,
			want: `{"type":"object","properties":{"unit":{"type":"string","enum":["c","f"],"description":"the unit"}}}`,
		},
		{
			// a recursive model (a tree) cannot be inlined forever: the
			// recursion ends in its type
			name: "recursive",
			in:   `{"$defs":{"Node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}},"$ref":"#/$defs/Node"}`,
			want: `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"type":"object"}}}}`,
		},
		{
			// a definition that is a reference, and the root's own "#"
			name: "alias and root recursion",
			in:   `{"type":"object","properties":{"self":{"$ref":"#"},"x":{"$ref":"#/$defs/A"}},"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"type":"integer"}}}`,
			want: `{"type":"object","properties":{"self":{"type":"object"},"x":{"type":"integer"}}}`,
		},
		{
			name: "anyOf of refs",
			in:   `{"type":"object","properties":{"pet":{"anyOf":[{"$ref":"#/$defs/Cat"},{"type":"null"}]}},"$defs":{"Cat":{"type":"object","properties":{"meows":{"type":"boolean"}}}}}`,
			want: `{"type":"object","properties":{"pet":{"anyOf":[{"type":"object","properties":{"meows":{"type":"boolean"}}},{"type":"null"}]}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := geminiSchema(json.RawMessage(tc.in))
			if got == nil {
				t.Fatal("schema dropped")
			}
			assertJSON(t, got, tc.want)
		})
	}
}

// TestHostile5GeminiSchemaRefsThroughRequest: the inlining reaches both
// places a chat request's schemas go, response_format and tools.
func TestHostile5GeminiSchemaRefsThroughRequest(t *testing.T) {
	schema := `{"$defs":{"Step":{"type":"object","properties":{"output":{"type":"string"}}}},"type":"object","properties":{"steps":{"type":"array","items":{"$ref":"#/$defs/Step"}}}}`
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],
		"tools":[{"type":"function","function":{"name":"plan","parameters":` + schema + `}}],
		"response_format":{"type":"json_schema","json_schema":{"name":"Plan","schema":` + schema + `}}}`
	got, err := openAIToGeminiRequest([]byte(body), "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	var out gmRequest
	if err := json.Unmarshal(got, &out); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"steps":{"type":"array","items":{"type":"object","properties":{"output":{"type":"string"}}}}}}`
	assertJSON(t, out.GenerationConfig.ResponseSchema, want)
	assertJSON(t, out.Tools[0].FunctionDeclarations[0].Parameters, want)
}

// TestHostile5GeminiSchemaRefsBounded: a schema whose definitions each
// use the next one twice would double at every level when inlined; the
// inlined bytes stay a small multiple of the schema's (SPEC 14), the rest
// of the references ending in their type.
func TestHostile5GeminiSchemaRefsBounded(t *testing.T) {
	var defs []string
	const levels = 40
	for i := 0; i < levels; i++ {
		next := `{"type":"string"}`
		if i < levels-1 {
			next = `{"$ref":"#/$defs/D` + itoa(i+1) + `"}`
		}
		defs = append(defs, `"D`+itoa(i)+`":{"type":"object","properties":{"a":`+next+`,"b":`+next+`}}`)
	}
	in := `{"$defs":{` + strings.Join(defs, ",") + `},"$ref":"#/$defs/D0"}`
	got := geminiSchema(json.RawMessage(in))
	if got == nil {
		t.Fatal("schema dropped")
	}
	if len(got) > 16*len(in) {
		t.Fatalf("a %d-byte schema inlined into %d bytes", len(in), len(got))
	}
	if !json.Valid(got) || !strings.HasPrefix(string(got), `{"properties":{"a":{"properties":{"a":`) {
		t.Fatalf("the first levels were not inlined: %.200s", got)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
