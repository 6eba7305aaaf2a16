package cache_test

import (
	"fmt"
	"time"

	"switchyard/cache"
	"switchyard/catalog"
	"switchyard/wire"
)

// A miss stored from an Anthropic answer, then a hit for the same
// conversation sent in the OpenAI format.
func Example() {
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	local := cache.NewLocal(64 << 20)

	anReq := []byte(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	k, _ := cache.KeyOf(catalog.OpChat, wire.FormatAnthropic, anReq, "team-a", "")
	answer := []byte(`{"type":"message","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
	e, _ := cache.FromBody(catalog.OpChat, wire.FormatAnthropic, answer, cache.Meta{Model: "m", Deployment: "d1", Now: now})
	if b, ok := e.EncodeLimited(1 << 20); ok {
		local.Put(k, b, "team-a", "m", now, time.Hour)
	}

	oaReq := []byte(`{"messages":[{"content":"hi","role":"user"}],"max_tokens":64,"model":"m","stream":true}`)
	k2, _ := cache.KeyOf(catalog.OpChat, wire.FormatOpenAI, oaReq, "team-a", "")
	raw, hit := local.Get(k2, now.Add(90*time.Second))
	stored, _ := cache.Decode(raw)
	client, _ := wire.Parse(oaReq, catalog.OpChat, wire.FormatOpenAI)
	out, _ := cache.Render(stored, cache.Target{Format: wire.FormatOpenAI, Stream: true, Client: client, Now: now})
	fmt.Println(hit, stored.Age(now.Add(90*time.Second)), len(out) > 0)
	// Output: true 90 true
}
