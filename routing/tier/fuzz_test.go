package tier

import (
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

// FuzzClassify feeds arbitrary bodies through wire.Parse and Classify, and
// arbitrary text straight into a message, checking that classification
// never panics and that every verdict is consistent with its signals. Seeds
// live in testdata/fuzz/FuzzClassify.
func FuzzClassify(f *testing.F) {
	f.Add([]byte(`{"model":"normal","messages":[{"role":"user","content":"thanks!"}]}`), "thanks!")
	f.Add([]byte(`{"model":"normal","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`), "x^2 + 3x = 0")
	f.Add([]byte(`{"model":"normal","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","content":"a"}]}]}`), "```\ncode\n```")
	c := defaults()
	f.Fuzz(func(t *testing.T, body []byte, text string) {
		for _, format := range []wire.Format{wire.FormatOpenAI, wire.FormatAnthropic} {
			if r, err := wire.Parse(body, catalog.OpChat, format); err == nil {
				check(t, c, c.Classify(r))
			}
		}
		r := &wire.Request{Messages: []wire.Message{{Role: "user", Text: text}, {Role: "tool", Text: text, ToolResult: true}}}
		check(t, c, c.Classify(r))
	})
}

func check(t *testing.T, c *Classifier, v Verdict) {
	t.Helper()
	sum := 0
	for _, s := range v.Signals {
		sum += s.Points
	}
	switch v.Source {
	case SourceReasoning:
		if v.Tier != Hard {
			t.Fatalf("reasoning verdict %v", v.Tier)
		}
	case SourceClassified:
		if sum != v.Score || (v.Score >= c.Threshold()) != (v.Tier == Hard) {
			t.Fatalf("inconsistent verdict %+v", v)
		}
	default:
		t.Fatalf("Classify returned source %q", v.Source)
	}
}
