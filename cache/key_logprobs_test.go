package cache

import (
	"errors"
	"testing"
)

// An entry holds text, tool calls, the finish and usage (SPEC 18), never
// log probabilities: a request that asks for them would be answered from
// the cache without them, so it is not cacheable. One that does not ask
// (false, none, an include of something else) stays cacheable.
func TestKeyLogprobsNotCacheable(t *testing.T) {
	cases := []struct {
		name      string
		r         keyReq
		cacheable bool
	}{
		{"chat logprobs", oa(`{"model":"m","logprobs":true,"messages":[{"role":"user","content":"x"}]}`), false},
		{"chat top_logprobs", oa(`{"model":"m","logprobs":true,"top_logprobs":3,"messages":[{"role":"user","content":"x"}]}`), false},
		{"chat logprobs false", oa(`{"model":"m","logprobs":false,"messages":[{"role":"user","content":"x"}]}`), true},
		{"chat logprobs null", oa(`{"model":"m","logprobs":null,"messages":[{"role":"user","content":"x"}]}`), true},
		{"responses include logprobs", rs(`{"model":"m","include":["message.output_text.logprobs"],"input":"x"}`), false},
		{"responses top_logprobs", rs(`{"model":"m","top_logprobs":2,"input":"x"}`), false},
		{"responses top_logprobs 0", rs(`{"model":"m","top_logprobs":0,"input":"x"}`), true},
		{"responses include other", rs(`{"model":"m","include":["reasoning.encrypted_content"],"input":"x"}`), true},
	}
	for _, c := range cases {
		_, err := Parse(c.r.op, c.r.format, []byte(c.r.body))
		if got := err == nil; got != c.cacheable {
			t.Errorf("%s: cacheable %v (%v), want %v", c.name, got, err, c.cacheable)
		}
		if err != nil && !errors.Is(err, ErrNotCacheable) {
			t.Errorf("%s: %v is not ErrNotCacheable", c.name, err)
		}
	}
}
