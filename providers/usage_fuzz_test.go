package providers

import (
	"encoding/json"
	"testing"

	"switchyard/wire"
)

var usageSeeds = []string{
	`{"usage":{"prompt_tokens":9,"completion_tokens":16,"total_tokens":25}}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":3}}}`,
	`{"usage":{"input_tokens":7,"output_tokens":2}}`,
	`{"usage":null}`,
	`{"usage":{"prompt_tokens":null,"completion_tokens":4}}`,
	`{"usage":{"prompt_tokens":9.0}}`,
	`{"usage":{"prompt_tokens":"9"}}`,
	`{"usage":{"prompt_tokens":-3}}`,
	`{"usage":{"prompt_tokens":1e2}}`,
	`{"usage":{"prompt_tokens":012}}`,
	`{"usage":{"prompt_tokens":99999999999999999999}}`,
	`{"usage":{"prompt_tokens":1,"prompt_tokens":2}}`,
	`{"usage":{}}`,
	`{"usage":{"prompt_tokens":5 , "completion_tokens" : 6 }}`,
	`{"usage":[1]}`,
	`{"usage":{"prompt_tokens":}}`,
	`{"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":32},"output_tokens":5}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":null,"audio_tokens":0}}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":7}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":"3"}}}`,
}

// TestOpenAIUsageTable pins what the scanner reads, case by case.
func TestOpenAIUsageTable(t *testing.T) {
	for _, tc := range []struct {
		body      string
		p, c, cch int
		wantOK    bool
	}{
		{usageSeeds[0], 9, 16, 0, true},
		{usageSeeds[1], 9, 16, 3, true},
		{usageSeeds[2], 7, 2, 0, true},
		{usageSeeds[3], 0, 0, 0, false},
		{usageSeeds[4], 0, 4, 0, true},
		{usageSeeds[5], 0, 0, 0, false},
		{usageSeeds[6], 0, 0, 0, false},
		{usageSeeds[11], 2, 0, 0, true},
		{usageSeeds[13], 5, 6, 0, true},
		{usageSeeds[14], 0, 0, 0, false},
		{usageSeeds[15], 0, 0, 0, false},
		{usageSeeds[16], 40, 5, 32, true},
		{usageSeeds[17], 9, 0, 0, true},
		{usageSeeds[18], 9, 0, 0, true},
		{usageSeeds[19], 0, 0, 0, false},
		{usageSeeds[20], 0, 0, 0, false},
	} {
		u, ok := openAIUsageOK([]byte(tc.body))
		if ok != tc.wantOK || u.PromptTokens != tc.p || u.CompletionTokens != tc.c || u.CachedTokens != tc.cch {
			t.Errorf("%s: got %+v ok=%v, want %d/%d/%d ok=%v", tc.body, u, ok, tc.p, tc.c, tc.cch, tc.wantOK)
		}
	}
}

// FuzzOpenAIUsage checks the reflection-free scanner against
// encoding/json, on every usage object whose keys encoding/json and the
// scanner read alike (plain lower-case keys: encoding/json also matches
// keys case-insensitively and through escapes, which no provider sends).
func FuzzOpenAIUsage(f *testing.F) {
	for _, s := range usageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := openAIUsageOK(body) // never panics, whatever the bytes
		var outer map[string]json.RawMessage
		if json.Unmarshal(body, &outer) != nil {
			return
		}
		raw, present := outer["usage"]
		if !present || len(raw) == 0 || raw[0] != '{' {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return
		}
		if !plainKeys(members) {
			return
		}
		// the details objects are read by key too
		for _, k := range []string{"prompt_tokens_details", "input_tokens_details"} {
			var inner map[string]json.RawMessage
			if v := members[k]; len(v) > 0 && v[0] == '{' && (json.Unmarshal(v, &inner) != nil || !plainKeys(inner)) {
				return
			}
		}
		var want openAIUsage
		wantOK := json.Unmarshal(raw, &want) == nil
		if ok != wantOK {
			t.Fatalf("%s: scanner ok=%v, encoding/json ok=%v", raw, ok, wantOK)
		}
		if ok && got != want.usage() {
			t.Fatalf("%s: scanner %+v, encoding/json %+v", raw, got, want.usage())
		}
	})
}

// BenchmarkOpenAIUsage is the usage read of every OpenAI response: the
// scanner next to the reader it replaced (the same span found, then
// decoded with encoding/json).
func BenchmarkOpenAIUsage(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":16,"total_tokens":25}}`)
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if u, ok := openAIUsageOK(body); !ok || u.CompletionTokens != 16 {
				b.Fatal(u, ok)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, e, _ := wire.FindTopLevel(body, "usage")
			var u openAIUsage
			if err := json.Unmarshal(body[s:e], &u); err != nil || u.CompletionTokens != 16 {
				b.Fatal(err)
			}
		}
	})
}

// plainKeys reports whether every key is lower-case letters and '_'.
func plainKeys(m map[string]json.RawMessage) bool {
	for k := range m {
		for _, c := range []byte(k) {
			if (c < 'a' || c > 'z') && c != '_' {
				return false
			}
		}
	}
	return true
}
