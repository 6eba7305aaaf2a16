package cache

import "testing"

// A system (or developer) message sent in the middle of a conversation is
// not the system prompt at its start: an OpenAI-compatible upstream reads
// it where it stands ("from now on answer in French"), so the two
// requests' answers differ and their keys must too. Leading system
// messages are still the system prompt every format spells alike.
func TestKeySystemPosition(t *testing.T) {
	const (
		oaLead = `{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`
		oaMid  = `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"system","content":"S"},{"role":"user","content":"c"}]}`
		oaEnd  = `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"developer","content":"S"}]}`
		rsLead = `{"model":"m","input":[{"role":"system","content":"S"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`
		rsMid  = `{"model":"m","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"developer","content":"S"},{"role":"user","content":"c"}]}`
		rsIns  = `{"model":"m","instructions":"S","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`
		anLead = `{"model":"m","system":"S","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`
	)
	cases := []struct {
		name  string
		a, b  keyReq
		equal bool
	}{
		{"openai: a system message mid-conversation is not the system prompt", oa(oaLead), oa(oaMid), false},
		{"openai: nor one at the end", oa(oaLead), oa(oaEnd), false},
		{"openai: mid and end differ", oa(oaMid), oa(oaEnd), false},
		{"responses: a system item mid-conversation is not the system prompt", rs(rsLead), rs(rsMid), false},
		{"responses: nor are instructions", rs(rsIns), rs(rsMid), false},
		{"openai mid = responses mid", oa(oaMid), rs(rsMid), true},
		{"leading: openai = anthropic", oa(oaLead), an(anLead), true},
		{"leading: openai = responses input", oa(oaLead), rs(rsLead), true},
		{"leading: openai = responses instructions", oa(oaLead), rs(rsIns), true},
	}
	for _, c := range cases {
		ka, kb := mustKey(t, c.a, "t", ""), mustKey(t, c.b, "t", "")
		if (ka == kb) != c.equal {
			t.Errorf("%s: keys equal %v, want %v", c.name, ka == kb, c.equal)
		}
	}
}
