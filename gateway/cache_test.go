package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/cache"
	"switchyard/catalog"
	"switchyard/config"
	"switchyard/wire"
)

var cacheT0 = time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)

func cachePolicy() *cache.Policy {
	on := true
	return cache.NewPolicy(&config.Config{Cache: config.Cache{TTL: time.Hour},
		Models: []config.Model{{Name: "m", Cache: config.ModelCache{Enabled: &on}}, {Name: "easy", Cache: config.ModelCache{Enabled: &on, TTL: time.Minute}},
			{Name: "hard", Cache: config.ModelCache{Enabled: &on}}}})
}

// cacheTeam is a team record whose own cache switch is on (team "t" of
// the views below) or unset (any other name: it inherits the global off).
func cacheTeam(name string) *catalog.Team {
	on := true
	t := &catalog.Team{Team: config.Team{Name: name}}
	if name == "t" {
		t.Cache = config.TeamCache{Enabled: &on}
	}
	return t
}

func parsed(t *testing.T, op catalog.Operation, f wire.Format, body string) *wire.Request {
	t.Helper()
	r, err := wire.Parse([]byte(body), op, f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCacheView(t *testing.T) {
	p := cachePolicy()
	chat := parsed(t, catalog.OpChat, wire.FormatOpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	h := http.Header{"Cache-Control": {"max-age=5"}}
	v := newCacheView(p, cacheTeam("t"), chat, h, false, "m")
	if v == nil || !v.dir.HasMaxAge || v.ttl != time.Hour || v.key("") != v.keys[0] {
		t.Fatalf("%+v", v)
	}
	if newCacheView(p, cacheTeam("other"), chat, h, false, "m") != nil || newCacheView(nil, cacheTeam("t"), chat, h, false, "m") != nil {
		t.Fatal("cacheable with the cache off")
	}
	n2 := parsed(t, catalog.OpChat, wire.FormatOpenAI, `{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	if newCacheView(p, cacheTeam("t"), n2, h, false, "m") != nil {
		t.Fatal("n=2 cacheable")
	}
	a := newCacheView(p, cacheTeam("t"), chat, nil, true, "easy", "hard")
	if a == nil || a.key("easy") == a.key("hard") || a.ttl != time.Minute {
		t.Fatalf("alias view %+v", a)
	}
	e := &cache.Entry{StoredAt: cacheT0, Finish: "stop"}
	if !a.usable(e, cacheT0.Add(time.Hour)) || v.usable(e, cacheT0.Add(6*time.Second)) || !v.usable(e, cacheT0.Add(5*time.Second)) {
		t.Fatal("usable")
	}
	nc := newCacheView(p, cacheTeam("t"), chat, http.Header{"Cache-Control": {"no-cache"}}, false, "m")
	if nc.usable(e, cacheT0) {
		t.Fatal("no-cache answered from the cache")
	}
}

func TestCacheHeadersAndRender(t *testing.T) {
	e := &cache.Entry{Text: "hi", Finish: "stop", Model: "m", StoredAt: cacheT0, Usage: cache.Usage{PromptTokens: 1, CompletionTokens: 1}}
	h := http.Header{}
	setCacheHeaders(h, cacheHit, e, cacheT0.Add(2500*time.Millisecond))
	if h.Get("X-Switchyard-Cache") != "hit" || h.Get("Age") != "2" || h.Get("X-Switchyard-Model") != "m" || h.Get("X-Switchyard-Attempts") != "0" {
		t.Fatalf("%v", h)
	}
	h = http.Header{}
	setCacheHeaders(h, cacheMiss, nil, cacheT0)
	if h.Get("X-Switchyard-Cache") != "miss" || h.Get("Age") != "" {
		t.Fatalf("%v", h)
	}
	req := parsed(t, catalog.OpChat, wire.FormatAnthropic, `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	v := newCacheView(cachePolicy(), cacheTeam("t"), req, nil, false, "m")
	body, ct, err := renderCached(e, cacheTarget(req, v, cacheT0, nil))
	if err != nil || ct != "text/event-stream" || !bytes.HasSuffix(body, []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")) {
		t.Fatalf("%v %s\n%s", err, ct, body)
	}
	if e := errCacheMiss(); e.Status != http.StatusGatewayTimeout || e.Code != "cache_miss" {
		t.Fatalf("%+v", e)
	}
}

// TestCacheTapFollower: a leader's Anthropic stream, tapped, reaches an
// OpenAI follower event by event and becomes the stored entry.
func TestCacheTapFollower(t *testing.T) {
	g := cache.NewGroup(64, 1<<20)
	k := cache.Key{1}
	lead, _ := g.Lead(k, true)
	_, fl := g.Lead(k, true)
	tap := newCacheTap(wire.FormatAnthropic, 1<<20, lead)
	defer tap.fail()

	oaReq := parsed(t, catalog.OpChat, wire.FormatOpenAI, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	r, err := cache.NewRenderer(cache.Target{Format: wire.FormatOpenAI, Stream: true, Client: oaReq, Now: cacheT0}, "m", 3)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() {
		var out bytes.Buffer
		_, err := followStream(context.Background(), time.Minute, fl, r, func(b []byte) error { out.Write(b); return nil })
		if err != nil {
			out.WriteString("ERR " + err.Error())
		}
		done <- out.String()
	}()
	events := []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	}
	for _, ev := range events {
		tap.relayed([]byte(ev))
	}
	e, enc := tap.finish(cache.Meta{Model: "m", Deployment: "d", Now: cacheT0}, cache.Usage{}, 1<<20, false, nil)
	if e == nil || e.Text != "Hi there" || e.Usage != (cache.Usage{PromptTokens: 3, CompletionTokens: 2}) {
		t.Fatalf("entry %+v", e)
	}
	if d, err := cache.Decode(enc); err != nil || d.Text != "Hi there" {
		t.Fatalf("%v %+v", err, d)
	}
	out := <-done
	for _, want := range []string{`"content":"Hi "`, `"content":"there"`, `"finish_reason":"stop"`, "data: [DONE]\n\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("follower missed %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"usage"`) {
		t.Fatal("usage chunk the client did not ask for")
	}
}

// TestCacheTapFailure: an error event releases the followers at once and
// nothing is stored; so is a degraded answer.
func TestCacheTapFailure(t *testing.T) {
	g := cache.NewGroup(64, 1<<20)
	lead, _ := g.Lead(cache.Key{2}, false)
	_, fl := g.Lead(cache.Key{2}, false)
	tap := newCacheTap(wire.FormatOpenAI, 1<<20, lead)
	tap.relayed([]byte("data: {\"error\":{\"message\":\"boom\"}}\n\n"))
	if _, err := fl.Wait(context.Background()); !errors.Is(err, cache.ErrLeaderFailed) {
		t.Fatalf("follower: %v", err)
	}
	if e, _ := tap.finish(cache.Meta{}, cache.Usage{}, 1<<20, false, nil); e != nil {
		t.Fatal("stored a failed stream")
	}
	tap2 := newCacheTap(wire.FormatOpenAI, 1<<20, nil)
	tap2.relayed([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	if e, _ := tap2.finish(cache.Meta{}, cache.Usage{}, 1<<20, true, nil); e != nil {
		t.Fatal("stored a degraded answer")
	}
}

func TestSyncEntry(t *testing.T) {
	req := parsed(t, catalog.OpChat, wire.FormatOpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	g := cache.NewGroup(4, 1<<20)
	lead, _ := g.Lead(cache.Key{3}, false)
	_, fl := g.Lead(cache.Key{3}, false)
	body := `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
	// the entry is stored before the flight ends: a request that finds
	// the flight over finds the entry
	stored, inFlight := false, false
	e, enc := syncEntry(req, []byte(body), cache.Meta{Model: "m", Now: cacheT0}, 1<<20, lead, func(*cache.Entry, []byte) {
		stored, inFlight = true, g.InFlight(cache.Key{3})
	})
	if e == nil || enc == nil || !stored || !inFlight {
		t.Fatalf("entry %v, stored %v, while in flight %v", e != nil, stored, inFlight)
	}
	if got, err := fl.Wait(context.Background()); err != nil || got.Text != "ok" {
		t.Fatalf("%v %+v", err, got)
	}
	if e, _ := syncEntry(req, []byte(body), cache.Meta{}, 10, nil, nil); e != nil {
		t.Fatal("stored over max_entry_bytes")
	}
}

// TestFollowStreamWait: a follower that waited coalesce_wait without a
// first delta goes on alone, having written nothing.
func TestFollowStreamWait(t *testing.T) {
	g := cache.NewGroup(4, 1<<20)
	lead, _ := g.Lead(cache.Key{4}, true)
	defer lead.Fail()
	_, fl := g.Lead(cache.Key{4}, true)
	r, err := cache.NewRenderer(cache.Target{Format: wire.FormatOpenAI, Stream: true, Now: cacheT0}, "m", 1)
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := followStream(context.Background(), 0, fl, r, func([]byte) error { return nil })
	if wrote || !errors.Is(err, context.DeadlineExceeded) || lead.Followers() != 0 {
		t.Fatalf("wrote %v err %v followers %d", wrote, err, lead.Followers())
	}
}
