package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A streaming coalesced follower carries what a hit carries (SPEC 18,
// 12.3): X-Switchyard-Cache: coalesced, X-Switchyard-Model (the public
// model that served the leader), Age and X-Switchyard-Attempts: 0; and its
// headers and first event go out while the leader is still mid-stream (not
// held until the answer is complete). Followers in the OpenAI and the
// Anthropic format, over real loopback HTTP.
func TestFix5StreamFollowerHeaders(t *testing.T) {
	var calls atomic.Int64
	up, release := heldStream(t, &calls)
	defer up.Close()
	n := cacheNode(t, up.URL, "", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	gw := httptest.NewServer(n.Handler())
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const msgs = `"max_tokens":64,"stream":true,"messages":[{"role":"user","content":"herd"}]`
	// open sends a stream request and reads up to its first event
	open := func(path string) (*http.Response, *bufio.Reader) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+path, strings.NewReader(`{"model":"m",`+msgs+`}`))
		req.Header.Set("Authorization", "Bearer sk-a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: stream ended before its first event: %v", path, err)
			}
			if strings.Contains(line, "first ") {
				return resp, br
			}
		}
	}
	leader, lb := open("/v1/chat/completions")
	if leader.Header.Get("X-Switchyard-Cache") != "miss" {
		t.Fatalf("leader: %v", leader.Header)
	}
	model := leader.Header.Get("X-Switchyard-Model")
	// the leader is held mid-stream until release: each follower's headers
	// and first event reached it before the leader's answer was complete
	type stream struct {
		resp *http.Response
		br   *bufio.Reader
	}
	followers := map[string]stream{}
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		resp, br := open(path)
		followers[path] = stream{resp, br}
		h := resp.Header
		if h.Get("X-Switchyard-Cache") != "coalesced" || h.Get("X-Switchyard-Model") != model || model == "" ||
			h.Get("Age") != "0" || h.Get("X-Switchyard-Attempts") != "0" {
			t.Errorf("%s follower: Cache %q Model %q (leader %q) Age %q Attempts %q: want what a hit carries",
				path, h.Get("X-Switchyard-Cache"), h.Get("X-Switchyard-Model"), model, h.Get("Age"), h.Get("X-Switchyard-Attempts"))
		}
	}
	close(release)
	for path, s := range map[string]stream{"leader": {leader, lb}, "/v1/chat/completions": followers["/v1/chat/completions"], "/v1/messages": followers["/v1/messages"]} {
		rest, err := io.ReadAll(s.br)
		s.resp.Body.Close()
		if err != nil || !strings.Contains(string(rest), "second") {
			t.Fatalf("%s: stream incomplete: %v %s", path, err, rest)
		}
	}
	// a hit now: the same headers the followers carried
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", `{"model":"m",`+msgs+`}`)
	if w.Header().Get("X-Switchyard-Cache") != "hit" || w.Header().Get("X-Switchyard-Model") != model || w.Header().Get("Age") == "" {
		t.Fatalf("hit: %v", w.Header())
	}
}
