package gateway

import (
	"testing"
)

// TestTierHeadersAnyCase: the override headers' values are read in any
// case, as tier.ParseTier reads a stored pin: X-Switchyard-Tier: Hard
// was a 400 "must be easy or hard", and X-Switchyard-Smart-Routing: OFF
// was ignored (the classifier ran). SPEC 4.
func TestTierHeadersAnyCase(t *testing.T) {
	n := newTestNode(t, simYAML)
	body := `{"model":"normal","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, header, value, source, tier string
	}{
		{"forced hard, capitalised", "X-Switchyard-Tier", "Hard", "forced", "hard"},
		{"forced easy, upper case", "X-Switchyard-Tier", " EASY ", "forced", "easy"},
		{"smart routing OFF", "X-Switchyard-Smart-Routing", "OFF", "bypass", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, body, tc.header, tc.value)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if got := w.Header().Get("X-Switchyard-Tier-Source"); got != tc.source {
				t.Errorf("tier source %q, want %q", got, tc.source)
			}
			if got := w.Header().Get("X-Switchyard-Tier"); tc.tier != "" && got != tc.tier {
				t.Errorf("tier %q, want %q", got, tc.tier)
			}
		})
	}
}
