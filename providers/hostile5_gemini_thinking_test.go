package providers

import (
	"encoding/json"
	"testing"
)

// TestHostile5GeminiAdaptiveThinking: an Anthropic client's thinking is
// {"type":"enabled","budget_tokens":N}, {"type":"disabled"} or
// {"type":"adaptive"} (the model decides how much to think; Messages API
// reference, "thinking"). Every type but "enabled" was taken as disabled,
// so a client asking for adaptive thinking had thinking turned off on a
// Gemini deployment (thinkingBudget 0, or the Pro minimum of 128). Gemini's
// equivalent is dynamic thinking, thinkingBudget -1 ("the model will
// adjust the budget based on the complexity of the request",
// https://ai.google.dev/gemini-api/docs/thinking#set-budget).
func TestHostile5GeminiAdaptiveThinking(t *testing.T) {
	for _, tc := range []struct {
		name, model, thinking string
		want                  *int // nil: no thinkingConfig
	}{
		{"adaptive", "gemini-2.5-flash", `{"type":"adaptive"}`, intPtr5(-1)},
		{"adaptive pro", "gemini-2.5-pro", `{"type":"adaptive"}`, intPtr5(-1)},
		{"enabled", "gemini-2.5-flash", `{"type":"enabled","budget_tokens":2048}`, intPtr5(2048)},
		{"disabled", "gemini-2.5-flash", `{"type":"disabled"}`, intPtr5(0)},
		{"disabled pro", "gemini-2.5-pro", `{"type":"disabled"}`, intPtr5(minProThinking)},
		{"unknown type", "gemini-2.5-flash", `{"type":"something-new"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":4096,"thinking":` + tc.thinking + `,"messages":[{"role":"user","content":"hi"}]}`
			got, err := anthropicToGeminiRequest([]byte(body), tc.model)
			if err != nil {
				t.Fatal(err)
			}
			var out gmRequest
			if err := json.Unmarshal(got, &out); err != nil {
				t.Fatal(err)
			}
			var budget *int
			if gc := out.GenerationConfig; gc != nil && gc.ThinkingConfig != nil {
				budget = gc.ThinkingConfig.ThinkingBudget
			}
			switch {
			case tc.want == nil && budget != nil:
				t.Fatalf("thinkingBudget %d sent for %s: %s", *budget, tc.thinking, got)
			case tc.want != nil && (budget == nil || *budget != *tc.want):
				t.Fatalf("thinking %s: want thinkingBudget %d, got %s", tc.thinking, *tc.want, got)
			}
		})
	}
}

func intPtr5(n int) *int { return &n }
