package tier

import (
	"encoding/json"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/wire"
)

func defaults() *Classifier {
	return New(config.SmartRouting{Threshold: 4, Points: config.DefaultPoints()})
}

// chat builds an OpenAI chat request from role/text pairs.
func chat(t testing.TB, extra map[string]any, roleText ...string) *wire.Request {
	t.Helper()
	var msgs []map[string]any
	for i := 0; i+1 < len(roleText); i += 2 {
		msgs = append(msgs, map[string]any{"role": roleText[i], "content": roleText[i+1]})
	}
	body := map[string]any{"model": "normal", "messages": msgs}
	for k, v := range extra {
		body[k] = v
	}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.Parse(raw, catalog.OpChat, wire.FormatOpenAI)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return r
}

func signalNamesOf(v Verdict) []string {
	var out []string
	for _, s := range v.Signals {
		out = append(out, s.Name)
	}
	return out
}

const snippet = "Why does this print 0?\n```go\nvar n int\nfmt.Println(n)\n```"

// prose is filler text without code, math or reasoning words.
func prose(n int) string {
	const s = "The weather in the valley was mild this week, and the market stayed busy every morning. "
	return strings.Repeat(s, n/len(s)+1)[:n]
}

func TestSeedExamples(t *testing.T) {
	c := defaults()
	tests := []struct {
		name   string
		req    *wire.Request
		tier   Tier
		score  int
		source string
	}{
		{"short code snippet alone", chat(t, nil, "user", snippet), Easy, 3, SourceClassified},
		{"code plus 2k context", chat(t, nil, "user", prose(2000)+"\n"+snippet), Hard, 4, SourceClassified},
		{"reasoning_effort high", chat(t, map[string]any{"reasoning_effort": "high"}, "user", "hi"), Hard, 0, SourceReasoning},
		{"reasoning.effort medium", chat(t, map[string]any{"reasoning": map[string]any{"effort": "medium"}}, "user", "hi"), Hard, 0, SourceReasoning},
		{"reasoning_effort low", chat(t, map[string]any{"reasoning_effort": "low"}, "user", "hi"), Easy, 0, SourceClassified},
		{"thanks", chat(t, nil, "user", "thanks!"), Easy, 0, SourceClassified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := c.Classify(tt.req)
			if v.Tier != tt.tier || v.Score != tt.score || v.Source != tt.source {
				t.Fatalf("got %v score %d source %s signals %v; want %v score %d source %s",
					v.Tier, v.Score, v.Source, v.Signals, tt.tier, tt.score, tt.source)
			}
		})
	}
}

func TestThinkingGoesHard(t *testing.T) {
	body := `{"model":"normal","max_tokens":100,"thinking":{"type":"enabled","budget_tokens":2000},"messages":[{"role":"user","content":"hi"}]}`
	r, err := wire.Parse([]byte(body), catalog.OpChat, wire.FormatAnthropic)
	if err != nil {
		t.Fatal(err)
	}
	v := defaults().Classify(r)
	if v.Tier != Hard || v.Source != SourceReasoning || len(v.Signals) != 1 || v.Signals[0].Name != "thinking" {
		t.Fatalf("got %+v", v)
	}
}

func TestSignals(t *testing.T) {
	c := defaults()
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{}}}
	tools := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = tool
		}
		return out
	}
	deep := []string{}
	for range 4 {
		deep = append(deep, "user", "ok", "assistant", "sure")
	}
	tests := []struct {
		name  string
		req   *wire.Request
		want  []string
		score int
	}{
		{"context 8k", chat(t, nil, "user", prose(8000)), []string{"context_8k"}, 2},
		{"context 32k", chat(t, nil, "user", prose(32000)), []string{"context_32k"}, 3},
		{"one tool", chat(t, map[string]any{"tools": tools(1)}, "user", "hi"), []string{"tools"}, 1},
		{"five tools", chat(t, map[string]any{"tools": tools(5)}, "user", "hi"), []string{"many_tools"}, 2},
		{"reasoning word", chat(t, nil, "user", "Can you refactor this?"), []string{"reasoning_words"}, 2},
		{"step-by-step", chat(t, nil, "user", "Explain it step-by-step please"), []string{"reasoning_words"}, 2},
		{"reasoning word only in last user message", chat(t, nil, "user", "please debug", "assistant", "ok", "user", "thanks"), nil, 0},
		{"math latex", chat(t, nil, "user", `What is \frac{1}{2} of 8?`), []string{"math"}, 1},
		{"math equation", chat(t, nil, "user", "solve x^2 + 3x = 0"), []string{"math"}, 1},
		{"deep conversation", chat(t, nil, deep...), []string{"deep_conversation"}, 1},
		{"structured output", chat(t, map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x"}}}, "user", "hi"), []string{"structured_output"}, 1},
		{"long output", chat(t, map[string]any{"max_tokens": 4096}, "user", "hi"), []string{"long_output"}, 1},
		{"system prompt never scores", chat(t, nil, "system", prose(40000)+"\n"+snippet+"\nprove x^2 = 4", "user", "hi"), nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := c.Classify(tt.req)
			got := signalNamesOf(v)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") || v.Score != tt.score {
				t.Fatalf("signals %v score %d; want %v score %d", v.Signals, v.Score, tt.want, tt.score)
			}
		})
	}
}

// The context rows count characters (SPEC 4: "total message text >= 2,000
// characters"), not UTF-8 bytes: a German, Spanish or Japanese message is
// not longer than an English one with as many characters.
func TestContextCountsCharacters(t *testing.T) {
	c := defaults()
	rep := func(s string, n int) string { return strings.Repeat(s, n) }
	tests := []struct {
		name  string
		text  string
		want  []string
		score int
	}{
		{"1,000 kanji (3,000 bytes) are short", rep("語", 1000), nil, 0},
		{"1,999 umlauts (3,998 bytes) are short", rep("ä", 1999), nil, 0},
		{"2,000 umlauts are 2k", rep("ä", 2000), []string{"context_2k"}, 1},
		{"4,000 accented letters (8,000 bytes) are 2k", rep("é", 4000), []string{"context_2k"}, 1},
		{"8,000 kanji are 8k", rep("語", 8000), []string{"context_8k"}, 2},
		{"11,000 kanji (33,000 bytes) are 8k", rep("語", 11000), []string{"context_8k"}, 2},
		{"a snippet in 700 kanji of context stays easy", rep("語", 700) + "\n" + snippet, []string{"code"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := c.Classify(chat(t, nil, "user", tt.text))
			got := signalNamesOf(v)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") || v.Score != tt.score {
				t.Fatalf("signals %v score %d; want %v score %d", v.Signals, v.Score, tt.want, tt.score)
			}
		})
	}
}

func TestToolResultsAddAPoint(t *testing.T) {
	body := `{"model":"normal","tools":[{"type":"function","function":{"name":"ls"}}],"messages":[
		{"role":"user","content":"list files"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"1","content":"a.txt b.txt"}]}`
	r, err := wire.Parse([]byte(body), catalog.OpChat, wire.FormatOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	v := defaults().Classify(r)
	if got := strings.Join(signalNamesOf(v), ","); got != "tools,tool_results" || v.Score != 2 {
		t.Fatalf("got %s score %d", got, v.Score)
	}
}

func TestConfiguredPoints(t *testing.T) {
	c := New(config.SmartRouting{Threshold: 2, Points: map[string]int{"code": 0, "math": 5}})
	if c.Threshold() != 2 {
		t.Fatalf("threshold %d", c.Threshold())
	}
	v := c.Classify(chat(t, nil, "user", snippet))
	if v.Score != 0 || v.Tier != Easy {
		t.Fatalf("code switched off: got %+v", v)
	}
	v = c.Classify(chat(t, nil, "user", "x^2 = 4 and reason about it"))
	if v.Score != 5 || v.Tier != Hard || v.Signals[0].Points != 5 {
		t.Fatalf("math at 5: got %+v", v)
	}
	// missing keys take the defaults
	if d := New(config.SmartRouting{}); d.Threshold() != 4 || d.points[sigCode] != 3 {
		t.Fatalf("defaults: %+v", d)
	}
}

func TestDecide(t *testing.T) {
	route := config.TierRoute{Alias: "normal", Easy: "small", Hard: "big", DefaultTier: "easy"}
	easy := func() Verdict { return Verdict{Tier: Easy, Score: 0, Source: SourceClassified} }
	hard := func() Verdict { return Verdict{Tier: Hard, Score: 5, Source: SourceClassified} }
	never := func() Verdict { t.Fatal("classify called for an override"); return Verdict{} }
	tests := []struct {
		name      string
		route     config.TierRoute
		off       bool
		forced    string
		classify  func() Verdict
		pin       Tier
		havePin   bool
		tier      Tier
		source    string
		target    string
		newPin    Tier
		store     bool
		escalated bool
	}{
		{"thanks after a hard turn stays hard", route, false, "", easy, Hard, true, Hard, SourcePinned, "big", Hard, true, false},
		{"first request, easy", route, false, "", easy, Easy, false, Easy, SourceClassified, "small", Easy, true, false},
		{"first request, hard: no escalation without a pin", route, false, "", hard, Easy, false, Hard, SourceClassified, "big", Hard, true, false},
		{"easy pin escalates", route, false, "", hard, Easy, true, Hard, SourceClassified, "big", Hard, true, true},
		{"easy pin stays easy, refreshed", route, false, "", easy, Easy, true, Easy, SourceClassified, "small", Easy, true, false},
		{"hard pin, hard verdict", route, false, "", hard, Hard, true, Hard, SourceClassified, "big", Hard, true, false},
		{"forced easy does not lower the pin", route, false, "easy", never, Hard, true, Easy, SourceForced, "small", Hard, false, false},
		{"forced hard does not raise the pin", route, false, "HARD", never, Easy, true, Hard, SourceForced, "big", Easy, false, false},
		{"smart routing off uses the default tier", route, true, "", never, Hard, true, Easy, SourceBypass, "small", Hard, false, false},
		{"off with default hard", config.TierRoute{Easy: "small", Hard: "big", DefaultTier: "hard"}, true, "", never, Easy, false, Hard, SourceBypass, "big", Easy, false, false},
		{"forced wins over off", route, true, "hard", never, Easy, false, Hard, SourceForced, "big", Easy, false, false},
		{"unknown forced value is ignored", route, false, "medium", hard, Easy, true, Hard, SourceClassified, "big", Hard, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, newPin, store, esc := Decide(tt.route, tt.off, tt.forced, tt.classify, tt.pin, tt.havePin)
			if v.Tier != tt.tier || v.Source != tt.source || v.Target != tt.target || newPin != tt.newPin || store != tt.store || esc != tt.escalated {
				t.Fatalf("got tier %v source %s target %s newPin %v store %v escalated %v",
					v.Tier, v.Source, v.Target, newPin, store, esc)
			}
		})
	}
	// a pinned verdict keeps the classification's score for the histogram
	v, _, _, _ := Decide(route, false, "", func() Verdict { return Verdict{Tier: Easy, Score: 3, Source: SourceClassified} }, Hard, true)
	if v.Score != 3 {
		t.Fatalf("pinned score %d, want 3", v.Score)
	}
}

func TestParseTierAndString(t *testing.T) {
	for _, s := range []string{"easy", " Easy ", "hard", "HARD"} {
		tier, ok := ParseTier(s)
		if !ok || tier.String() != strings.ToLower(strings.TrimSpace(s)) {
			t.Fatalf("ParseTier(%q) = %v, %v", s, tier, ok)
		}
	}
	if _, ok := ParseTier("medium"); ok {
		t.Fatal("medium parsed")
	}
}

func TestClassifyNil(t *testing.T) {
	if v := defaults().Classify(nil); v.Tier != Easy {
		t.Fatalf("nil request: %+v", v)
	}
}

func TestClassifyAllocs(t *testing.T) {
	c := defaults()
	r := chat(t, nil, "user", "thanks!")
	if n := testing.AllocsPerRun(100, func() { c.Classify(r) }); n != 0 {
		t.Fatalf("thanks!: %v allocs, want 0", n)
	}
	r = chat(t, nil, "user", prose(4000)+"\n"+snippet+"\nplease debug")
	if n := testing.AllocsPerRun(100, func() { c.Classify(r) }); n > 1 {
		t.Fatalf("scored request: %v allocs, want <= 1", n)
	}
}
