package tier

import (
	"fmt"
	"strings"
	"testing"
)

// benchText is n bytes of the worst case for the detectors: prose lines with
// no fence, no code, no math and no reasoning word, so every scan runs to
// the end instead of stopping at its first hit.
func benchText(n int) string {
	lines := []string{
		"The council met on Tuesday to discuss the new bus routes for the north.",
		"Residents said the last bus left too early for people on late shifts;",
		"the proposal adds three night lines and moves two stops (near the clinic).",
		"    Funding comes from the regional fund = a small rise in parking fees.",
		"Shop owners worried about customers - costs were $4 and $6 per hour.",
		"",
	}
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		sb.WriteString(lines[i%len(lines)])
		sb.WriteByte('\n')
	}
	return sb.String()[:n]
}

func BenchmarkClassify(b *testing.B) {
	c := defaults()
	for _, size := range []int{1 << 10, 32 << 10, 1 << 20} {
		r := chat(b, map[string]any{"max_tokens": 512}, "system", "You are a helpful assistant.",
			"user", "hello", "assistant", "Hi! How can I help?", "user", benchText(size)+"\nWhat do you make of it?")
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				c.Classify(r)
			}
		})
	}
}

// BenchmarkClassifyCode is the common hard case: a fenced block stops the
// code scan at once.
func BenchmarkClassifyCode(b *testing.B) {
	c := defaults()
	r := chat(b, nil, "user", benchText(32<<10)+"\n```go\nfunc f() {}\n```\nplease review")
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(r)
	}
}
