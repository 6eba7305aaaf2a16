package cache

import (
	"errors"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

type keyReq struct {
	op     catalog.Operation
	format wire.Format
	body   string
}

func oa(body string) keyReq  { return keyReq{catalog.OpChat, wire.FormatOpenAI, body} }
func an(body string) keyReq  { return keyReq{catalog.OpChat, wire.FormatAnthropic, body} }
func rs(body string) keyReq  { return keyReq{catalog.OpChat, wire.FormatResponses, body} }
func emb(body string) keyReq { return keyReq{catalog.OpEmbeddings, wire.FormatOpenAI, body} }
func mustKey(t *testing.T, r keyReq, team, tier string) Key {
	t.Helper()
	k, err := KeyOf(r.op, r.format, []byte(r.body), team, tier)
	if err != nil {
		t.Fatalf("KeyOf(%s): %v", r.body, err)
	}
	return k
}

// The same conversation in the three chat formats.
const (
	oaBase = `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":100,"temperature":0.5}`
	anBase = `{"model":"m","system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":100,"temperature":0.5}`
	rsBase = `{"model":"m","instructions":"be brief","input":"hi","max_output_tokens":100,"temperature":0.5}`

	oaTools = `{"model":"m","messages":[{"role":"user","content":"weather?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{\"city\": \"Oslo\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"sunny"}],
		"tools":[{"type":"function","function":{"name":"get","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
		"tool_choice":"required","max_tokens":50}`
	anTools = `{"model":"m","max_tokens":50,"tool_choice":{"type":"any"},
		"tools":[{"name":"get","description":"weather","input_schema":{"properties":{"city":{"type":"string"}},"type":"object"}}],
		"messages":[{"role":"user","content":"weather?"},
		{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"get","input":{"city":"Oslo"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"}]}]}`
	rsTools = `{"model":"m","max_output_tokens":50,"tool_choice":"required",
		"tools":[{"type":"function","name":"get","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}],
		"input":[{"role":"user","content":[{"type":"input_text","text":"weather?"}]},
		{"type":"function_call","call_id":"c1","name":"get","arguments":"{\"city\":\"Oslo\"}"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`
)

func TestKeyEqual(t *testing.T) {
	cases := []struct {
		name string
		a, b keyReq
	}{
		{"key order and whitespace", oa(oaBase), oa(`{ "temperature" : 0.5,
			"max_tokens": 100, "model": "m",
			"messages": [ {"content": "be brief", "role": "system"}, {"content": "hi", "role": "user"} ] }`)},
		{"openai = anthropic", oa(oaBase), an(anBase)},
		{"openai = responses", oa(oaBase), rs(rsBase)},
		{"anthropic = responses", an(anBase), rs(rsBase)},
		{"tools: openai = anthropic", oa(oaTools), an(anTools)},
		{"tools: openai = responses", oa(oaTools), rs(rsTools)},
		{"stream, stream_options, user, metadata, store excluded", oa(oaBase),
			oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","stream":true,"stream_options":{"include_usage":true},"user":"u1","metadata":{"a":"b"},"store":true`, 1))},
		{"anthropic metadata and stream excluded", an(anBase), an(strings.Replace(anBase, `"model":"m"`, `"model":"m","stream":true,"metadata":{"user_id":"x"}`, 1))},
		{"responses store, user excluded", rs(rsBase), rs(strings.Replace(rsBase, `"model":"m"`, `"model":"m","store":false,"user":"z","stream":true`, 1))},
		{"a number spelled 0.50", oa(oaBase), oa(strings.Replace(oaBase, "0.5", "0.50", 1))},
		{"null is absent", oa(oaBase), oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","seed":null`, 1))},
		{"max_completion_tokens = max_tokens", oa(oaBase), oa(strings.Replace(oaBase, "max_tokens", "max_completion_tokens", 1))},
		{"content parts = string", oa(oaBase), oa(strings.Replace(oaBase, `"content":"hi"`, `"content":[{"type":"text","text":"hi"}]`, 1))},
		{"developer = system", oa(oaBase), oa(strings.Replace(oaBase, `"role":"system"`, `"role":"developer"`, 1))},
		{"embeddings: string = list of one", emb(`{"model":"e","input":"x"}`), emb(`{"input":["x"],"model":"e","user":"u"}`)},
		{"anthropic cache_control ignored", an(anBase), an(strings.Replace(anBase, `"text":"hi"}`, `"text":"hi","cache_control":{"type":"ephemeral"}}`, 1))},
		{"reasoning effort: chat = responses", oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","reasoning_effort":"high"`, 1)),
			rs(strings.Replace(rsBase, `"model":"m"`, `"model":"m","reasoning":{"effort":"high"}`, 1))},
		{"json schema: chat = responses",
			oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"},"strict":true}}`, 1)),
			rs(strings.Replace(rsBase, `"model":"m"`, `"model":"m","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"},"strict":true}}`, 1))},
		{"named tool choice: openai = anthropic", oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","tool_choice":{"type":"function","function":{"name":"f"}}`, 1)),
			an(strings.Replace(anBase, `"model":"m"`, `"model":"m","tool_choice":{"type":"tool","name":"f"}`, 1))},
		{"named tool choice: openai = responses", oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","tool_choice":{"type":"function","function":{"name":"f"}}`, 1)),
			rs(strings.Replace(rsBase, `"model":"m"`, `"model":"m","tool_choice":{"type":"function","name":"f"}`, 1))},
		{"tool choice none: openai = anthropic", oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","tool_choice":"none"`, 1)),
			an(strings.Replace(anBase, `"model":"m"`, `"model":"m","tool_choice":{"type":"none"}`, 1))},
		{"disable_parallel_tool_use = parallel_tool_calls false", oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","tool_choice":"auto","parallel_tool_calls":false`, 1)),
			an(strings.Replace(anBase, `"model":"m"`, `"model":"m","tool_choice":{"type":"auto","disable_parallel_tool_use":true}`, 1))},
		{"stop string = stop_sequences", oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","stop":"END"`, 1)),
			an(strings.Replace(anBase, `"model":"m"`, `"model":"m","stop_sequences":["END"]`, 1))},
		{"image: openai data URL = anthropic base64", oa(strings.Replace(oaBase, `"content":"hi"`, `"content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]`, 1)),
			an(strings.Replace(anBase, `{"type":"text","text":"hi"}`, `{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}`, 1))},
		{"image: openai = responses", oa(strings.Replace(oaBase, `"content":"hi"`, `"content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]`, 1)),
			rs(strings.Replace(rsBase, `"input":"hi"`, `"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"https://x/y.png","detail":"low"}]}]`, 1))},
		{"an escaped key means its name", oa(oaBase), oa(strings.Replace(oaBase, `"temperature"`, `"temper\u0061ture"`, 1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if a, b := mustKey(t, c.a, "team", ""), mustKey(t, c.b, "team", ""); a != b {
				ca, _ := Parse(c.a.op, c.a.format, []byte(c.a.body))
				cb, _ := Parse(c.b.op, c.b.format, []byte(c.b.body))
				t.Fatalf("keys differ:\n%+v\n%+v", ca, cb)
			}
		})
	}
}

func TestKeyDiffers(t *testing.T) {
	with := func(field string) keyReq {
		return oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m",`+field, 1))
	}
	base := oa(oaBase)
	cases := []struct {
		name string
		b    keyReq
	}{
		{"model", oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m2"`, 1))},
		{"message text", oa(strings.Replace(oaBase, `"hi"`, `"hi!"`, 1))},
		{"system", oa(strings.Replace(oaBase, "be brief", "be long", 1))},
		{"role", oa(strings.Replace(oaBase, `"role":"user"`, `"role":"assistant"`, 1))},
		{"temperature", oa(strings.Replace(oaBase, "0.5", "0.6", 1))},
		{"max tokens", oa(strings.Replace(oaBase, "100", "101", 1))},
		{"max tokens absent", oa(strings.Replace(oaBase, `"max_tokens":100,`, ``, 1))},
		{"top_p", with(`"top_p":0.9`)},
		{"seed", with(`"seed":7`)},
		{"stop", with(`"stop":["x"]`)},
		{"n=1 present", with(`"n":1`)},
		{"tools", with(`"tools":[{"type":"function","function":{"name":"f"}}]`)},
		{"tool_choice", with(`"tool_choice":"none"`)},
		{"parallel_tool_calls", with(`"parallel_tool_calls":false`)},
		{"response_format", with(`"response_format":{"type":"json_object"}`)},
		{"reasoning_effort", with(`"reasoning_effort":"low"`)},
		{"frequency_penalty (unmapped field)", with(`"frequency_penalty":0.1`)},
		{"logit_bias (unmapped field)", with(`"logit_bias":{"50256":-100}`)},
		{"image part", oa(strings.Replace(oaBase, `"content":"hi"`, `"content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]`, 1))},
		{"anthropic top_k", an(strings.Replace(anBase, `"model":"m"`, `"model":"m","top_k":5`, 1))},
		{"anthropic thinking", an(strings.Replace(anBase, `"model":"m"`, `"model":"m","thinking":{"type":"enabled","budget_tokens":1024}`, 1))},
		{"responses reasoning summary", rs(strings.Replace(rsBase, `"model":"m"`, `"model":"m","reasoning":{"summary":"auto"}`, 1))},
		{"tool result text", oa(strings.Replace(oaTools, "sunny", "rainy", 1))},
		{"tool call arguments", oa(strings.Replace(oaTools, "Oslo", "Bergen", 1))},
		{"embeddings", emb(`{"model":"m","input":"hi"}`)},
		{"legacy function_call in a turn", oa(strings.Replace(oaBase, `"content":"hi"}`, `"content":"hi"},{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}`, 1))},
	}
	k0 := mustKey(t, base, "team", "")
	seen := map[Key]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := mustKey(t, c.b, "team", "")
			if k == k0 {
				t.Fatal("same key as the base request")
			}
			if other, dup := seen[k]; dup {
				t.Fatalf("same key as %q", other)
			}
			seen[k] = c.name
		})
	}
	t.Run("dimensions and encoding_format", func(t *testing.T) {
		a := mustKey(t, emb(`{"model":"e","input":"x"}`), "t", "")
		b := mustKey(t, emb(`{"model":"e","input":"x","dimensions":8}`), "t", "")
		c := mustKey(t, emb(`{"model":"e","input":"x","encoding_format":"base64"}`), "t", "")
		if a == b || a == c || b == c {
			t.Fatal("embedding settings must change the key")
		}
	})
}

func TestKeyScope(t *testing.T) {
	r := oa(oaBase)
	if mustKey(t, r, "a", "") == mustKey(t, r, "b", "") {
		t.Fatal("two teams share a key")
	}
	if mustKey(t, r, "a", "easy") == mustKey(t, r, "a", "hard") {
		t.Fatal("two tiers share a key")
	}
	// the length prefix keeps ("ab","") and ("a","b") apart
	if mustKey(t, r, "ab", "") == mustKey(t, r, "a", "b") {
		t.Fatal("scope fields run together")
	}
}

func TestNotCacheable(t *testing.T) {
	cases := []struct {
		name string
		r    keyReq
	}{
		{"images", keyReq{catalog.OpImages, wire.FormatOpenAI, `{"model":"i","prompt":"cat"}`}},
		{"n > 1", oa(strings.Replace(oaBase, `"model":"m"`, `"model":"m","n":2`, 1))},
		{"previous_response_id", rs(strings.Replace(rsBase, `"model":"m"`, `"model":"m","previous_response_id":"resp_1"`, 1))},
		{"conversation", rs(strings.Replace(rsBase, `"model":"m"`, `"model":"m","conversation":"conv_1"`, 1))},
		{"background", rs(strings.Replace(rsBase, `"model":"m"`, `"model":"m","background":true`, 1))},
		{"item_reference", rs(`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`)},
		{"not JSON", oa(`{"model":`)},
		{"not an object", oa(`[1,2]`)},
		{"wrong type", oa(`{"model":"m","temperature":"hot","messages":[]}`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := KeyOf(c.r.op, c.r.format, []byte(c.r.body), "t", "")
			if !errors.Is(err, ErrNotCacheable) {
				t.Fatalf("got %v, want ErrNotCacheable", err)
			}
		})
	}
}

// TestItemsOfRequest: the key reads wire's items for a Responses request's
// own input, and the body when an item's output came as parts or the
// input holds stored turns or references.
func TestItemsOfRequest(t *testing.T) {
	for _, c := range []struct {
		body string
		read bool
	}{
		{`{"model":"m","input":[{"role":"user","content":"x"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`, true},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"ok"}]}]}`, false},
		{`{"model":"m","previous_response_id":"resp_1","input":[{"role":"user","content":"x"}]}`, false},
		{`{"model":"m","input":[{"type":"item_reference","id":"i"}]}`, false},
	} {
		req, err := wire.Parse([]byte(c.body), catalog.OpChat, wire.FormatResponses)
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if got := itemsOfRequest(req.Responses) != nil; got != c.read {
			t.Errorf("%s: items read %v, want %v", c.body, got, c.read)
		}
	}
}
