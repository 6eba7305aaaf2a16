package providers

import (
	"encoding/json"
	"strings"
	"testing"
)

// longOpenAIChat is an OpenAI chat body of at least n bytes: alternating
// turns of plain text with an escaped line break and quotes (an agent's
// conversation deep into its task).
func longOpenAIChat(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"model":"bench","max_tokens":16,"messages":[`)
	for i := 0; sb.Len() < n; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		role := [2]string{"user", "assistant"}[i%2]
		sb.WriteString(`{"role":"` + role + `","content":"` + strings.Repeat("Refactor the parser so that it reads each value once. ", 20) + `\n\"quoted\" line"}`)
	}
	sb.WriteString(`,{"role":"user","content":"go"}]}`)
	return []byte(sb.String())
}

// BenchmarkTranslateLarge translates a 64 KiB conversation between the
// OpenAI and Anthropic formats (the body is both: turns of text with
// max_tokens), and the last step of OpenAI to Anthropic alone
// (json.Marshal of the Messages request against marshalAnthropic).
func BenchmarkTranslateLarge(b *testing.B) {
	body := longOpenAIChat(64 << 10)
	b.Run("openai-to-anthropic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := openAIToAnthropicRequest(body, "claude", false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("anthropic-to-openai", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := anthropicToOpenAIRequest(body, "gpt", false); err != nil {
				b.Fatal(err)
			}
		}
	})
	var in oaRequest
	if err := json.Unmarshal(body, &in); err != nil {
		b.Fatal(err)
	}
	out, err := chatToAnthropic(&in, "claude", false)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("marshal/encoding-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(out)
		}
	})
	b.Run("marshal/spliced", func(b *testing.B) {
		for b.Loop() {
			_, _ = marshalAnthropic(out)
		}
	})
}
