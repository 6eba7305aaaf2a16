package tier

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

// corpusCase is one line of testdata/corpus.jsonl (made by gen_corpus.py).
type corpusCase struct {
	Name     string          `json:"name"`
	Category string          `json:"category"`
	Tier     string          `json:"tier"`
	Format   string          `json:"format"`
	Body     json.RawMessage `json:"body"`
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	f, err := os.Open("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func parseCase(t testing.TB, c corpusCase) *wire.Request {
	t.Helper()
	format := wire.FormatOpenAI
	if c.Format == "anthropic" {
		format = wire.FormatAnthropic
	}
	r, err := wire.Parse(c.Body, catalog.OpChat, format)
	if err != nil {
		t.Fatalf("%s: parse: %v", c.Name, err)
	}
	return r
}

// TestCorpusAccuracy classifies the labelled corpus with the default table
// and fails below 90% agreement. Misses are logged with their signals so a
// change to the detectors or the defaults can be judged on them.
func TestCorpusAccuracy(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 60 {
		t.Fatalf("corpus has %d cases, want >= 60", len(cases))
	}
	c := defaults()
	right := 0
	for _, tc := range cases {
		want, ok := ParseTier(tc.Tier)
		if !ok {
			t.Fatalf("%s: bad label %q", tc.Name, tc.Tier)
		}
		v := c.Classify(parseCase(t, tc))
		if v.Tier == want {
			right++
			continue
		}
		t.Logf("miss %-28s [%s] want %s got %s score %d signals %v", tc.Name, tc.Category, want, v.Tier, v.Score, v.Signals)
	}
	acc := float64(right) / float64(len(cases))
	t.Logf("corpus accuracy %.1f%% (%d/%d)", 100*acc, right, len(cases))
	if acc < 0.90 {
		t.Fatalf("corpus accuracy %.1f%% below 90%%", 100*acc)
	}
}
