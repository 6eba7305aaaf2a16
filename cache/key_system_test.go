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

// A system prompt's text never shares a key with a system block of another
// kind, nor one block's fields with another split of them, and a
// tool_choice string is not the object form it spells: each pair below
// asks the upstream something else, and one key for both would serve one
// answer for the other.
func TestKeySystemPartsUnambiguous(t *testing.T) {
	const (
		anImage = `{"model":"m","max_tokens":8,"system":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}}],"messages":[{"role":"user","content":"a"}]}`
		anText  = `{"model":"m","max_tokens":8,"system":"image:https://x/a.png","messages":[{"role":"user","content":"a"}]}`
		oaFn    = `{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"function","function":{"name":"f"}}}`
		oaFnStr = `{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":"function:f"}`
		oaRaw   = `{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"x"}}`
		oaRawS  = `{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":"raw:{\"type\":\"x\"}"}`
		oaAny   = `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"a"}],"tool_choice":"required"}`
		anAny   = `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"any"}}`
	)
	if ka, kb := mustKey(t, an(anImage), "t", ""), mustKey(t, an(anText), "t", ""); ka == kb {
		t.Error("a system image block and the text \"image:<its url>\" share a key")
	}
	if ka, kb := mustKey(t, oa(oaFn), "t", ""), mustKey(t, oa(oaFnStr), "t", ""); ka == kb {
		t.Error(`tool_choice {"type":"function",...} and the string "function:f" share a key`)
	}
	if ka, kb := mustKey(t, oa(oaRaw), "t", ""), mustKey(t, oa(oaRawS), "t", ""); ka == kb {
		t.Error(`an unknown tool_choice object and the string "raw:<it>" share a key`)
	}
	// what every format spells alike still shares one
	if ka, kb := mustKey(t, oa(oaAny), "t", ""), mustKey(t, an(anAny), "t", ""); ka != kb {
		t.Error(`tool_choice "required" and Anthropic's {"type":"any"} no longer share a key`)
	}
	split := func(url, text string) []string {
		return appendTexts(nil, []Part{{Type: "image", URL: url, Text: text}})
	}
	if a, b := split("ab", ""), split("a", "b"); a[0] == b[0] {
		t.Errorf("a block's url and text are not kept apart: %q", a[0])
	}
}
