package agentturn

import (
	"encoding/json"
	"testing"
)

func TestTurnsAreValidJSON(t *testing.T) {
	for name, body := range map[string]string{"openai": OpenAI(), "anthropic": Anthropic(), "responses": Responses(), "schema": Schema} {
		if !json.Valid([]byte(body)) {
			t.Errorf("%s: not valid JSON", name)
		}
	}
}
